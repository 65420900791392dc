"""Streams N MiB through a 1 MiB buffer: memory stays flat whatever N."""
import sys

total = 0
buffer = bytearray(1 << 20)
for _ in range(int(sys.argv[1])):
    buffer[:] = bytes(len(buffer))
    total += len(buffer)
print(total >> 20, "MiB streamed")
