"""One segment: shallow scan, decompressed sections, record framing, Arrow, reader, writer."""
