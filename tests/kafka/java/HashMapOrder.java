import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.util.HashMap;
import java.util.Map;

/** Keys put into a new HashMap<Long, ...> in the given order, written back in its iteration order.
 * In: int32 cases, then per case int32 n and n int64 keys; out: the same shape. */
public class HashMapOrder {
    public static void main(String[] args) throws Exception {
        try (DataInputStream in = new DataInputStream(new FileInputStream(args[0]));
             DataOutputStream out = new DataOutputStream(new FileOutputStream(args[1]))) {
            int cases = in.readInt();
            out.writeInt(cases);
            for (int c = 0; c < cases; c++) {
                int n = in.readInt();
                Map<Long, Integer> map = new HashMap<>();
                for (int i = 0; i < n; i++) {
                    map.put(in.readLong(), i);
                }
                out.writeInt(map.size());
                for (Long key : map.keySet()) {
                    out.writeLong(key);
                }
            }
        }
    }
}
