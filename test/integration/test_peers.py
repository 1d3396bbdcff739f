"""Peers: several real tierfs daemons of one job, each its own mount and RAM
tier over one pfs-sim, serve each other's chunks over UCX (TCP on loopback),
authenticated by a private munged.

Checked: a chunk read on one node and homed on another is served by its home
and read from the PFS once across the job; content through every node's
mount is bit-exact; a home stopped or killed mid-transfer costs the reader a
bounded wait and a PFS read, never a hang or a wrong byte; a stopped node is
slow, not gone, a killed one gone within peer_dead; pauses longer than every
timer before the first read and between epochs, at 8 nodes, leave the job's
cache whole; a daemon of another job is refused; a node that starts late joins; a file rewritten with
its size and mtime kept is never served as a mix of versions across nodes;
a flood of idle connections on a node's port keeps no node out; nodes that
are unmounted or killed while their connections are being made leave the
others serving."""
import concurrent.futures
import os
import pathlib
import random
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import harness

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tools", "bench"))
from benchlib import munged  # noqa: E402

KiB = 1024
FILES = 24
FILE_SIZE = 200 * KiB
MUNGED = None


def setUpModule():
    global MUNGED
    try:
        MUNGED = munged.Munged().start()
    except munged.MungedMissing as e:
        raise unittest.SkipTest(str(e))
    # The peers talk TCP on loopback, as across a network.
    os.environ["UCX_TLS"] = "tcp"


def tearDownModule():
    if MUNGED is not None:
        MUNGED.close()


