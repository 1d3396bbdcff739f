#!/usr/bin/env python3
"""Checks that the library's folders depend only downwards.

Each folder of tiering/, prefetch/ and fs/ that holds sources is one library
(docs/ARCHITECTURE.md, "Folders and libraries"; tiering/peers only groups its
five); a file may include headers of its own folder and of the folders below
it (tiering/peers/server sits on tiering/peers/secure), never of one above or
beside it, and a library links only
the libraries of those folders (the CMakeLists.txt of the three layers). FUSE
headers appear only in fs/fuse and fs/mount (and tools/); the config leaves
include only tiering/base and each other. Exit status 1 lists
every include and link that breaks this. check_layers_test.py checks that it
does.
"""
import pathlib
import posixpath
import re
import sys

# folder -> folders its files may include (besides itself)
BELOW = {
    "tiering/base": set(),
    "tiering/io": {"tiering/base"},
    "tiering/namespace": {"tiering/base", "tiering/io"},
    "tiering/source": {"tiering/base", "tiering/io", "tiering/namespace"},
    "tiering/store": {"tiering/base", "tiering/io", "tiering/namespace"},
    # The core: a read, a promotion, "the home, then SOURCE". It knows the
    # peers only as ChunkHomes (tiering/namespace), never the peer stack.
    "tiering/engine": {"tiering/base", "tiering/io", "tiering/namespace", "tiering/source",
                       "tiering/store"},
}
# The peer stack, config -> transport -> secure -> {client, server}. Only
# tiering/peers/server may serve peers (answer another node's handshake and
# requests, from a ChunkProvider); only tiering/peers/client may ask them. The
# two share the handshake (secure) and the transport and never include each
# other; the engine knows the peers only as ChunkHomes (tiering/namespace), and
# fs/peers is the one front door that runs the server on the engine's reads.
CORE = {"tiering/base", "tiering/io", "tiering/namespace"}
BELOW["tiering/peers/config"] = {"tiering/base"}
BELOW["tiering/peers/transport"] = CORE | {"tiering/peers/config"}
BELOW["tiering/peers/secure"] = BELOW["tiering/peers/transport"] | {"tiering/peers/transport"}
BELOW["tiering/peers/client"] = BELOW["tiering/peers/secure"] | {"tiering/peers/secure"}
BELOW["tiering/peers/server"] = BELOW["tiering/peers/secure"] | {"tiering/peers/secure"}
TIERING = set(BELOW)
# prefetch/ plans ahead over the engine (planners) and assembles the two
# with the peers (assembly).
BELOW["prefetch/planners"] = TIERING
BELOW["prefetch/assembly"] = TIERING | {"prefetch/planners"}
PREFETCH = {"prefetch/planners", "prefetch/assembly"}
# fs/: the counters' writers and the options need no FUSE; the two front
# doors: the peer service (fs/peers) goes in through the engine's read path
# only, the FUSE adapter (fs/fuse) through the whole engine, and it may know
# the modes the options name (fs/config); the mount (fs/mount) assembles the
# daemon from all of them.
BELOW["fs/telemetry"] = {"tiering/base"}
BELOW["fs/config"] = TIERING | PREFETCH
BELOW["fs/peers"] = TIERING
BELOW["fs/fuse"] = TIERING | PREFETCH | {"fs/peers", "fs/telemetry", "fs/config"}
BELOW["fs/mount"] = TIERING | PREFETCH | {"fs/peers", "fs/telemetry", "fs/config", "fs/fuse"}
FUSE_FOLDERS = {"fs/fuse", "fs/mount"}
# The config leaves: what the mount's options fill in, read by the option
# parser (tierfs_fs_options) and its fuzz target without the engine. A leaf
# includes only tiering/base and other leaves, so that the parser links no
# UCX, MUNGE or libcrypto (structure.unit_links checks the link).
CONFIG_LEAVES = {
    "tiering/namespace/index_check.h",
    "tiering/store/policy_names.h",
    "tiering/peers/config/peer_list.h",
    "tiering/peers/config/source_port.h",
    "tiering/peers/config/job_peers_config.h",
    "prefetch/planners/prefetch_config.h",
    "prefetch/assembly/tiering_config.h",
    "fs/config/mount_modes.h",
    "fs/config/options.h",
    "fs/config/option_table.h",
}
LAYERS = ("tiering", "prefetch", "fs")

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]', re.M)
FUSE = re.compile(r"^(fuse|fuse3)/|^fuse_")
CMAKE_COMMENT = re.compile(r"#[^\n]*")
ADD_LIBRARY = re.compile(r"\badd_library\(\s*(\S+)([^)]*)\)")
LINK = re.compile(r"\btarget_link_libraries\(\s*(\S+)([^)]*)\)")


