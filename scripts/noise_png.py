"""Writes a seeded RGB noise PNG (standard library only), so every machine's receipt reads the same picture."""
import random
import struct
import sys
import zlib


def main(path, width=90, height=61, seed=0x51):
    r = random.Random(seed)
    rows = b"".join(b"\x00" + bytes(r.randrange(256) for _ in range(3 * width)) for _ in range(height))

    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


if __name__ == "__main__":
    main(sys.argv[1])
