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
NODE = struct.Struct("<QQqqqIIIIIIIIIIQ")  # tiering/namespace/namespace.h: Node, 88 bytes
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


# peer_wire and peer_handshake: wire messages (kWireVersion in
# tiering/peers/transport/wire.h: session, sequence number and a 16-byte tag
# in every header, flags, offers, kLeaving), claims and handshake frames.
# Seeds of an older version decode as stray and reach none of the checks.
WIRE_VERSION = 4


def wire(kind, request_id, rest, flags=0):
    return struct.pack("<IBBHQQQ", 0x50534654, WIRE_VERSION, kind, flags, request_id, 0x5E55, 9) + \
        rest + bytes(16)


def request(size, chunk, off=0, length=0, flags=0):
    return wire(3, 7, struct.pack("<QqqQQIIQQ", size, 1000, 2000, 77, 1 << 20, chunk, 5000, off,
                                  length), flags)


def offer(size, chunk, path_len):
    return wire(6, 0, struct.pack("<QqqQQIIQQ", size, 1000, 2000, 77, 1 << 20, chunk, path_len, 0, 0))


def message(header, body):
    return bytes([len(header)]) + header + body


def claim(role):
    fields = b"".join(struct.pack("<H", len(s)) + s for s in (b"job-1", b"n0", b"n1"))
    return struct.pack("<IBBH", 0x41534654, 2, role, 0) + bytes(range(16)) + bytes(16) + \
        bytes(32) + fields


def frame(magic, payload):
    body = struct.pack("<IB", magic, 2) + bytes(3) + payload
    return struct.pack("<I", len(body)) + body


put("peer_wire", "request", b"\0" + message(request(3 << 20, 1), b"d0/f000.bin"))
put("peer_wire", "request_whole", b"\0" + message(request(5 << 20, 4, 4096, 1000), b"a/b"))
put("peer_wire", "request_if_resident",
    b"\0" + message(request(3 << 20, 1, flags=1), b"d0/f000.bin"))
put("peer_wire", "offer", b"\0" + message(offer(5000, 0, 3), b"a/b" + bytes(5000)))
put("peer_wire", "data", b"\0" + message(wire(4, 7, struct.pack("<Q", 5)), b"hello"))
put("peer_wire", "error", b"\0" + message(wire(5, 7, struct.pack("<iI", 2, 0)), b""))
for name, kind in (("ping", 7), ("pong", 8), ("bye", 9), ("leaving", 10)):
    put("peer_wire", name, b"\0" + message(wire(kind, 3, b""), b""))
put("peer_wire", "claim", b"\1" + claim(1))
put("peer_wire", "claim_answer", b"\1" + claim(2))
for old in ("hello", "hello_answer"):
    path = os.path.join(HERE, "corpus", "peer_wire", old)
    if os.path.exists(path):
        os.remove(path)
put("peer_handshake", "frames",
    b"\0" + frame(0x47534654, bytes(16)) + frame(0x48534654, b"MUNGE:abc:") +
    frame(0x52534654, struct.pack("<i", 0) + b"MUNGE:def:") + frame(0x52534654, struct.pack("<i", 6)))
put("peer_handshake", "sealed_request", b"\1\3" + message(request(3 << 20, 1), b"d0/f000.bin"))
put("peer_handshake", "sealed_offer", b"\1\3" + message(offer(300, 0, 3), b"a/b" + bytes(300)))
put("peer_handshake", "sealed_error", b"\1\x21" + message(wire(5, 7, struct.pack("<iI", 4, 0)), b""))
put("peer_handshake", "window", b"\2" + b"".join(struct.pack("<Q", s) for s in
                                                 (1, 2, 5, 3, 3, 1100, 70, 76, 1100, 0)))
put("peer_handshake", "bind_answer", b"\3\x10" + b"a UCX worker address" * 4)


# peer_answer: a hello credential of the fake MUNGE ("FAKE", uid 1000, gid
# 100, the claim), raw (first byte 0), or made from flags (first byte 1).
def hello_claim(echo, frm=b"n1", to=b"n0", job=b"job-1", role=1):
    fields = b"".join(struct.pack("<H", len(s)) + s for s in (job, frm, to))
    return struct.pack("<IBBH", 0x41534654, 2, role, 0) + bytes(range(16)) + echo + \
        bytes(range(32, 64)) + fields


GREETING = bytes(0xA0 + i for i in range(16))
fake = b"FAKE" + struct.pack("<II", 1000, 100)
put("peer_answer", "raw_hello", b"\0" + fake + hello_claim(GREETING))
put("peer_answer", "raw_other_greeting", b"\0" + fake + hello_claim(bytes(16)))
put("peer_answer", "raw_other_job", b"\0" + fake + hello_claim(GREETING, job=b"job-2"))
put("peer_answer", "made_hello", b"\1\0\0" + b"n1")
put("peer_answer", "made_input_key", b"\1\x40\0" + bytes(range(7, 39)) + b"n1")
put("peer_answer", "made_altered", b"\1\x80\x30" + b"n1")
put("peer_answer", "made_wrong_user", b"\1\x01\0" + b"n1")


# peer_resume: a Resume and a Resumed answer as the door and the client
# read them (first byte 0), a real Resume made from names and altered at a
# byte (1: cuts of the names at bytes 1 and 2, the byte to alter, 0 for
# none), a real answer altered (2).
def resume_frame(job=b"job-1", frm=b"a", to=b"b"):
    names = b"".join(bytes([len(s)]) + s for s in (job, frm, to))
    return struct.pack("<IB", 0x4d534654, 3) + bytes(3) + struct.pack("<Q", 7) + \
        bytes(range(16)) + bytes(range(16, 32)) + bytes(range(32, 64)) + names + bytes(32)


put("peer_resume", "raw_resume", b"\0" + resume_frame())
put("peer_resume", "raw_refusal", b"\0" + struct.pack("<IB", 0x4e534654, 3) + bytes(3) +
    struct.pack("<I", 3))
put("peer_resume", "raw_resumed", b"\0" + struct.pack("<IB", 0x4e534654, 3) + bytes(3) +
    struct.pack("<I", 0) + bytes(range(32)) + struct.pack("<Q", 9) + bytes(16) + b"worker")
put("peer_resume", "made", b"\1\5\1\0" + b"job-1" + b"a" + b"b")
put("peer_resume", "made_altered_binder", b"\1\5\1\xff" + b"job-1" + b"a" + b"b")
put("peer_resume", "made_altered_ticket", b"\1\5\1\x14" + b"job-1" + b"a" + b"b")
put("peer_resume", "answer", b"\2\x30" + b"a UCX worker address" * 4)
