import java.io.*;

/** Raw snappy blocks made by snappy-java (the library Kafka compresses with), for the tests:
 *  reads [int n][n x (int length, bytes)] from args[0], writes the same framing of the
 *  compressed inputs to args[1]. */
public class SnappyBlocks {
    public static void main(String[] args) throws Exception {
        try (DataInputStream in = new DataInputStream(new BufferedInputStream(new FileInputStream(args[0])));
             DataOutputStream out = new DataOutputStream(new BufferedOutputStream(new FileOutputStream(args[1])))) {
            int n = in.readInt();
            out.writeInt(n);
            for (int i = 0; i < n; i++) {
                byte[] data = new byte[in.readInt()];
                in.readFully(data);
                byte[] block = org.xerial.snappy.Snappy.compress(data);
                out.writeInt(block.length);
                out.write(block);
            }
        }
    }
}
