#!/usr/bin/env python3
"""tools/check-thread-safety fails on what it is there to catch.

Usage: check_thread_safety_test.py BUILD_DIR

Runs the check over test/structure/thread_safety_fixture.cc, which must
pass, then over each of its broken variants (a guarded field read, and one
written, without the lock; a REQUIRES helper called without it; a wait
predicate that does not say it holds the lock; two locks against their
ACQUIRED_BEFORE order; a write under a reader's lock; a field touched after
the scope let go of its lock) and expects exit status 1 and the diagnostic
naming the fault. Exit status 77 (skipped) without clang++.
"""
import concurrent.futures
import os
import pathlib
import shutil
import subprocess
import sys

from structure_report import report, usage

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CHECK = ROOT / "tools" / "check-thread-safety"
FIXTURE = HERE / "thread_safety_fixture.cc"

# define -> text the diagnostics must hold
BREAKS = {
    "TIERFS_BREAK_UNLOCKED_READ": "reading variable 'count_' requires holding mutex 'mu_'",
    "TIERFS_BREAK_UNLOCKED_WRITE": "writing variable 'count_' requires holding mutex 'mu_' "
                                   "exclusively",
    "TIERFS_BREAK_REQUIRES": "calling function 'Ready' requires holding mutex 'mu_' exclusively",
    "TIERFS_BREAK_UNANNOTATED_PREDICATE": "reading variable 'count_' requires holding mutex 'mu_'",
    "TIERFS_BREAK_ORDER": "mutex 'mu_' must be acquired before 'log_mu_'",
    "TIERFS_BREAK_WRITE_UNDER_READER": "writing variable 'table_' requires holding mutex "
                                       "'table_mu_' exclusively",
    "TIERFS_BREAK_AFTER_UNLOCK": "count_' requires holding mutex 'mu_'",
}


def check(build: str, define: str | None) -> tuple[int, str]:
    args = [sys.executable, str(CHECK), "--jobs", "1", build, str(FIXTURE)]
    if define:
        args[2:2] = [f"--extra-arg=-D{define}"]
    done = subprocess.run(args, capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        return usage(__doc__)
    if shutil.which("clang++") is None:
        print("check_thread_safety_test: no clang++: skipped")
        return 77
    problems = []
    variants = [None] + list(BREAKS)
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        results = dict(zip(variants, pool.map(lambda d: check(argv[1], d), variants)))
    status, output = results[None]
    if status != 0:
        problems.append(f"the fixture as it is: exit status {status}, expected 0:\n{output}")
    for define, expected in BREAKS.items():
        status, output = results[define]
        if status != 1 or expected not in output:
            problems.append(f"{define}: exit status {status}, expected 1 and '{expected}':\n"
                            f"{output}")
    return report("check_thread_safety_test", f"the fixture and {len(BREAKS)} broken variants",
                  problems)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
