"""The mount is a faithful read-only mirror of SOURCE: content, names,
symlinks, permission bits and mtimes, compared file by file and with
tar, sha256sum and find run over both trees."""
import hashlib
import mmap
import os
import subprocess
import threading
import unittest

import harness

MiB = 1 << 20


def build_tree(src):
    """Writes the tree every case compares; returns {name: bytes} of data files."""
    rnd = lambda n: os.urandom(n)
    files = {
        "empty": b"",
        "one": b"x",
        "page.bin": rnd(4096),
        "mib_plus_one.bin": rnd(MiB + 1),
        "with space.txt": b"spaces in the name\n",
        "ünïcødé_日本語.bin": rnd(777),
    }
    for name, data in files.items():
        with open(os.path.join(src, name), "wb") as f:
            f.write(data)
    # A 256 MiB sparse file with data in three places.
    with open(os.path.join(src, "sparse.bin"), "wb") as f:
        f.truncate(256 * MiB)
        for off in (0, 100 * MiB + 3, 256 * MiB - 5):
            f.seek(off)
            f.write(b"DATA!")
    os.symlink("page.bin", os.path.join(src, "rel_link"))
    os.symlink("/etc/hostname", os.path.join(src, "abs_link"))
    os.symlink("does/not/exist", os.path.join(src, "dangling_link"))
    deep = src
    for i in range(40):
        deep = os.path.join(deep, f"d{i}")
    os.makedirs(deep)
    with open(os.path.join(deep, "bottom.txt"), "w") as f:
        f.write("the bottom\n")
    os.makedirs(os.path.join(src, "empty_dir", "empty_child"))
    big = os.path.join(src, "big_dir")
    os.mkdir(big)
    for i in range(100_000):
        with open(os.path.join(big, f"f{i:06d}"), "wb") as f:
            f.write(b"%d" % i)
    modes = {"mode600": 0o600, "mode755": 0o755, "mode444": 0o444, "mode640": 0o640}
    for name, mode in modes.items():
        p = os.path.join(src, name)
        with open(p, "w") as f:
            f.write(name)
        os.chmod(p, mode)
    os.mkdir(os.path.join(src, "private_dir"), 0o700)
    os.utime(os.path.join(src, "one"), ns=(1_000_000_123_456_789, 1_234_567_890_987_654_321))
    os.utime(os.path.join(src, "page.bin"), ns=(5, 946_684_800_000_000_001))
    return files


