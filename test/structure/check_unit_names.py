#!/usr/bin/env python3
"""Checks that ctest can run every unit test case by its name.

Usage: check_unit_names.py RUNNER...

catch_discover_tests makes one ctest per test case, named after it, from
each runner's --list-test-names-only, which it reads as a CMake list: a ';'
in a name splits the case into two ctests that each match nothing and pass
without running it. Two runners with a case of the same name would give
ctest two tests of one name. Exit status 1 names each such case.
"""
import subprocess
import sys

from structure_report import report, usage


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        return usage(__doc__)
    seen: dict[str, str] = {}
    problems = []
    for runner in argv[1:]:
        listed = subprocess.run([runner, "--list-test-names-only"], capture_output=True, text=True)
        if listed.returncode < 0 or not listed.stdout.strip():
            problems.append(f"{runner}: lists no test case ({listed.stderr.strip()})")
        for name in filter(None, (n.strip() for n in listed.stdout.splitlines())):
            if ";" in name:
                problems.append(f"{runner}: '{name}': a ';' splits it into two ctests that run nothing")
            if name in seen:
                problems.append(f"{runner}: '{name}': also in {seen[name]}")
            seen[name] = runner
    return report("check_unit_names", f"{len(seen)} test cases", problems)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
