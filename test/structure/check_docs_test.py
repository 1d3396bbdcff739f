#!/usr/bin/env python3
"""check_doc_paths.py and check_architecture.py fail on what they are there to catch.

Builds a small tree (a few sources, docs/ARCHITECTURE.md with its lock table,
library diagram and component table) that both checks pass, then breaks it
one way at a time and expects exit status 1 and a line naming the fault:
for check_doc_paths, a moved path in a C++, Python, shell or CMake comment
and a dropped doc section; for check_architecture, a mutex member without a
row, a row without a mutex, a std::mutex member, a lock order the code states and the table does
not, one the table states within a class and the code does not, an order
against no mutex, a "may be held" naming no row, a page over 400 lines and a
commit hash. A path
in a string literal (not a comment) and a placeholder path must not count.
"""
import pathlib
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from structure_report import report  # noqa: E402

STORE_H = """#pragma once
#include <mutex>
#include "tiering/base/mutex.h"
// The store (tiering/store/store.h); formats in docs/ARCHITECTURE.md, "Threads".
namespace tierfs {
class Store {
 private:
  Mutex mu_ ACQUIRED_BEFORE(list_mu_);  // guards nothing much
  Mutex list_mu_;
  struct Stripe {
    Mutex mu;
  };
  const char* path_ = "tiering/nowhere/gone.h";  // a string, not a comment: never checked
};
}  // namespace tierfs
"""

ARCHITECTURE = """# architecture

## Folders and libraries

```
 tiering/store/   tierfs_store: Store
```

| unit | file | role |
|---|---|---|
| `Store` | tiering/store/store.h | the store |

## Threads

Test data: fuzz corpora live in test/fuzz/corpus/TARGET.

## Concurrency and lock order

| mutex | guards | may be held when it is taken | held across I/O |
|---|---|---|---|
| `Store::mu_` | nothing much | none | no |
| `Store::list_mu_` | a list | `Store::mu_` | no |
| `Store::Stripe::mu` | a stripe | none | no |
"""

FILES = {
    "tiering/store/store.h": STORE_H,
    "tiering/CMakeLists.txt": "# The store: tiering/store/store.h\nadd_library(tierfs_store STATIC)\n",
    "test/fuzz/corpus/x/seed": "",
    "tools/run.py": '"""Runs tiering/store/store.h\'s tests."""\n# see docs/ARCHITECTURE.md, "Threads"\n',
    "tools/run.bash": "# runs what tiering/store/ holds\necho hi  # not a comment path: $# \n",
    "docs/ARCHITECTURE.md": ARCHITECTURE,
}

