#!/usr/bin/env python3
"""Checks that the unit test runners of the core, the read engine and the
option parser link no FUSE or peer library.

Usage: check_unit_links.py BUILD_DIR RUNNER...

The tests of tiering/base, io, namespace, source and store, those of
tiering/engine (which knows the peers only as ChunkHomes) and those of the
option parser (fs/config's tierfs_fs_options, also the options fuzz target)
build and run without the FUSE adapter and the peers (docs/ARCHITECTURE.md,
"Folders and libraries"). For each runner (a path to the built binary) this
reads
  - its link line as CMake wrote it (Makefiles: CMakeFiles/NAME.dir/link.txt
    below BUILD_DIR; Ninja: build.ninja's LINK_LIBRARIES), which names every
    library given to the linker, used or not, and
  - the shared libraries it loads (`ldd`, transitive),
and fails on libfuse, UCX (libucp, libucs, libuct, libucm), MUNGE, libcrypto
or a tierfs library that brings them (tierfs_fs, tierfs_peer_transport,
tierfs_peer_secure, tierfs_peer_client, tierfs_peer_server, tierfs_peer_service,
tierfs_parallel_dirops, tierfs_engine and above; a runner may link the library it is named after:
unit_tests_engine, tierfs_engine). Exit status 1 names each runner and what
it links.
"""
import pathlib
import re
import subprocess
import sys

from structure_report import report, usage

TIERFS_ABOVE = ("fs", "peer_transport", "peer_secure", "peer_client", "peer_server",
                "peer_service", "parallel_dirops", "engine", "planners", "prefetch")


def forbidden(runner_name: str) -> re.Pattern:
    """What `runner_name` may not link: all of TIERFS_ABOVE but its own library."""
    own = runner_name.removeprefix("unit_tests_")
    libs = "|".join(lib for lib in TIERFS_ABOVE if lib != own)
    return re.compile(r"libfuse3?\b|-lfuse3?\b|libuc[pstm]\b|-luc[pstm]\b|libmunge\b|-lmunge\b"
                      r"|libcrypto\b|-lcrypto\b"
                      rf"|libtierfs_({libs})\.a")


def link_line(build: pathlib.Path, name: str) -> str:
    """The runner's link command as CMake generated it ('' if not found)."""
    for link_txt in build.glob(f"**/CMakeFiles/{name}.dir/link.txt"):
        return link_txt.read_text()
    ninja = build / "build.ninja"
    if ninja.exists():
        block = re.search(rf"^build \S*bin/{re.escape(name)}: .*?(?=^build |\Z)",
                          ninja.read_text(), re.M | re.S)
        if block:
            return block.group(0)
    return ""


def problems(build: pathlib.Path, runner: pathlib.Path) -> list[str]:
    name = runner.name
    not_allowed = forbidden(name)
    if not runner.exists():
        return [f"{runner}: not built"]
    found = []
    line = link_line(build, name)
    if not line:
        found.append(f"{name}: no link line found below {build}")
    for m in sorted({x.group(0) for x in not_allowed.finditer(line)}):
        found.append(f"{name}: linked with {m} (link line)")
    ldd = subprocess.run(["ldd", str(runner)], capture_output=True, text=True)
    if ldd.returncode != 0:
        found.append(f"{name}: ldd failed: {ldd.stderr.strip()}")
    for lib in ldd.stdout.splitlines():
        lib = lib.strip().split(" ")[0]
        if not_allowed.search(lib):
            found.append(f"{name}: loads {lib}")
    return found


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        return usage(__doc__)
    build = pathlib.Path(argv[1])
    found = [p for runner in argv[2:] for p in problems(build, pathlib.Path(runner))]
    return report("check_unit_links", f"{len(argv) - 2} runners", found)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
