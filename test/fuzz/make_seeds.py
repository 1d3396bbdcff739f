#!/usr/bin/env python3
"""Writes the binary seeds of test/fuzz/corpus: the write scripts of
hint_parser_fuzz and the trees of namespace_index_fuzz (their input formats
are described at the top of each target). Text seeds are written by hand.
Run from anywhere; it overwrites the files it makes."""
import os
import stat
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def put(target, name, data):
    path = os.path.join(HERE, "corpus", target, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


# hint_parser: steps of (writer, flags, data); flags bit 0: writer + 256,
# bit 1: write at offset 0, bit 2: flush and clear afterwards, bits 3-7 (r):
# written by 16r more writers, '#' replaced by the writer's number.
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
# 65 writers naming 65 streams (bits 3-7 of the flags: 16 * 4 more writers),
# then 497 writers leaving a line unfinished.
put("hint_parser", "many", script(
    (1, 4 << 3, b"//stream s#\nbeta\n"), (2, 31 << 3, b"dir/#")))

# namespace_index: flags, arena length (u16), arena, [totals], nodes.
NODE = struct.Struct("<QQqqqIIIIIIIIIIQ")  # tiering/namespace.h: Node, 88 bytes
assert NODE.size == 88
DIR, REG, LNK = stat.S_IFDIR | 0o755, stat.S_IFREG | 0o644, stat.S_IFLNK | 0o777


def tree(flags, specs, extra_arena=b"", totals=None):
    """specs: (name, mode, parent, first_child, child_count, size)."""
    arena = b""
    nodes = b""
    for ino, (name, mode, parent, first, count, size) in enumerate(specs, start=100):
        nodes += NODE.pack(size, size // 512, 0, 10**18, -5, mode, 1000, 1000, 1,
                           parent, len(arena), len(name), first, count, 0, ino)
        arena += name
    arena += extra_arena
    out = bytes([flags]) + struct.pack("<H", len(arena)) + arena
    if totals is not None:
        out += struct.pack("<5Q", *totals)
    return out + nodes


put("namespace_index", "root", tree(0, [(b"", DIR, 0, 1, 0, 0)]))
small = [
    (b"", DIR, 0, 1, 4, 0),
    (b"a", REG, 0, 0, 0, 3),
    (b"d", DIR, 0, 5, 2, 0),
    (b"e", DIR, 0, 7, 0, 0),
    (b"l", LNK, 0, 6, 1, 0),  # target: the arena's last byte ("a")
    (b"x", REG, 2, 0, 0, 1),
    (b"y", REG, 2, 0, 0, 0),
]
put("namespace_index", "small", tree(0, small, b"a"))
put("namespace_index", "totals", tree(1, small, b"a", totals=(4, 3, 3, 1, 0)))
put("namespace_index", "unsorted", tree(2, [
    (b"", DIR, 0, 1, 2, 0), (b"b", REG, 0, 0, 0, 0), (b"a", REG, 0, 0, 0, 0)]))