def tree_listing(root):
    """(path, type, mode, size, mtime_ns, link target) of everything below root."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            link = os.readlink(p) if os.path.islink(p) else None
            out.append((os.path.relpath(p, root), st.st_mode, st.st_size, st.st_mtime_ns,
                        st.st_uid, st.st_gid, link))
    return sorted(out)


def run(cmd, cwd):
    return subprocess.run(cmd, cwd=cwd, shell=True, check=True, capture_output=True).stdout


class MirrorTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls._work = harness.workdir()
        cls.src, cls.mnt = cls._work.__enter__()
        cls.files = build_tree(cls.src)
        cls.mount = harness.Mount(cls.src, cls.mnt)

    @classmethod
    def tearDownClass(cls):
        cls.mount.close()
        cls._work.__exit__(None, None, None)

    def m(self, *parts):
        return os.path.join(self.mnt, *parts)

    def test_file_contents(self):
        for name, data in self.files.items():
            with open(self.m(name), "rb") as f:
                self.assertEqual(f.read(), data, name)

    def test_sparse_file(self):
        with open(self.m("sparse.bin"), "rb") as f, open(os.path.join(self.src, "sparse.bin"),
                                                         "rb") as g:
            while True:
                a, b = f.read(4 * MiB), g.read(4 * MiB)
                self.assertEqual(a, b)
                if not a:
                    break
        self.assertEqual(os.stat(self.m("sparse.bin")).st_blocks,
                         os.stat(os.path.join(self.src, "sparse.bin")).st_blocks)

    def test_metadata_listing(self):
        self.assertEqual(tree_listing(self.mnt), tree_listing(self.src))

    def test_symlinks(self):
        self.assertEqual(os.readlink(self.m("rel_link")), "page.bin")
        self.assertEqual(os.readlink(self.m("abs_link")), "/etc/hostname")
        self.assertEqual(os.readlink(self.m("dangling_link")), "does/not/exist")
        with open(self.m("rel_link"), "rb") as f:
            self.assertEqual(f.read(), self.files["page.bin"])

    def test_deep_and_empty_dirs(self):
        deep = self.m(*[f"d{i}" for i in range(40)], "bottom.txt")
        with open(deep) as f:
            self.assertEqual(f.read(), "the bottom\n")
        self.assertEqual(os.listdir(self.m("empty_dir")), ["empty_child"])
        self.assertEqual(os.listdir(self.m("empty_dir", "empty_child")), [])

    def test_hundred_thousand_entries(self):
        names = os.listdir(self.m("big_dir"))
        self.assertEqual(len(names), 100_000)
        self.assertEqual(sorted(names), sorted(os.listdir(os.path.join(self.src, "big_dir"))))
        for i in (0, 4242, 99_999):
            with open(self.m("big_dir", f"f{i:06d}"), "rb") as f:
                self.assertEqual(f.read(), b"%d" % i)

    def test_permissions_and_mtimes(self):
        for name, mode in {"mode600": 0o600, "mode755": 0o755, "mode444": 0o444,
                           "mode640": 0o640}.items():
            self.assertEqual(os.stat(self.m(name)).st_mode & 0o7777, mode, name)
        self.assertEqual(os.stat(self.m("private_dir")).st_mode & 0o7777, 0o700)
        self.assertEqual(os.stat(self.m("one")).st_mtime_ns, 1_234_567_890_987_654_321)
        self.assertEqual(os.stat(self.m("page.bin")).st_mtime_ns, 946_684_800_000_000_001)

    def test_mmap(self):
        with open(self.m("mib_plus_one.bin"), "rb") as f:
            with mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as mm:
                self.assertEqual(mm[:], self.files["mib_plus_one.bin"])
                self.assertEqual(mm[MiB], self.files["mib_plus_one.bin"][MiB])

    def test_pread_odd_offsets_and_past_eof(self):
        for name in ("mib_plus_one.bin", "page.bin", "one", "empty"):
            data = self.files[name]
            fd = os.open(self.m(name), os.O_RDONLY)
            try:
                for off in (0, 1, 3, 4095, 4097, MiB - 1, MiB, MiB + 1, len(data),
                            len(data) + 1, len(data) + 12345):
                    for size in (1, 3, 4096, 131073, 2 * MiB):
                        self.assertEqual(os.pread(fd, size, off), data[off:off + size],
                                         f"{name} off={off} size={size}")
            finally:
                os.close(fd)

    def test_parallel_lookups_and_listings_in_one_directory(self):
        # The kernel runs the LOOKUPs and READDIRs of one directory in
        # parallel (FUSE_PARALLEL_DIROPS, added to libfuse 3.14's INIT reply by
        # fs/fuse/parallel_dirops.cc): 16 threads stat and list big_dir at once.
        self.assertIs(self.mount.stats()["parallel_dirops"], True)
        errors = []

        def worker(k):
            try:
                for i in range(k, 100_000, 397 * 16):
                    name = f"f{i:06d}"
                    if os.stat(self.m("big_dir", name)).st_size != len(b"%d" % i):
                        errors.append(f"{name}: wrong size")
                if k % 4 == 0 and len(os.listdir(self.m("big_dir"))) != 100_000:
                    errors.append(f"thread {k}: short listing")
            except OSError as e:
                errors.append(f"thread {k}: {e}")

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])

    def test_control_dir_hidden_but_readable(self):
        self.assertNotIn(".tierfs", os.listdir(self.mnt))
        stats = self.mount.stats()
        self.assertEqual(stats["namespace"]["files"],
                         len(self.files) + 1 + 1 + 100_000 + 4)

    def test_tar_sha256sum_find_agree(self):
        tar = "tar --sort=name --format=gnu -cf - . | sha256sum"
        self.assertEqual(run(tar, self.mnt), run(tar, self.src))
        sums = "find . -type f -print0 | sort -z | xargs -0 sha256sum"
        self.assertEqual(run(sums, self.mnt), run(sums, self.src))
        find = "find . -printf '%p %y %m %s %T@ %U %G %l\\n' | sort"
        self.assertEqual(run(find, self.mnt), run(find, self.src))


if __name__ == "__main__":
    harness.main()
