"""Chaos (issue 11, "Proving it"): kill -9 the daemon at random moments while
readers and promotions run (a RAM tier and a directory tier; prefetch
on-access with a .tierfs/stage request, stage-in or order; first-fit or lru),
change SOURCE between mounts, mount again on the same tier directory.
Through every mount each file must read bit-exact as SOURCE holds it then,
or fail with EIO: never stale bytes, never a mix of versions.

The changes between mounts are those a dataset sees in real life: rewrites
of the same size with the mtime kept (cp -p over the same inode, a rename of
a new inode as rsync -a does, one chunk patched in place), ordinary
rewrites, truncations, appends, deletions, new files, a file replaced by a
directory and back.

Every run prints its seed; TIERFS_CHAOS_SEED=N replays it (the kill moments
are timed, so a replay is close, not identical). At most TIERFS_CHAOS_ROUNDS
(80) killed mounts, none started after TIERFS_CHAOS_SECONDS (60 s).
"""
import collections
import errno
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
import unittest

import harness

MiB = 1 << 20
ROUNDS = int(os.environ.get("TIERFS_CHAOS_ROUNDS", "80"))
SECONDS = float(os.environ.get("TIERFS_CHAOS_SECONDS", "60"))  # no round starts after this
READERS = 3


class Source:
    """SOURCE as the test changed it: what each path holds now, what it held
    before (to name a wrong answer), and the changes since each path last read
    right."""

    def __init__(self, root, staging):
        self.root, self.staging = root, staging
        self.files = {}  # rel -> bytes now
        self.dirs = set()  # files that became directories
        self.gone = set()  # deleted: must not be there
        self.old = collections.defaultdict(list)  # rel -> earlier contents, newest last
        self.pending = collections.defaultdict(list)  # rel -> changes since it last read right
        for dirpath, _, names in os.walk(root):
            for name in names:
                path = os.path.join(dirpath, name)
                with open(path, "rb") as f:
                    self.files[os.path.relpath(path, root)] = f.read()

    def path(self, rel):
        return os.path.join(self.root, rel)

    def record(self, rel, data, change):
        """rel holds data now (None: nothing), after `change`."""
        if rel in self.files:
            self.old[rel] = (self.old[rel] + [self.files.pop(rel)])[-3:]
        if data is None:
            self.gone.add(rel)
        else:
            self.files[rel] = data
            self.gone.discard(rel)
        self.pending[rel].append(change)

    def judge(self, rel, data, off=0, n=None):
        """'exact', or what the bytes read of rel at off (n of them, or to the end)
        are instead."""
        def part(v):
            return v[off:] if n is None else v[off:off + n]
        want = part(self.files[rel])
        if data == want:
            return "exact"
        if data in [part(v) for v in self.old[rel]]:
            return "stale: an earlier version's bytes"
        versions = [self.files[rel]] + self.old[rel]
        pieces = range(0, len(data), MiB)
        if (off % MiB == 0 and len(data) == len(want) and pieces and
                all(any(data[i:i + MiB] == part(v)[i:i + MiB] for v in versions) for i in pieces)):
            return "a mix of versions (each MiB is some version's)"
        return f"other bytes ({len(data)} read, {len(want)} expected; not one of the last 4" \
               " versions, not a mix of them by MiB)"

    # ---- the changes ----

    def rewrite_cp_p(self, rel, rng):
        path, st = self.path(rel), os.stat(self.path(rel))
        data = rng.randbytes(st.st_size)
        staged = os.path.join(self.staging, "cp-p")
        with open(staged, "wb") as f:
            f.write(data)
        os.utime(staged, ns=(st.st_atime_ns, st.st_mtime_ns))
        subprocess.run(["cp", "-p", staged, path], check=True, timeout=30)
        after = os.stat(path)
        assert (after.st_ino, after.st_mtime_ns) == (st.st_ino, st.st_mtime_ns), "cp -p"
        self.record(rel, data, "same size, mtime kept, same inode (cp -p)")

    def rewrite_renamed(self, rel, rng):
        path, st = self.path(rel), os.stat(self.path(rel))
        data = rng.randbytes(st.st_size)
        tmp = os.path.join(os.path.dirname(path), ".incoming")
        with open(tmp, "wb") as f:
            f.write(data)
        os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.rename(tmp, path)
        self.record(rel, data, "same size, mtime kept, new inode (rename)")

    def patch_4k(self, rel, rng):
        path, st = self.path(rel), os.stat(self.path(rel))
        data = bytearray(self.files[rel])
        off = rng.randrange(max(1, len(data) - 4096))
        data[off:off + 4096] = rng.randbytes(len(data[off:off + 4096]))
        with open(path, "r+b") as f:
            f.seek(off)
            f.write(data[off:off + 4096])
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        self.record(rel, bytes(data), "4 KiB patched in place, mtime kept")

    def rewrite_new_mtime(self, rel, rng):
        path, st = self.path(rel), os.stat(self.path(rel))
        data = rng.randbytes(st.st_size)
        with open(path, "r+b") as f:
            f.write(data)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        self.record(rel, data, "same size, new mtime")

    def truncate(self, rel, rng):
        size = rng.choice([0, rng.randrange(max(1, len(self.files[rel])))])
        os.truncate(self.path(rel), size)
        self.record(rel, self.files[rel][:size], "truncated")

    def append(self, rel, rng):
        extra = rng.randbytes(rng.randrange(1, 600_000))
        with open(self.path(rel), "ab") as f:
            f.write(extra)
        self.record(rel, self.files[rel] + extra, "appended")

    def delete(self, rel, rng):
        os.unlink(self.path(rel))
        self.record(rel, None, "deleted")

    def to_directory(self, rel, rng):
        os.unlink(self.path(rel))
        self.record(rel, None, "replaced by a directory")
        self.gone.discard(rel)
        os.mkdir(self.path(rel))
        self.dirs.add(rel)
        inner = os.path.join(rel, "inner")
        data = rng.randbytes(rng.randrange(1, 300_000))
        with open(self.path(inner), "wb") as f:
            f.write(data)
        self.record(inner, data, "new, where a file was")

    def create(self, rel, rng):
        rel = os.path.join(os.path.dirname(rel), f"new{rng.randrange(1 << 30)}")
        data = rng.randbytes(rng.randrange(1, 3 * MiB))
        with open(self.path(rel), "wb") as f:
            f.write(data)
        self.record(rel, data, "new file")

    def back_to_file(self, rng):
        rel = rng.choice(sorted(self.dirs))
        shutil.rmtree(self.path(rel))
        below = rel + "/"
        for inner in [r for r in self.files if r.startswith(below)]:
            self.record(inner, None, "deleted with its directory")
        self.dirs = {d for d in self.dirs if d != rel and not d.startswith(below)}
        data = rng.randbytes(rng.randrange(1, 2 * MiB))
        with open(self.path(rel), "wb") as f:
            f.write(data)
        self.record(rel, data, "a file again, where a directory was")

    def change_some(self, rng):
        """One change of each kind, each to another file (a big one, of more than
        a chunk, where it matters)."""
        rels = sorted(self.files)
        rng.shuffle(rels)
        big = [r for r in rels if len(self.files[r]) > MiB]
        changes = [(self.patch_4k, True), (self.rewrite_cp_p, rng.random() < 0.5),
                   (self.rewrite_renamed, rng.random() < 0.5), (self.rewrite_new_mtime, False),
                   (self.truncate, rng.random() < 0.5), (self.append, False),
                   (self.delete, False), (self.to_directory, False), (self.create, False)]
        for change, want_big in changes:
            pool = [r for r in (big if want_big and big else rels) if r in self.files]
            rel = pool[-1]
            for lst in (big, rels):
                if rel in lst:
                    lst.remove(rel)
            change(rel, rng)
        if self.dirs and rng.random() < 0.5:
            self.back_to_file(rng)


