"""tools/bench's tierfs-door-load in a network namespace of its own (its
loopback only, so that the thousand simulated nodes' addresses, 127.10.x.y,
and the flood's, 127.9.0.1, touch nothing else): 1,023 honest peers
connecting within a second to one real peer door while a flood from one
address goes on. The tool checks and prints it: every honest peer gets a
session at its first attempt, asked for no more work than 5% of a core in
a node's first second, and the flooder gets no more than its turns at the
checks; again with a flooder that solves every puzzle at once (the door
asks for none: only the turns at munged hold it back). Also: bad
arguments are refused (exit 2).

Skipped (exit 77) unless root with `unshare` and `ip` (a namespace needs
both), or when the tool is not built."""
import os
import shutil
import subprocess
import sys
import unittest

import mounts  # test/bench/mounts.py: --bin-dir/--source-dir

ARGS = None


def tool():
    return os.path.join(ARGS.bin_dir, "tierfs-door-load")


def skip_reason():
    if not os.access(tool(), os.X_OK):
        return "tierfs-door-load is not built"
    if os.geteuid() != 0:
        return "needs root (a network namespace)"
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return "needs unshare and ip (util-linux, iproute2)"
    return ""


def in_namespace(argv, timeout):
    """Runs `argv` in a new network namespace with its loopback up."""
    script = "ip link set lo up && exec \"$@\""
    return subprocess.run(["unshare", "--net", "sh", "-c", script, "sh"] + argv,
                          capture_output=True, text=True, timeout=timeout)


class DoorLoad(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        reason = skip_reason()
        if reason:
            raise unittest.SkipTest(reason)

    def test_start_storm_and_flood(self):
        proc = in_namespace([tool()], timeout=90)
        print(proc.stdout, proc.stderr, flush=True)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("1023/1023 got a session", proc.stdout)
        self.assertIn("time to session ms p50", proc.stdout)
        self.assertIn("of the checks while an honest hello waited", proc.stdout)

    def test_flood_that_solves_every_puzzle(self):
        """--max-bits 0: the door asks for no work, as if the flooder solved
        any puzzle at once (a GPU): only the turns keep it to its share."""
        proc = in_namespace([tool(), "--max-bits", "0"], timeout=90)
        print(proc.stdout, proc.stderr[-2000:], flush=True)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr[-2000:])
        self.assertIn("1023/1023 got a session (1023 at the first attempt)", proc.stdout)

    def test_bad_arguments(self):
        for argv in (["--peers", "0"], ["--peers"], ["--window-ms", "x"], ["--nothing", "1"]):
            proc = subprocess.run([tool()] + argv, capture_output=True, text=True, timeout=30)
            self.assertEqual(proc.returncode, 2, argv)
            self.assertIn("usage:", proc.stderr)


def main():
    global ARGS
    ARGS = mounts.parse_args()
    mounts.unittest_main(sys.argv[0])


if __name__ == "__main__":
    main()
