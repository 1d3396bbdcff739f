#!/usr/bin/env python3
"""check_layers.py fails on what it is there to catch.

Builds a small tree with one header in every folder of the layer table, which
must pass, then breaks it one way at a time (a sideways include, an include
upwards, a FUSE header where none belongs, a config leaf on the engine, a
sideways link, a stray source, an unknown folder) and expects exit status 1 and a line naming the fault.
"""
import pathlib
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
SCRIPT = HERE / "check_layers.py"
sys.path.insert(0, str(HERE))
import check_layers  # noqa: E402

FS_CMAKE = """
add_library(tierfs_fs_config STATIC config/options.cc)  # a comment (with parentheses)
target_link_libraries(tierfs_fs_config PUBLIC tierfs_prefetch)
add_library(tierfs_fs_fuse STATIC
  fuse/ops.cc
)
target_link_libraries(tierfs_fs_fuse PUBLIC tierfs_fs_telemetry PkgConfig::FUSE3)
add_library(tierfs_fs_telemetry STATIC telemetry/prometheus.cc)
add_library(tierfs_prefetch STATIC ../prefetch/assembly/store.cc)
add_library(tierfs_fs INTERFACE)
target_link_libraries(tierfs_fs INTERFACE tierfs_fs_fuse tierfs_fs_config)
"""

# name -> (files to write or overwrite, text the report must hold)
BREAKS = {
    "sideways include": ({"fs/config/options.cc": '#include "fs/telemetry/x.h"\n'},
                         "fs/config/options.cc: includes fs/telemetry/x.h "
                         "(fs/telemetry is not below fs/config)"),
    "include upwards": ({"fs/fuse/ops.cc": '#include "fs/mount/x.h"\n'},
                        "(fs/mount is not below fs/fuse)"),
    "include upwards into the adapter": ({"fs/config/options.cc": '#include "fs/fuse/x.h"\n'},
                                         "(fs/fuse is not below fs/config)"),
    "include across tiering": ({"tiering/store/x.h": '#include "tiering/peers/client/x.h"\n'},
                               "(tiering/peers/client is not below tiering/store)"),
    "server includes the client": ({"tiering/peers/server/x.h":
                                    '#include "tiering/peers/client/x.h"\n'},
                                   "(tiering/peers/client is not below tiering/peers/server)"),
    "transport includes the handshake": ({"tiering/peers/transport/x.h":
                                          '#include "tiering/peers/secure/x.h"\n'},
                                         "(tiering/peers/secure is not below "
                                         "tiering/peers/transport)"),
    "stray source in a group": ({"tiering/peers/loose.h": ""},
                                "tiering/peers/loose.h: a source outside the layer's folders"),
    "FUSE outside the adapter": ({"fs/telemetry/prometheus.cc": "#include <fuse_lowlevel.h>\n"},
                                 "includes FUSE header <fuse_lowlevel.h> outside"),
    "sideways link": ({"fs/CMakeLists.txt": FS_CMAKE.replace(
        "PUBLIC tierfs_prefetch", "PUBLIC tierfs_prefetch tierfs_fs_telemetry")},
        "tierfs_fs_config (fs/config): links tierfs_fs_telemetry (fs/telemetry is not below "
        "fs/config)"),
    "upward link through a group": ({"fs/CMakeLists.txt": FS_CMAKE.replace(
        "PUBLIC tierfs_prefetch", "PUBLIC tierfs_prefetch tierfs_fs")},
        "tierfs_fs_config (fs/config): links tierfs_fs (fs/fuse is not below fs/config)"),
    "config leaf on the engine": ({"prefetch/assembly/tiering_config.h":
                                   '#include "tiering/engine/x.h"\n'},
                                  "prefetch/assembly/tiering_config.h: a config leaf includes "
                                  "tiering/engine/x.h"),
    "config leaf gone": ({"tiering/peers/config/source_port.h": None},
                         "tiering/peers/config/source_port.h: a config leaf that is gone"),
    "stray source": ({"fs/loose.cc": ""}, "a source outside the layer's folders"),
    "unknown folder": ({"fs/newthing/a.h": ""},
                       "fs/newthing: a folder the layer table does not know"),
    "emptied folder": ({"fs/mount/x.h": None}, "fs/mount: no sources"),
}


def make_tree(root: pathlib.Path):
    for folder in check_layers.BELOW:
        (root / folder).mkdir(parents=True)
        (root / folder / "x.h").write_text("#pragma once\n#include <string>\n")
    for leaf in check_layers.CONFIG_LEAVES:
        (root / leaf).write_text('#pragma once\n#include "tiering/base/x.h"\n')
    for name in ("fs/config/options.cc", "fs/fuse/ops.cc", "fs/telemetry/prometheus.cc",
                 "prefetch/assembly/store.cc"):
        (root / name).write_text('#include "tiering/base/x.h"\n')
    (root / "fs/fuse/ops.cc").write_text(
        '#include <fuse_lowlevel.h>\n#include "fs/telemetry/x.h"\n#include "fs/config/x.h"\n')
    (root / "fs/CMakeLists.txt").write_text(FS_CMAKE)


def run(root: pathlib.Path):
    done = subprocess.run([sys.executable, str(SCRIPT), str(root)], capture_output=True,
                          text=True, timeout=60)
    return done.returncode, done.stdout


def main() -> int:
    failures = []
    with tempfile.TemporaryDirectory(prefix="check_layers_test.") as tmp:
        clean = pathlib.Path(tmp) / "clean"
        make_tree(clean)
        code, out = run(clean)
        if code != 0 or "0 problem(s)" not in out:
            failures.append(f"the clean tree: exit {code}, expected 0:\n{out}")
        for i, (name, (files, expected)) in enumerate(BREAKS.items()):
            root = pathlib.Path(tmp) / f"break{i}"
            make_tree(root)
            for path, text in files.items():
                target = root / path
                if text is None:
                    target.unlink()
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text)
            code, out = run(root)
            if code != 1 or expected not in out:
                failures.append(f"{name}: exit {code}, expected 1 and '{expected}':\n{out}")
    for f in failures:
        print(f)
    print(f"check_layers_test: {len(BREAKS) + 1} trees, {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