class Chaos(unittest.TestCase):
    def setUp(self):
        self._work = harness.workdir()
        self.src, self.mnt = self._work.__enter__()
        base = os.path.dirname(self.src)
        self.tier = os.path.join(base, "tier")
        staging = os.path.join(base, "staging")
        os.mkdir(self.tier, 0o700)
        os.mkdir(staging)
        self.staging = staging
        self.failures = []  # (round, rel, changes, what)
        self.reader_failed = set()  # (round, rel) with a reader's failure recorded
        self.in_flight = []  # for each kill: were promotions being made?
        self.changes = {}  # rel -> the changes it saw since it was last read, at this mount
        self.tally = collections.defaultdict(collections.Counter)  # changes -> outcomes

    def tearDown(self):
        for pid in harness.tierfs_pids(os.path.dirname(self.src) + "/"):
            os.kill(pid, signal.SIGKILL)
        self._work.__exit__(None, None, None)

    def make_dataset(self, seed):
        """Images (48 files of ~120 KB) and shards (4 of 2-5 MiB) by tools/mkdataset."""
        mkdataset = os.path.join(harness.BIN_DIR, "mkdataset")
        for args in (["images", os.path.join(self.src, "images"), "--classes", "4", "--files",
                      "48", "--mean-kb", "120"],
                     ["shards", os.path.join(self.src, "shards"), "--shards", "4", "--min-size",
                      "2M", "--max-size", "5M"]):
            subprocess.run([sys.executable, mkdataset, *args, "--seed", str(seed)], check=True,
                           timeout=60, stdout=subprocess.DEVNULL)
        return Source(self.src, self.staging)

    # ---- checking what a mount serves ----

    def fail_later(self, rnd, rel, what):
        """Records a wrong answer (a reader's: the first for that file in the round)."""
        if what.startswith("read at"):
            if (rnd, rel) in self.reader_failed:
                return
            self.reader_failed.add((rnd, rel))
        self.failures.append((rnd, rel, self.changes.get(rel, "unchanged"), what))

    def check_all(self, rnd, killed):
        """Every path of SOURCE through the mount, 4 at a time. killed() is the
        moment of the kill (None before): errors after it are the kill's."""
        items = sorted(self.source.files) + sorted(self.source.gone) + sorted(self.source.dirs)
        self.changes = {rel: c[-1] + (f" (after {len(c) - 1} more)" if len(c) > 1 else "")
                        for rel, c in self.source.pending.items() if c}
        random.Random(rnd).shuffle(items)
        results = []

        def worker():
            while items:
                try:
                    rel = items.pop()
                except IndexError:
                    return
                results.append((rel, *self.check_one(rel)))

        threads = [threading.Thread(target=worker, daemon=True) for _ in range(4)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 120
        for t in threads:
            t.join(timeout=max(0, deadline - time.monotonic()))
            if t.is_alive():
                raise AssertionError(f"round {rnd}: reads of the mount hung for 2 minutes")
        for rel, outcome, when in results:
            if when is not None and killed() is not None and when >= killed():
                continue  # the kill's doing
            ok = outcome in ("exact", "eio")
            self.tally[self.changes.get(rel, "unchanged")][
                "exact" if outcome == "exact" else outcome if ok else "WRONG"] += 1
            if ok:  # the changes are labelled until the file reads right
                self.source.pending.pop(rel, None)
            else:
                self.fail_later(rnd, rel, outcome)

    def failure_report(self):
        """The failures grouped by change and kind of answer, with the first example."""
        groups = collections.OrderedDict()
        for rnd, rel, changes, what in self.failures:
            kind = what.split(": ", 1)[1] if what.startswith("read at") else what
            key = (changes, ("a reader: " if what.startswith("read at") else "") + kind)
            first = groups.setdefault(key, [0, f"round {rnd}, {rel}"])
            first[0] += 1
        return "\n".join(f"  {changes}: {kind}: {n}x, first {first}"
                         for (changes, kind), (n, first) in groups.items())

    def check_one(self, rel):
        """(outcome, when): 'exact', 'eio' or what is wrong; when: the time of an error."""
        path = os.path.join(self.mnt, rel)
        try:
            if rel in self.source.dirs:
                is_dir = stat.S_ISDIR(os.lstat(path).st_mode)
                return ("exact" if is_dir else "not the directory it now is"), None
            if rel in self.source.gone:
                os.lstat(path)
                return "deleted on SOURCE, still there", None
            data = harness.read_file(path)
        except OSError as e:
            when = time.monotonic()
            if e.errno in (errno.ENOENT, errno.ENOTDIR) and rel in self.source.gone:
                return "exact", None
            if e.errno == errno.EIO:
                return "eio", when
            return f"error {errno.errorcode.get(e.errno, e.errno)}", when
        return self.source.judge(rel, data), None

    # ---- a mount that is killed ----

    def readers(self, rnd, rng, stop, killed):
        """Threads reading random whole files and ranges until stop is set."""
        rels = sorted(self.source.files)

        def read(seed):
            r = random.Random(seed)
            while not stop.is_set():
                rel = r.choice(rels)
                off = 0 if r.random() < 0.5 else r.randrange(len(self.source.files[rel]) + 1)
                n = r.randrange(1, 3 * MiB) if off else None
                try:
                    with open(os.path.join(self.mnt, rel), "rb") as f:
                        f.seek(off)
                        data = f.read(-1 if n is None else n)
                        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
                except OSError as e:
                    if e.errno != errno.EIO and killed() is None:
                        self.fail_later(rnd, rel, f"error {errno.errorcode.get(e.errno)} "
                                                  "while the daemon lived")
                    continue
                outcome = self.source.judge(rel, data, off, n)
                if outcome != "exact":
                    self.fail_later(rnd, rel, f"read at {off}: {outcome}")

        threads = [threading.Thread(target=read, args=(rng.random(),), daemon=True)
                   for _ in range(READERS)]
        for t in threads:
            t.start()
        return threads

    def killed_round(self, rnd, rng):
        mode = rng.choice(["on-access", "stage-in", "order"])
        policy = "first-fit" if rng.random() < 0.3 else "lru"  # lru: promotions never end
        total = sum(map(len, self.source.files.values()))
        budget = rng.choice([4 * total, total // 2, total // 3])
        options = ["ram=2M", f"tier={self.tier}:{budget}", "chunk_size=1M", f"prefetch={mode}",
                   f"policy={policy}", "promote_threads=4"]
        early = rng.random() < 0.4  # killed while the first reads and promotions run
        delay = rng.uniform(0.0, 0.3) if early else rng.uniform(0.05, 1.0)
        print(f"round {rnd}: -o {','.join(options)}; kill -9 after {delay:.2f} s"
              f"{' (early)' if early else ''}", flush=True)
        kill_time = []
        m = harness.Mount(self.src, self.mnt, options)

        def kill():
            if m.proc.poll() is not None:
                self.fail_later(rnd, "-", f"the daemon died by itself ({m.proc.returncode}): "
                                          f"{m.output()[-2000:]}")
            try:  # were promotions being made in the last 20 ms?
                before = m.stats()["promotions"]["requested"]
                time.sleep(0.02)
                p = m.stats()["promotions"]
                queued = sum(p[k] for k in ("running", "queued_foreground", "queued_lookahead",
                                            "queued_background"))
                self.in_flight.append(queued > 0 or p["requested"] > before)
            except (OSError, ValueError):
                self.in_flight.append(False)
            kill_time.append(time.monotonic())
            m.proc.send_signal(signal.SIGKILL)

        killed = lambda: kill_time[0] if kill_time else None
        stop = threading.Event()
        threads = []
        timer = threading.Timer(delay, kill)
        try:
            if mode == "order":  # look-ahead promotions along a declared order
                order = sorted(self.source.files)
                rng.shuffle(order)
                with open(os.path.join(self.mnt, ".tierfs", "order"), "w") as f:
                    f.write("".join(rel + "\n" for rel in order))
            if early:
                timer.start()
            self.check_all(rnd, killed)
            if not early:
                threads = self.readers(rnd, rng, stop, killed)
                if mode == "on-access":
                    with open(os.path.join(self.mnt, ".tierfs", "stage"), "w") as f:
                        f.write(".\n")
                timer.start()
            timer.join(timeout=5)
            self.assertTrue(kill_time, "the kill did not happen")
        finally:
            timer.cancel()
            stop.set()
            if m.proc.poll() is None:
                m.proc.kill()
            m.proc.wait(timeout=20)
            for t in threads:
                t.join(timeout=30)
            hung = [t for t in threads if t.is_alive()]
            m.close()
        self.assertEqual(hung, [], f"round {rnd}: readers hung after the daemon was killed")
        self.assertFalse(harness.is_mounted(self.mnt))

    def test_kill_9_and_changed_source_never_serve_stale_bytes(self):
        seed = int(os.environ.get("TIERFS_CHAOS_SEED") or random.SystemRandom().randrange(1 << 31))
        print(f"\nchaos seed {seed} (replay: TIERFS_CHAOS_SEED={seed}), up to {ROUNDS} rounds"
              f" in {SECONDS:.0f} s", flush=True)
        rng = random.Random(seed)
        self.source = self.make_dataset(seed)
        start = time.monotonic()
        rounds = 0
        while rounds < ROUNDS and time.monotonic() - start < SECONDS:
            self.killed_round(rounds, rng)
            self.source.change_some(rng)
            rounds += 1
        with harness.Mount(self.src, self.mnt, ["ram=2M", f"tier={self.tier}:1G",
                                                "chunk_size=1M"]):
            self.check_all(rounds, lambda: None)
        busy = sum(self.in_flight)
        print(f"{rounds + 1} mounts in {time.monotonic() - start:.1f} s; {busy} of the"
              f" {len(self.in_flight)} kills hit promotions in flight; outcomes by the last change"
              " a file saw before it was read:", flush=True)
        for change, counts in sorted(self.tally.items()):
            print(f"  {change}: {dict(counts)}", flush=True)
        checked = sum(sum(c.values()) for c in self.tally.values())
        exact = sum(c["exact"] for c in self.tally.values())
        if self.failures:
            self.fail(f"seed {seed}: {len(self.failures)} wrong answers (the last change: what was"
                      f" read, how often, where first):\n{self.failure_report()}")
        # A mount that answered EIO to everything would pass the rest.
        self.assertGreater(exact, 0.9 * checked, f"only {exact} of {checked} reads were exact")

    def test_a_tier_is_not_reused_for_another_source(self):
        files = harness.make_files(self.src, 30, 50_000, subdirs=3)
        other = os.path.join(os.path.dirname(self.src), "other")
        theirs = {}
        for rel, data in files.items():  # the same layout, sizes and mtimes; other bytes
            path = os.path.join(other, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            theirs[rel] = os.urandom(len(data))
            with open(path, "wb") as f:
                f.write(theirs[rel])
            st = os.stat(os.path.join(self.src, rel))
            os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        options = [f"tier={self.tier}:64M"]
        moved = os.path.join(os.path.dirname(self.src), "moved")
        for how in ("at another path", "at the same path"):
            with self.subTest(how):
                with harness.Mount(self.src, self.mnt, options):  # the tier holds our copies
                    for rel in files:
                        harness.read_file(os.path.join(self.mnt, rel))
                source = other
                if how == "at the same path":
                    os.rename(self.src, moved)
                    os.rename(other, self.src)
                    source = self.src
                try:
                    with harness.Mount(source, self.mnt, options):
                        wrong = sorted(rel for rel, data in theirs.items()
                                       if harness.read_file(os.path.join(self.mnt, rel)) != data)
                finally:
                    if how == "at the same path":
                        os.rename(self.src, other)
                        os.rename(moved, self.src)
                self.assertEqual(len(wrong), 0, f"another SOURCE {how}: {len(wrong)} of"
                                                f" {len(theirs)} files read as the first one's,"
                                                f" e.g. {wrong[:3]}")

if __name__ == "__main__":
    harness.main()