def free_port():
    """A port that was free a moment ago, below the ephemeral range: UCX's
    TCP transport listens on ephemeral ports of its own, and one of those
    (another daemon's) must not take a port a later daemon will listen on."""
    low = int(pathlib.Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    rng = random.Random()
    for _ in range(100):
        port = rng.randrange(max(1024, low - 20000), low)
        with socket.socket() as s:
            try:
                s.bind(("0.0.0.0", port))
                return port
            except OSError:
                continue
    raise AssertionError("no free port below the ephemeral range")


class Job:
    """SOURCE behind one pfs-sim, and `nodes` daemons that list each other."""

    def __init__(self, nodes, pfs_opts="read_ms=1", job="it-job", node_job=None, timeout=1):
        self.dir = tempfile.mkdtemp(prefix="tierfs-peers-")
        self.src = os.path.join(self.dir, "src")
        os.mkdir(self.src)
        self.data = {}
        for i in range(FILES):
            name = f"d{i % 3}/f{i:03}.bin"
            os.makedirs(os.path.join(self.src, os.path.dirname(name)), exist_ok=True)
            self.data[name] = os.urandom(FILE_SIZE)
            with open(os.path.join(self.src, name), "wb") as f:
                f.write(self.data[name])
        self.pfs = harness.PfsSim(self.src, os.path.join(self.dir, "pfs"), pfs_opts)
        self.names = [f"n{i}" for i in range(nodes)]
        self.ports = [free_port() for _ in range(nodes)]
        self.peers_file = os.path.join(self.dir, "peers")
        with open(self.peers_file, "w") as f:
            f.write("# this test's job\n")
            for name, port in zip(self.names, self.ports):
                f.write(f"{name} 127.0.0.1:{port}\n")
        self.job, self.node_job, self.timeout = job, node_job or {}, timeout
        self.mounts = [None] * nodes

    def mnt(self, i):
        return os.path.join(self.dir, f"mnt{i}")

    def start(self, i, ram="64M", extra=(), prefix=(), pass_fds=()):
        os.makedirs(self.mnt(i), exist_ok=True)
        opts = list(extra) + [f"ram={ram}", f"peers={self.peers_file}", f"peer_name={self.names[i]}",
                f"peer_job={self.node_job.get(i, self.job)}", f"munge_socket={MUNGED.socket}",
                f"peer_timeout={self.timeout}"]
        self.mounts[i] = harness.Mount(self.pfs.mnt, self.mnt(i), opts, prefix=prefix,
                                       pass_fds=pass_fds)
        return self.mounts[i]

    def peers(self, i):
        return self.mounts[i].stats()["peers"]

    def hedge_bytes(self):
        """Bytes the live nodes' hedges read from the PFS, won or lost: the
        only bytes a job may read from it twice."""
        return sum(peer.get("hedge_bytes", 0) for m in self.mounts
                   if m is not None and m.proc.poll() is None
                   for peer in m.stats()["peers"].get("remote", []))

    def wait_ready(self, timeout=15):
        """Every started node listens for its peers (they connect on first need)."""
        started = [i for i, m in enumerate(self.mounts) if m is not None]
        try:
            harness.wait_for(lambda: all(self.peers(i)["server"]["listening"] for i in started),
                             timeout=timeout, what="every node listening")
        except AssertionError as e:
            logs = "".join(f"\n--- {self.names[j]}:\n{self.mounts[j].output()[-2000:]}"
                           for j in started)
            raise AssertionError(f"{e}{logs}")

    def wait_up(self, i, count, timeout=15):
        """Node i is connected to `count` peers (it connects when it first asks)."""
        harness.wait_for(lambda: self.peers(i)["up"] >= count, timeout=timeout,
                         what=f"{count} peers up on {self.names[i]}")

    def read_all(self, i, names=None):
        """Reads files through node i; asserts each is SOURCE's bytes."""
        for name in names or sorted(self.data):
            with open(os.path.join(self.mnt(i), name), "rb") as f:
                got = f.read()
            assert got == self.data[name], f"{name} through {self.names[i]} differs from SOURCE"

    def pfs_bytes(self):
        return self.pfs.stats()["ops"]["read_bytes"]

    def total(self):
        return FILES * FILE_SIZE

    def close(self):
        for m in self.mounts:
            if m is not None:
                if m.proc.poll() is None:
                    try:
                        os.kill(m.proc.pid, signal.SIGCONT)
                    except ProcessLookupError:
                        pass
                m.close()
                m.log.close()
        self.pfs.close()
        import shutil
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def remote(job, i, name):
    """Node i's figures for its peer `name` (the "remote" list)."""
    return next(r for r in job.peers(i)["remote"] if r["name"] == name)


class PeersTest(unittest.TestCase):
    def test_chunks_homed_elsewhere_come_from_their_home_and_the_pfs_once(self):
        """A cold chunk homed elsewhere: its home has none, says so at once,
        and the reader's node reads it from the PFS itself and hands its
        home the copy. The job reads each byte from the PFS once; later
        reads elsewhere come from the homes."""
        with Job(3) as job:
            for i in range(3):
                job.start(i)
            job.wait_ready()
            job.read_all(0)
            first = job.peers(0)
            # Node 0 read every file; those homed on n1 and n2 it read itself
            # (they had none yet) and offered to them.
            self.assertGreater(first["read_here"], 0)
            self.assertLess(first["read_here"], FILES)
            self.assertEqual(first["offered"], first["read_here"])
            self.assertEqual(first["fetched_chunks"], 0, "nothing to fetch in a cold epoch")
            self.assertEqual(first["source_fallbacks"], 0)
            harness.wait_for(
                lambda: sum(job.peers(i)["server"]["adopted"] for i in (1, 2)) == first["offered"],
                what="n1 and n2 keeping the chunks n0 offered")
            self.assertEqual(sum(job.peers(i)["server"]["not_resident"] for i in (1, 2)),
                             first["read_here"])
            self.assertEqual(job.pfs_bytes(), job.total(), "each byte read from the PFS once")
            # Every node's mount is bit-exact, and the PFS is not read again:
            # each chunk is in its home's tier (and copies where there was room).
            for i in (1, 2, 0):
                job.read_all(i)
            self.assertEqual(job.pfs_bytes(), job.total())
            for i in (1, 2):  # they read nothing from SOURCE: their share was handed to them
                self.assertEqual(job.mounts[i].stats()["reads"]["source_bytes"], 0)
                self.assertGreater(job.peers(i)["fetched_chunks"], 0)
            served = sum(job.peers(i)["served_chunks"] for i in range(3))
            self.assertEqual(served, sum(job.peers(i)["fetched_chunks"] for i in range(3)))
            p = job.peers(1)
            self.assertEqual(p["self"], "n1")
            self.assertGreaterEqual(p["server"]["authenticated"], 2)
            # `tierfs stat` sums it up for people.
            out = subprocess.run([harness.tierfs_bin(), "stat", job.mnt(1)], capture_output=True,
                                 text=True, timeout=30, check=True).stdout
            flat = " ".join(out.split())  # stat wraps its lines at 100 characters
            self.assertRegex(out, r"\npeers +'n1' of 3 nodes, 2 connected\n")
            self.assertRegex(flat, r"served \S+ \S+ in [1-9][0-9]*, ")
            self.assertIn(" 0 fell back to SOURCE", flat)

    def test_a_cold_chunk_of_several_pieces_is_handed_over_whole(self):
        """Chunks of 3 MiB (three 1 MiB SOURCE reads each, and above the
        eager size, so a rendezvous transfer): n0 reads them cold, keeps
        those n1 homes whole while it copies them, and hands them over; n1
        then reads every one without the PFS."""
        MiB = 1024 * KiB
        with Job(2) as job:
            big = [f"big/b{i}.bin" for i in range(8)]
            os.makedirs(os.path.join(job.src, "big"))
            for name in big:
                job.data[name] = os.urandom(3 * MiB)
                pathlib.Path(job.src, name).write_bytes(job.data[name])
            job.start(0)
            job.start(1)
            job.wait_ready()
            before = job.pfs_bytes()
            job.read_all(0, big)
            p0 = job.peers(0)
            self.assertGreater(p0["read_here"], 0, p0)
            self.assertEqual(p0["offered"], p0["read_here"], p0)
            harness.wait_for(lambda: job.peers(1)["server"]["adopted"] == p0["offered"],
                             what="n1 keeping the 3 MiB chunks n0 offered")
            job.read_all(1, big)
            self.assertEqual(job.mounts[1].stats()["reads"]["source_bytes"], 0)
            self.assertEqual(job.pfs_bytes() - before, 8 * 3 * MiB, "each byte from the PFS once")

    def test_a_chunk_too_large_to_offer_is_read_by_its_home(self):
        """A chunk above what a node offers (32 MiB; 70 MiB here): the
        reader's node asks its home plainly, and the home reads it from the
        PFS and keeps it, as before offers. Read here instead, it was never
        offered (too large) and its home never got it: every later read of
        it elsewhere went to the PFS again."""
        MiB = 1024 * KiB
        # peer_timeout=10: a home reading 70 MiB on a loaded host may take
        # over a second, and a reader that gave up would read it itself.
        with Job(2, timeout=10) as job:
            big = [f"huge/h{i}.bin" for i in range(3)]
            os.makedirs(os.path.join(job.src, "huge"))
            for name in big:
                job.data[name] = os.urandom(70 * MiB)
                pathlib.Path(job.src, name).write_bytes(job.data[name])
            for i in range(2):
                job.start(i, ram="512M", extra=("chunk_size=128M",))
            job.wait_ready()
            before = job.pfs_bytes()
            job.read_all(0, big)
            p0 = job.peers(0)
            self.assertEqual(p0["read_here"], 0, p0)
            # Some are homed on n1: fetched from it, or, where n1 read
            # slower than n0's hedge time, raced by a read of the PFS.
            self.assertGreater(p0["fetched_chunks"] + p0.get("hedged", 0), 0, p0)
            job.read_all(1, big)
            # n1 kept what it read as the home, and had the rest from n0.
            n1_hedges = sum(peer.get("hedge_bytes", 0) for peer in job.peers(1).get("remote", []))
            self.assertLessEqual(job.mounts[1].stats()["reads"]["source_bytes"], n1_hedges)
            extra = job.pfs_bytes() - before - 3 * 70 * MiB
            self.assertGreaterEqual(extra, 0)
            # Only what the nodes' hedges read is read twice.
            self.assertLessEqual(extra, job.hedge_bytes(),
                                 f"each byte from the PFS once but what was hedged: {p0}")

    def test_stage_in_stages_each_share_once_across_the_job(self):
        """With prefetch=stage-in, each node stages its home share from the
        first second (homes come from the job's node list, not from who has
        answered yet): the job reads each byte from the PFS once."""
        with Job(3) as job:
            for i in range(3):
                job.start(i, extra=("prefetch=stage-in",))

            def staged():
                return [m.stats()["promotions"] for m in job.mounts]

            harness.wait_for(
                lambda: sum(p["bytes"] for p in staged()) >= job.total() and
                all(p["running"] == 0 and p["queued_background"] == 0 for p in staged()),
                what="the job's stage-in")
            per_node = [p["bytes"] for p in staged()]
            self.assertEqual(sum(per_node), job.total(), f"staged per node: {per_node}")
            self.assertTrue(all(0 < b < job.total() for b in per_node), per_node)
            self.assertEqual(job.pfs_bytes(), job.total(), "each byte from the PFS once")
            for i in range(3):
                job.read_all(i)
            self.assertEqual(job.pfs_bytes(), job.total())

    def test_a_stopped_home_is_slow_not_gone(self):
        """SIGSTOP for 4 s, less than peer_dead: the reader waits the
        stall time (250 ms: the home answers not even a ping), not a
        peer_timeout, then reads that home's chunks itself while the home
        answers no ping; the home is not taken for gone, keeps its chunks
        and serves them again once continued. (It was marked down at the
        first late answer, and its chunks moved; then every reader waited a
        whole peer_timeout.)"""
        with Job(2, timeout=1) as job:
            job.start(0)
            job.start(1)
            job.wait_ready()
            names = sorted(job.data)
            job.read_all(0, names[:12])  # cold: n1's share of these offered to it
            harness.wait_for(lambda: job.peers(1)["server"]["adopted"] == job.peers(0)["offered"],
                             what="n1 keeping the chunks n0 offered")
            self.assertGreater(job.peers(0)["offered"], 0)
            os.kill(job.mounts[1].proc.pid, signal.SIGSTOP)  # answers nothing, holds its socket
            t0 = time.monotonic()
            job.read_all(0, names[12:])
            took = time.monotonic() - t0
            remote = job.peers(0)["remote"][0]
            self.assertGreaterEqual(remote["stalls"], 1, remote)
            self.assertLessEqual(remote["stalls"] + remote["timeouts"], 2,
                                 f"a stopped home waited on again and again: {remote}")
            self.assertEqual(remote["timeouts"], 0, "its stall was seen before peer_timeout")
            self.assertFalse(remote["dead"], "slow is not gone")
            self.assertEqual(remote["downs"], 0)
            self.assertLess(took, 3.0, "a stopped home must not hold every read")
            time.sleep(max(0.0, 4 - (time.monotonic() - t0)))
            os.kill(job.mounts[1].proc.pid, signal.SIGCONT)
            time.sleep(2)  # a heartbeat answered: no longer slow
            job.read_all(1, names[:12])  # n1 reads its own share from its tier, the rest from n0
            self.assertEqual(job.mounts[1].stats()["reads"]["source_bytes"], 0,
                             "n1 kept its chunks through the stop")
            p0 = job.peers(0)["remote"][0]
            self.assertFalse(p0["dead"])
            self.assertEqual(p0["downs"], 0)

    def test_a_killed_node_is_gone_within_peer_dead(self):
        """SIGKILL of an idle peer: the survivor takes it for gone (its
        transport fails, or its pings go unanswered) within peer_dead, and
        then reads everything without waiting on it."""
        with Job(2, timeout=1) as job:
            for i in range(2):
                job.start(i, extra=("peer_dead=2",))
            job.wait_ready()
            job.read_all(0)
            job.wait_up(0, 1)
            job.mounts[1].proc.kill()
            t0 = time.monotonic()
            harness.wait_for(lambda: job.peers(0)["remote"][0]["dead"], timeout=10,
                             what="n1 taken for gone")
            self.assertLess(time.monotonic() - t0, 2 + 1, "not within peer_dead")
            t0 = time.monotonic()
            job.read_all(0)
            self.assertLess(time.monotonic() - t0, 1, "a read waited on the gone node")

    def test_home_killed_mid_transfer(self):
        # Every PFS read stalls 1 s, so the home is still reading when it
        # dies. The home stages its share: the chunks n0 asks it for are in
        # flight there, so n0 waits for them rather than read them itself.
        with Job(2, pfs_opts="stall_rate=1,stall_ms=1000", timeout=5) as job:
            job.start(0)
            job.start(1, extra=("prefetch=stage-in",))
            job.wait_ready()
            harness.wait_for(lambda: job.mounts[1].stats()["promotions"]["running"] >= 1,
                             what="n1 staging its share")
            names = sorted(job.data)[:10]
            errors, done = [], threading.Event()

            def reader():
                # All at once, so that n0 asks n1 while n1's copies are in flight.
                try:
                    with concurrent.futures.ThreadPoolExecutor(len(names)) as pool:
                        list(pool.map(lambda name: job.read_all(0, [name]), names))
                except BaseException as e:  # noqa: BLE001 (reported below)
                    errors.append(e)
                done.set()

            t = threading.Thread(target=reader)
            t.start()
            harness.wait_for(lambda: job.peers(1)["server"]["requests"] >= 1,
                             what="n0 asking n1 for a chunk")
            job.mounts[1].proc.kill()  # within the 1 s its PFS read takes
            t0 = time.monotonic()
            # The rest: one 1 s stall per file at most, no peer timeout.
            self.assertTrue(done.wait(len(names) + 10), "the reader hangs")
            t.join()
            self.assertEqual(errors, [])
            self.assertLess(time.monotonic() - t0, len(names) + 4)
            p = job.peers(0)
            # The cut transfer was read from the PFS: as a fallback, or by the
            # hedge that raced the silent home.
            self.assertGreaterEqual(p["source_fallbacks"] + p.get("hedged", 0), 1,
                                    "the transfer cut was read from the PFS")
            self.assertFalse(p["remote"][0]["up"])
            self.assertTrue(p["remote"][0]["dead"], "a killed home is gone: its chunks move")

    def vanish_as_connecting(self, kill, cycles=10):
        """n2 is started, asks n0 and n1 and is asked by n0, and goes 0-40
        ms later (its connections being made): unmounted or killed,
        `cycles` times. n0 and n1 stay up and serve SOURCE's bytes."""
        rng = random.Random()
        with Job(3, timeout=1) as job:
            job.start(0)
            job.start(1)
            job.wait_ready()
            names = sorted(job.data)
            for cycle in range(cycles):
                node = job.start(2)
                harness.wait_for(lambda: job.peers(2)["server"]["listening"], what="n2 listening")
                picks = rng.sample(names, 6)
                errors = []

                def read(i, which):
                    try:
                        job.read_all(i, which)
                    except OSError:
                        pass  # n2's own reads end with it
                    except AssertionError as e:
                        errors.append(e)

                readers = [threading.Thread(target=read, args=(2, picks[:3])),
                           threading.Thread(target=read, args=(0, picks[3:]))]
                for t in readers:
                    t.start()
                time.sleep(rng.uniform(0, 0.04))
                if kill:
                    node.proc.kill()
                node.close()
                node.log.close()
                for t in readers:
                    t.join(30)
                    self.assertFalse(t.is_alive(), "a read hangs")
                self.assertEqual(errors, [])
                for i in (0, 1):
                    self.assertTrue(job.mounts[i].alive(),
                                    f"cycle {cycle}: n{i} died:\n{job.mounts[i].output()[-3000:]}")
            # n0 and n1 to each other: two at most; the rest were n2's.
            sessions = sum(job.peers(i)["server"]["sessions"] for i in (0, 1))
            self.assertGreater(sessions, 2, "n2 connected in no cycle")
            self.assert_survivors_peer_again(job)

    def assert_survivors_peer_again(self, job):
        """After the cycles n0 and n1 still ask and serve each other: a
        transport that UCX failed in a cycle (its contained abort) was
        started again, so none stays failed, and n1, which read nothing so
        far, fetches n0's share from n0."""
        def failed():
            return [f"n{i} {side}" for i in (0, 1)
                    for side, p in (("client", job.peers(i)), ("server", job.peers(i)["server"]))
                    if p["transport_failed"]]
        # A restart takes at most 10 s (a new UCX context and worker).
        harness.wait_for(lambda: not failed(), timeout=15,
                         what="no survivor's transport left failed")
        restarts = {f"n{i}": (job.peers(i)["transport_restarts"],
                              job.peers(i)["server"]["transport_restarts"]) for i in (0, 1)}
        print(f"\n  transport restarts (client, server) after UCX failed: {restarts}",
              file=sys.stderr)
        job.read_all(0)
        fetched = remote(job, 1, "n0")["fetched_chunks"]
        job.read_all(1)
        self.assertGreater(remote(job, 1, "n0")["fetched_chunks"], fetched,
                           f"n1 asks n0 after the cycles (restarts {restarts})")
        self.assertTrue(remote(job, 1, "n0")["up"])

    def test_nodes_unmounted_as_they_connect_leave_the_others_serving(self):
        self.vanish_as_connecting(kill=False)

    def test_nodes_killed_as_they_connect_leave_the_others_serving(self):
        """On UCX 1.13 with assertions a node killed then makes a survivor's
        UCX abort now and then (its server side in 8 runs of 25 here): the
        survivor's failed side is started again and it asks and serves its
        peer again. With no restart (max_restarts 0) 6 runs of 12 failed."""
        self.vanish_as_connecting(kill=True, cycles=20)

    def test_a_node_whose_transport_fails_asks_and_serves_again(self):
        """n1's UCX fails on both sides as UCX's contained abort leaves it
        (its progress threads parked for good: the test hook, SIGUSR2 with
        TIERFS_TEST_PEER_TRANSPORT_FAILURE=SIGUSR2, since the real abort
        comes in some runs only), while both nodes read: n1 gets a new
        transport on each side within seconds, no remount, says so in one
        line each, and asks n0 and serves it again (fetched chunks grow
        both ways); reads meanwhile are SOURCE's bytes."""
        with Job(2, timeout=1) as job:
            job.start(0, extra=["peer_dead=1"])
            job.start(1, extra=["peer_dead=1"],
                      prefix=["env", "TIERFS_TEST_PEER_TRANSPORT_FAILURE=SIGUSR2"])
            job.wait_ready()
            names = sorted(job.data)
            first, asked, served = names[:8], names[8:16], names[16:]
            job.read_all(0, first)
            job.read_all(1, first)
            job.wait_up(1, 1)
            n1 = job.peers(1)
            self.assertEqual(n1["transport_restarts"], 0)
            self.assertEqual(n1["server"]["transport_restarts"], 0)

            os.kill(job.mounts[1].proc.pid, signal.SIGUSR2)
            reader = threading.Thread(target=job.read_all, args=(1, first))
            reader.start()  # reads while it fails: SOURCE's bytes, no hang
            harness.wait_for(lambda: job.peers(1)["transport_restarts"] >= 1
                             and job.peers(1)["server"]["transport_restarts"] >= 1,
                             timeout=5, what="n1's transport started again on both sides")
            reader.join(30)
            self.assertFalse(reader.is_alive(), "a read hangs")
            n1 = job.peers(1)
            self.assertFalse(n1["transport_failed"])
            self.assertFalse(n1["server"]["transport_failed"])
            # n0 finds its session to n1's old worker silent (peer_dead) and
            # connects again through n1's door; n1 connects again at once.
            harness.wait_for(lambda: remote(job, 0, "n1")["up"] and remote(job, 1, "n0")["up"]
                             and not remote(job, 0, "n1")["slow"], timeout=10,
                             what="n0 and n1 connected again")

            asked_before = remote(job, 1, "n0")["fetched_chunks"]
            job.read_all(0, asked)  # n0 holds its share of these, then n1 asks for it
            job.read_all(1, asked)
            self.assertGreater(remote(job, 1, "n0")["fetched_chunks"], asked_before,
                               "n1 asks n0 again")
            served_before = remote(job, 0, "n1")["fetched_chunks"]
            job.read_all(1, served)  # n1 holds its share, then n0 asks for it
            job.read_all(0, served)
            self.assertGreater(remote(job, 0, "n1")["fetched_chunks"], served_before,
                               "n1 serves n0 again")
            self.assertGreater(job.peers(1)["server"]["served_chunks"], 0)
            log = job.mounts[1].output()
            restarts = [line for line in log.splitlines() if "started it again (restart" in line]
            self.assertEqual(len(restarts), 2, f"one line per side: {restarts}")

    def test_look_ahead_asks_the_home_when_there_is_no_room_for_a_copy(self):
        # n0's tier holds 2 of the 24 files: look-ahead cannot copy the chunks
        # n1 homes, so it asks n1 to promote them; n0 reads nothing yet.
        with Job(2) as job:
            job.start(0, ram=f"{2 * FILE_SIZE}", extra=["prefetch=order", "lookahead=24"])
            job.start(1)
            job.wait_ready()
            with open(os.path.join(job.mnt(0), ".tierfs", "order"), "a") as f:
                f.write("".join(name + "\n" for name in sorted(job.data)))
            harness.wait_for(lambda: job.peers(0)["asked_ahead"] >= 4,
                             what="n0 asking n1 to promote ahead")
            harness.wait_for(lambda: job.mounts[1].stats()["promotions"]["done"] >= 4,
                             what="n1 promoting what n0 will read")
            self.assertEqual(job.mounts[1].stats()["requests"]["read"], 0, "nobody read on n1")
            self.assertEqual(job.peers(0)["asked_ahead_failed"], 0)
            job.read_all(0)
            # Each byte once, but for what hedges read (answers slower than
            # their home's hedge time, raced by a read of the PFS; counted).
            extra = job.pfs_bytes() - job.total()
            self.assertGreaterEqual(extra, 0)
            self.assertLessEqual(extra, job.hedge_bytes(), "each byte read from the PFS once")

    def test_a_daemon_of_another_job_is_refused(self):
        with Job(2, node_job={1: "another-job"}) as job:
            job.start(0)
            job.start(1)
            job.wait_ready()
            job.read_all(0)  # connects on first need: refused
            job.read_all(1)
            harness.wait_for(lambda: job.peers(1)["server"]["refused"]["wrong_job"] >= 1
                             and job.peers(0)["server"]["refused"]["wrong_job"] >= 1,
                             what="a hello of another job refused")
            for i in range(2):
                p = job.peers(i)
                self.assertEqual(p["up"], 0)
                self.assertEqual(p["fetched_chunks"], 0)
                self.assertEqual(p["served_chunks"], 0)
            # Without peers each node reads everything from the PFS itself.
            self.assertEqual(job.pfs_bytes(), 2 * job.total())

    def test_a_node_that_starts_late_joins(self):
        with Job(2) as job:
            job.start(0)
            names = sorted(job.data)
            job.read_all(0, names[:8])  # n1 is not there: all from the PFS
            self.assertEqual(job.peers(0)["fetched_chunks"], 0)
            self.assertEqual(job.pfs_bytes(), 8 * FILE_SIZE)
            job.start(1)
            job.wait_up(0, 1)  # at n0's next retry (backoff at most peer_timeout)
            job.read_all(0, names[8:])
            # n1 homes some: it had none, n0 read them and handed them over.
            self.assertGreater(job.peers(0)["read_here"], 0)
            harness.wait_for(lambda: job.peers(1)["server"]["adopted"] == job.peers(0)["offered"],
                             what="n1 keeping the chunks n0 offered")
            job.read_all(1)
            self.assertGreater(job.peers(1)["fetched_chunks"], 0)
            # A chunk read while its home was away is in the stand-in's tier;
            # its home may read it once more. Nothing beyond that.
            self.assertLessEqual(job.pfs_bytes(), job.total() + 8 * FILE_SIZE)
            before = job.pfs_bytes()
            job.read_all(0)
            job.read_all(1)
            self.assertEqual(job.pfs_bytes(), before, "steady: nothing more from the PFS")

    def test_a_rewrite_that_keeps_size_and_mtime_is_stale_across_peers(self):
        # cp -p or rsync -a over a file both nodes have read: the restarted
        # node's snapshot has the new ctime, its peer's the old one and the
        # old bytes in its tier. Asked for a chunk, the peer answers stale
        # and the node reads SOURCE: the new file whole, never old chunks
        # among new ones.
        MiB = 1024 * KiB
        with Job(2) as job:
            name = "big.bin"
            path = os.path.join(job.src, name)
            job.data[name] = os.urandom(4 * MiB)
            pathlib.Path(path).write_bytes(job.data[name])
            opts = ["chunk_size=1M"]
            job.start(0, extra=opts)
            job.start(1, extra=opts)
            job.wait_ready()
            job.read_all(0)
            job.read_all(1)
            self.assertGreater(job.peers(1)["fetched_chunks"], 0)
            st = os.stat(path)
            new = os.urandom(4 * MiB)
            with open(path, "r+b") as f:
                f.write(new)
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
            job.mounts[1].close()
            job.mounts[1].log.close()
            job.start(1, extra=opts)
            job.wait_ready()
            got = pathlib.Path(job.mnt(1), name).read_bytes()
            self.assertEqual(len(got), len(new))
            mixed = [i for i in range(4) if got[i * MiB:(i + 1) * MiB] != new[i * MiB:(i + 1) * MiB]]
            self.assertEqual(mixed, [], "MiB chunks of the old version served after the rewrite")
            self.assertGreaterEqual(job.peers(0)["server"]["errors"], 1, "n0 answered stale")

    def test_pauses_longer_than_every_timer_keep_the_jobs_cache(self):
        """A job's timing at 8 nodes: 12 s between the mounts and the first
        read (imports, model, NCCL; longer than the door's 10 s for an
        unused session), then epochs of a DistributedSampler's shards with
        5 s of validation between them (longer than peer_idle and than the
        servers' 3 x peer_dead for a silent session). Epoch 1 reads each
        byte from the PFS once, later epochs nothing, and no fetch waits
        for a timeout. (Sessions expired in the pause and every later
        request was dropped: 12-60% of the dataset read again per epoch.)"""
        nodes = 8
        with Job(nodes, timeout=2) as job:
            for i in range(nodes):
                job.start(i, extra=("peer_dead=1", "peer_idle=4"))
            job.wait_ready()
            time.sleep(12)
            names = sorted(job.data)
            per_epoch = []
            for epoch in range(3):
                if epoch:
                    time.sleep(5)
                before = job.pfs_bytes()
                order = random.Random(epoch).sample(names, len(names))
                with concurrent.futures.ThreadPoolExecutor(nodes) as pool:
                    list(pool.map(lambda r: job.read_all(r, order[r::nodes]), range(nodes)))
                per_epoch.append(job.pfs_bytes() - before)
                if epoch == 0:  # the offers land before the next epoch asks for them
                    harness.wait_for(
                        lambda: sum(job.peers(i)["server"]["adopted"] +
                                    job.peers(i)["server"]["offers_refused"]
                                    for i in range(nodes)) ==
                        sum(job.peers(i)["offered"] for i in range(nodes)),
                        what="the offers of epoch 1 taken")
            self.assertEqual(per_epoch[0], job.total(), "epoch 1: each byte from the PFS once")
            for e in (1, 2):
                self.assertLessEqual(per_epoch[e], 0.05 * job.total(), f"epoch {e + 1}: {per_epoch}")
            for i in range(nodes):
                p = job.peers(i)
                for r in p["remote"]:
                    self.assertEqual(r["timeouts"], 0, f"{job.names[i]} -> {r['name']}: {r}")
                    self.assertFalse(r["dead"], f"{job.names[i]} -> {r['name']}")
                    self.assertEqual(r["downs"], 0, f"{job.names[i]} -> {r['name']}")
                self.assertEqual(p["server"]["stray"], 0, f"{job.names[i]}: {p['server']}")
                self.assertEqual(p["server"]["expired_sessions"], 0)
            # The pauses closed unused connections at both ends, by agreement.
            self.assertGreater(sum(job.peers(i)["server"]["byes"] for i in range(nodes)), 0)

    def test_a_daemon_handed_its_bound_port_serves_its_peers_on_it(self):
        """A privileged parent binds the job's port and hands it to the
        daemon in systemd's convention (fd 3, LISTEN_PID its pid,
        LISTEN_FDS=1), so no other user can take the port first: n1 serves
        n0 on that socket. This test keeps its own copy of the socket open,
        so a daemon that bound the port itself could not listen at all."""
        with Job(2) as job:
            held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            held.bind(("127.0.0.1", job.ports[1]))
            held.listen(64)
            fd = held.fileno()
            hand_over = ("import os, sys; fd = int(sys.argv[1]); os.dup2(fd, 3); "
                         "os.close(fd) if fd != 3 else None; "
                         "os.environ.update(LISTEN_PID=str(os.getpid()), LISTEN_FDS='1'); "
                         "os.execvp(sys.argv[2], sys.argv[2:])")
            try:
                job.start(0)
                job.start(1, prefix=["/usr/bin/python3", "-c", hand_over, str(fd)],
                          pass_fds=(fd,))
                job.wait_ready()
                server = job.peers(1)["server"]
                self.assertEqual(server.get("listen_error", ""), "", server)
                job.read_all(1)  # n1 holds its share
                job.read_all(0)  # n0 asks n1 for it, on the handed socket
                self.assertGreater(remote(job, 0, "n1")["fetched_chunks"], 0,
                                   "n0 fetched n1's share from n1")
                self.assertNotIn("LISTEN_FDS", job.mounts[1].output())
            finally:
                held.close()

    def test_idle_connections_on_the_port_keep_no_node_out(self):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard < 4096:
            self.skipTest("RLIMIT_NOFILE's hard limit is below 4096")
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 4096), hard))
        idle = []
        try:
            with Job(2) as job:
                job.start(0)
                harness.wait_for(lambda: job.peers(0)["server"]["listening"], what="n0 listening")
                # Another user on the node opens 1,100 connections and says nothing.
                for _ in range(1100):
                    s = socket.create_connection(("127.0.0.1", job.ports[0]), timeout=5)
                    idle.append(s)
                job.start(1)
                job.wait_ready(timeout=10)
                job.read_all(1)  # n1 connects to n0 through the flood on first need
                job.wait_up(1, 1, timeout=10)
                server = job.peers(0)["server"]
                self.assertGreaterEqual(server["connections"], 1100)
                # Closed once old enough to be squatters, or turned away younger.
                self.assertGreaterEqual(server["evicted"] + server["handshake_turned_away"], 1000)
                log = job.mounts[0].output()
                self.assertLess(len(log), 64 * KiB, "the flood fills the log")
                for s in idle:
                    s.close()
                idle = []
                self.assertEqual(job.mounts[0].close(), 0, "n0 unmounts cleanly")
                self.assertEqual(job.mounts[1].close(), 0)
        finally:
            for s in idle:
                s.close()
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


if __name__ == "__main__":
    harness.main()
