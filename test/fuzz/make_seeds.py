#!/usr/bin/env python3
"""Writes the binary seeds of test/fuzz/corpus: the write scripts of
hint_parser_fuzz (its input format is described at the top of the target).
Text seeds are written by hand.
Run from anywhere; it overwrites the files it makes."""
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def put(target, name, data):
    path = os.path.join(HERE, "corpus", target, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


# hint_parser: steps of (writer, flags, data); flags bit 0: writer + 256,
# bit 1: write at offset 0, bit 2: flush and clear afterwards.
def script(*steps):
    out = b""
    for writer, flags, data in steps:
        assert len(data) < 256
        out += bytes([writer, flags, len(data)]) + data
    return out


put("hint_parser", "order", script(
    (1, 0, b"alpha\nbeta\n//epoch\ndir/gamma\n"),
    (1, 0, b"//stream rank:0\n/mnt/dir/sub/delta\n")))
put("hint_parser", "split", script(
    (7, 0, b"dir/ga"), (8, 0, b"//str"), (7, 0, b"mma\r\n"), (8, 0, b"eam s-1\nzeta\n"),
    (7, 2, b"beta"), (9, 4, b"")))
put("hint_parser", "stage", script(
    (3, 0, b"dir\n.\nempty\nlink\n../alpha\n/other/alpha\nalpha\0x\n"),
    (255, 1, b"dir/sub\n")))