PATHS = HERE / "check_doc_paths.py"
ARCH = HERE / "check_architecture.py"
# name -> (check, files to overwrite (None: delete), text the report must hold)
BREAKS = {
    "moved path in a C++ comment": (PATHS, {"tiering/store/store.h": STORE_H.replace(
        "(tiering/store/store.h)", "(tiering/store.h)")},
        "tiering/store/store.h:4: no file or folder 'tiering/store.h'"),
    "moved file named bare in a C++ comment": (PATHS, {"tiering/store/store.h": STORE_H.replace(
        "(tiering/store/store.h)", "(store_old.h)")}, "no file 'store_old.h' in any folder"),
    "moved path in a Python docstring": (PATHS, {"tools/run.py": FILES["tools/run.py"].replace(
        "tiering/store/store.h", "tiering/store/gone.h")}, "tools/run.py:1: no file or folder"),
    "moved folder in a shell comment": (PATHS, {"tools/run.bash": FILES["tools/run.bash"].replace(
        "tiering/store/", "tiering/old_store/")}, "tools/run.bash:1: no file or folder"),
    "moved path in a CMake comment": (PATHS, {"tiering/CMakeLists.txt": FILES[
        "tiering/CMakeLists.txt"].replace("store/store.h", "store/x.h")},
        "tiering/CMakeLists.txt:1: no file or folder 'tiering/store/x.h'"),
    "a section dropped from a doc": (PATHS, {"docs/ARCHITECTURE.md": ARCHITECTURE.replace(
        "## Threads", "## Thread pools")}, "docs/ARCHITECTURE.md has no section 'Threads'"),
    "a mutex without a row": (ARCH, {"docs/ARCHITECTURE.md": ARCHITECTURE.replace(
        "| `Store::Stripe::mu` | a stripe | none | no |\n", "")},
        "lock table: Store::Stripe::mu (tiering/store/store.h) has no row"),
    "a new shared_mutex without a row": (ARCH, {"tiering/store/store.h": STORE_H.replace(
        "Mutex list_mu_;", "Mutex list_mu_;\n  mutable SharedMutex map_mu_;")},
        "lock table: Store::map_mu_ (tiering/store/store.h) has no row"),
    "a row without a mutex": (ARCH, {"docs/ARCHITECTURE.md": ARCHITECTURE.replace(
        "| `Store::mu_` | nothing", "| `Store::gone_mu_` | x | none | no |\n| `Store::mu_` | nothing")},
        "lock table: row Store::gone_mu_: no such mutex member"),
    "a std::mutex member": (ARCH, {"tiering/store/store.h": STORE_H.replace(
        "    Mutex mu;", "    std::mutex mu;")},
        "Store::Stripe::mu (tiering/store/store.h) is a std::mutex: make it a Mutex"),
    "an order the table does not state": (ARCH, {"docs/ARCHITECTURE.md": ARCHITECTURE.replace(
        "| a list | `Store::mu_` |", "| a list | none |")},
        "lock order: tiering/store/store.h takes Store::mu_ before Store::list_mu_, but the row"),
    "an order within a class the code does not state": (ARCH, {
        "tiering/store/store.h": STORE_H.replace(" ACQUIRED_BEFORE(list_mu_)", "")},
        "declare Store::mu_ ACQUIRED_BEFORE(list_mu_)"),
    "an order against no mutex": (ARCH, {"tiering/store/store.h": STORE_H.replace(
        "Mutex list_mu_;", "Mutex list_mu_ ACQUIRED_AFTER(Other::mu_);")},
        "Store::list_mu_ (tiering/store/store.h) is ordered against Other::mu_, no such mutex"),
    "a may-be-held naming no row": (ARCH, {"docs/ARCHITECTURE.md": ARCHITECTURE.replace(
        "| a list | `Store::mu_` |", "| a list | `Store::mu_`, `Store::gone_` |")},
        "row Store::list_mu_: may be held: Store::gone_ has no row"),
    "a page over 400 lines": (ARCH, {"docs/ARCHITECTURE.md": ARCHITECTURE + "\n" * 400},
                              "more than 400"),
    "a commit hash": (ARCH, {"docs/ARCHITECTURE.md": ARCHITECTURE.replace(
        "Test data:", "Since 9ecf15b, test data:")}, "a commit hash '9ecf15b'"),
}


def make_tree(root: pathlib.Path):
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    for folder in ("prefetch", "fs", "tools/tierfs"):
        (root / folder).mkdir(parents=True, exist_ok=True)


def run(script: pathlib.Path, root: pathlib.Path):
    done = subprocess.run([sys.executable, str(script), str(root)], capture_output=True,
                          text=True, timeout=60)
    return done.returncode, done.stdout + done.stderr


def main() -> int:
    failures = []
    with tempfile.TemporaryDirectory(prefix="check_docs_test.") as tmp:
        clean = pathlib.Path(tmp) / "clean"
        make_tree(clean)
        for script in (PATHS, ARCH):
            code, out = run(script, clean)
            if code != 0 or "0 problem(s)" not in out:
                failures.append(f"the clean tree, {script.name}: exit {code}, expected 0:\n{out}")
        for i, (name, (script, files, expected)) in enumerate(BREAKS.items()):
            root = pathlib.Path(tmp) / f"break{i}"
            make_tree(root)
            for rel, text in files.items():
                (root / rel).write_text(text)
            code, out = run(script, root)
            if code != 1 or expected not in out:
                failures.append(f"{name}: exit {code}, expected 1 and '{expected}':\n{out}")
    return report("check_docs_test", f"{len(BREAKS) + 2} runs", failures)


if __name__ == "__main__":
    sys.exit(main())
