#!/usr/bin/env python3
"""Checks that the library's folders depend only downwards.

Each folder of tiering/ and prefetch/, and fs/peers, is one library
(docs/ARCHITECTURE.md, "Folders and libraries"); a file may include headers
of its own folder and of the folders below it, never of one above or beside
it (tiering/peer_server sits on tiering/peer). FUSE headers appear only in
fs/ (and tools/). Exit status 1 lists every include that breaks this.
"""
import pathlib
import re
import sys

# folder -> folders its files may include (besides itself)
BELOW = {
    "tiering/base": set(),
    "tiering/io": {"tiering/base"},
    "tiering/namespace": {"tiering/base", "tiering/io"},
    "tiering/source": {"tiering/base", "tiering/io", "tiering/namespace"},
    "tiering/store": {"tiering/base", "tiering/io", "tiering/namespace"},
    "tiering/peer": {"tiering/base", "tiering/io", "tiering/namespace"},
    "tiering/peer_server": {"tiering/base", "tiering/io", "tiering/namespace", "tiering/peer"},
}
TIERING = set(BELOW)
BELOW["prefetch/engine"] = TIERING
BELOW["prefetch/planners"] = TIERING | {"prefetch/engine"}
BELOW["prefetch/assembly"] = TIERING | {"prefetch/engine", "prefetch/planners"}
# The two front doors: the peer service (fs/peers) goes in through the
# engine's read path only; the FUSE adapter (fs) assembles the daemon.
BELOW["fs/peers"] = TIERING | {"prefetch/engine"}
BELOW["fs"] = TIERING | {"prefetch/engine", "prefetch/planners", "prefetch/assembly", "fs/peers"}

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]', re.M)
FUSE = re.compile(r"^(fuse|fuse3)/|^fuse_")


def folder_of(path: str):
    return path.rsplit("/", 1)[0] if "/" in path else ""


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    problems = []
    checked = 0
    for folder, allowed in BELOW.items():
        files = sorted((root / folder).glob("*.h")) + sorted((root / folder).glob("*.cc"))
        if not files:
            problems.append(f"{folder}: no sources (the layer table is out of date)")
        for f in files:
            checked += 1
            rel = f.relative_to(root).as_posix()
            for inc in INCLUDE.findall(f.read_text(errors="replace")):
                if FUSE.search(inc) and folder != "fs":
                    problems.append(f"{rel}: includes FUSE header <{inc}> outside fs/")
                target = folder_of(inc)
                if target not in BELOW or target == folder:
                    continue
                if target not in allowed:
                    problems.append(f"{rel}: includes {inc} ({target} is not below {folder})")
    # Every source folder of the two layers is in the table.
    for layer in ("tiering", "prefetch", "fs"):
        for d in sorted(p for p in (root / layer).iterdir() if p.is_dir()):
            name = d.relative_to(root).as_posix()
            if name not in BELOW:
                problems.append(f"{name}: a folder the layer table does not know")
        if layer in BELOW:  # fs/ holds the FUSE adapter's files itself
            continue
        loose = sorted((root / layer).glob("*.[hc]*"))
        for f in loose:
            problems.append(f"{f.relative_to(root)}: a source outside the layer's folders")
    for p in problems:
        print(p)
    print(f"check_layers: {checked} files, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