def folder_of(path: str):
    return path.rsplit("/", 1)[0] if "/" in path else ""


def check_includes(root: pathlib.Path, problems: list) -> int:
    checked = 0
    for folder, allowed in BELOW.items():
        files = sorted((root / folder).glob("*.h")) + sorted((root / folder).glob("*.cc"))
        if not files:
            problems.append(f"{folder}: no sources (the layer table is out of date)")
        for f in files:
            checked += 1
            rel = f.relative_to(root).as_posix()
            for inc in INCLUDE.findall(f.read_text(errors="replace")):
                if FUSE.search(inc) and folder not in FUSE_FOLDERS:
                    problems.append(f"{rel}: includes FUSE header <{inc}> outside "
                                    "fs/fuse and fs/mount")
                target = folder_of(inc)
                if target not in BELOW or target == folder:
                    continue
                if target not in allowed:
                    problems.append(f"{rel}: includes {inc} ({target} is not below {folder})")
    return checked


def check_leaves(root: pathlib.Path, problems: list):
    for leaf in sorted(CONFIG_LEAVES):
        path = root / leaf
        if not path.exists():
            problems.append(f"{leaf}: a config leaf that is gone (the leaf list is out of date)")
            continue
        for inc in INCLUDE.findall(path.read_text(errors="replace")):
            if folder_of(inc) in BELOW and folder_of(inc) != "tiering/base" \
                    and inc not in CONFIG_LEAVES:
                problems.append(f"{leaf}: a config leaf includes {inc} (only tiering/base "
                                "and the other leaves)")


def read_libraries(root: pathlib.Path, problems: list):
    """Returns ({library: folder}, {library: [linked tierfs_ libraries]}) of the layers' CMake."""
    folders, links = {}, {}
    for layer in LAYERS:
        for lists in sorted((root / layer).rglob("CMakeLists.txt")):
            base = lists.parent.relative_to(root).as_posix()
            text = CMAKE_COMMENT.sub("", lists.read_text(errors="replace"))
            for name, args in ADD_LIBRARY.findall(text):
                sources = [s for s in args.split() if s.endswith(".cc")]
                homes = {folder_of(posixpath.normpath(f"{base}/{s}")) for s in sources}
                if len(homes) > 1:
                    shown = ", ".join(sorted(homes))
                    problems.append(f"{name}: a library of several folders ({shown})")
                if homes:  # an INTERFACE library gathers others: no folder of its own
                    folders[name] = homes.pop()
            for name, args in LINK.findall(text):
                linked = [a for a in args.split() if a.startswith("tierfs_")]
                links.setdefault(name, []).extend(linked)
    return folders, links


def check_links(root: pathlib.Path, problems: list) -> int:
    folders, links = read_libraries(root, problems)

    def linked_folders(lib, seen):  # an INTERFACE library stands for what it links
        if lib in folders:
            return {folders[lib]}
        if lib in seen:
            return set()
        seen.add(lib)
        return set().union(*(linked_folders(l, seen) for l in links.get(lib, [])))

    for lib, folder in sorted(folders.items()):
        if folder not in BELOW:
            continue  # the folder check below names it
        for dep in links.get(lib, []):
            for target in sorted(linked_folders(dep, set())):
                if target != folder and target not in BELOW[folder]:
                    problems.append(f"{lib} ({folder}): links {dep} "
                                    f"({target} is not below {folder})")
    return len(folders)


def check_folders(root: pathlib.Path, problems: list):
    # Every source folder of the layers is in the table; a folder that is not
    # (a layer, or a group such as tiering/peers) holds no source but folders
    # of the table.
    groups = {folder_of(f) for f in BELOW} | set(LAYERS)
    for d in sorted(p for layer in LAYERS for p in [root / layer, *(root / layer).rglob("*")]
                    if p.is_dir()):
        name = d.relative_to(root).as_posix()
        if name in BELOW:
            continue
        if name not in groups:
            problems.append(f"{name}: a folder the layer table does not know")
            continue
        for f in sorted(d.glob("*.[hc]*")):
            problems.append(f"{f.relative_to(root)}: a source outside the layer's folders")


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    problems = []
    checked = check_includes(root, problems)
    check_leaves(root, problems)
    libraries = check_links(root, problems)
    check_folders(root, problems)
    for p in problems:
        print(p)
    print(f"check_layers: {checked} files, {libraries} libraries, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
