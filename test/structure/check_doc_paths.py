#!/usr/bin/env python3
"""Checks that the repository paths and doc sections named in docs and code comments exist.

Usage: check_doc_paths.py REPO_ROOT

Read: every Markdown file of the repository, and the comments of its code:
C++ (*.cc, *.h: // and /* */), Python (*.py: # comments and docstrings),
shell (*.bash, *.sh and the scripts whose first line runs bash or sh: #
comments) and CMake (CMakeLists.txt, *.cmake, *.in beside them: # comments).
  - A path is a word that starts with a top folder of the repository
    (cmake/, docs/, fs/, prefetch/, test/, tiering/, tools/); it may end in
    a glob (`peer_client*`, `tier.*`), and a word in capitals stands for any
    name (`test/fuzz/corpus/TARGET`). Each must match a file or a folder.
    In code comments, a C++ file named without its folder (`tier_journal.h`)
    must be in some folder.
  - A section of a doc, named in quotes right after the doc
    (`docs/ARCHITECTURE.md, "Threads"`, `USAGE.md "Peers"`), must be a
    heading of that doc, or the bold lead of one of its paragraphs, that
    starts with those words.
A path that moved, or a section renamed or dropped, fails until the comment
or the doc says where it went. Exit status 1 lists each as FILE:LINE: what.
"""
import io
import pathlib
import re
import subprocess
import sys
import tokenize

from structure_report import report, usage

TOP_FOLDERS = ("cmake", "docs", "fs", "prefetch", "test", "tiering", "tools")
PATH = re.compile(rf"(?<![\w./~$@:-])((?:{'|'.join(TOP_FOLDERS)})/[\w.*/@-]*[\w*/])")
# A C++ file named without its folder (`chunk_store.cc`): some folder holds it.
BARE = re.compile(r"(?<![\w./<-])([\w-]+\.(?:cc|h))\b")
# A word in capitals stands for any name (`test/fuzz/corpus/TARGET`, `NAME_fuzz.cc`).
PLACEHOLDER = re.compile(r"(?<![A-Za-z0-9])[A-Z][A-Z0-9]{2,}(?![a-z0-9])")
DOCS = ("ARCHITECTURE", "DECISIONS", "USAGE", "OPERATIONS", "BENCHMARKS")
SECTION = re.compile(rf"(?<![\w/])(?:docs/)?({'|'.join(DOCS)})(?:\.md)?[,:]?\s+\(?\"([^\"]+)\"")


def tracked_files(root: pathlib.Path) -> list[str]:
    """The repository's files (git's list; every file under root without git)."""
    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files"], capture_output=True,
                             text=True, check=True).stdout
        return [f for f in out.splitlines() if (root / f).is_file()]
    except (OSError, subprocess.CalledProcessError):
        return [str(p.relative_to(root)) for p in root.rglob("*")
                if p.is_file() and ".git" not in p.parts and not p.parts[len(root.parts)]
                .startswith("build")]


def kind(root: pathlib.Path, rel: str) -> str | None:
    """How the comments of `rel` are written: 'c', 'py', 'hash', 'md', or None (not read)."""
    name = pathlib.PurePath(rel).name
    if name.endswith((".cc", ".h")):
        return "c"
    if name.endswith(".py"):
        return "py"
    if name.endswith(".md"):
        return "md"
    if name.endswith((".bash", ".sh", ".cmake")) or name in ("CMakeLists.txt",):
        return "hash"
    if name.endswith(".in") or "." not in name:
        try:
            first = (root / rel).open(encoding="utf-8").readline()
        except (UnicodeDecodeError, OSError):
            return None
        if re.match(r"#!.*\b(ba)?sh\b", first) or name.endswith(".in"):
            return "hash"
    return None


def c_comments(text: str) -> list[tuple[int, str]]:
    """(line, text) of each comment of C++ source; string literals skipped."""
    out = []
    pattern = re.compile(r'//[^\n]*|/\*.*?\*/|R"(\w*)\(.*?\)\1"|"(?:\\.|[^"\\\n])*"'
                         r"|'(?:\\.|[^'\\\n])*'", re.S)
    for m in pattern.finditer(text):
        if m.group(0).startswith(("//", "/*")):
            out.append((text.count("\n", 0, m.start()) + 1, m.group(0)))
    return out


def py_comments(text: str) -> list[tuple[int, str]]:
    """(line, text) of each comment and docstring of Python source."""
    out = []
    previous = tokenize.NEWLINE
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                out.append((tok.start[0], tok.string))
            elif tok.type == tokenize.STRING and previous in (tokenize.NEWLINE, tokenize.INDENT,
                                                              tokenize.DEDENT, tokenize.NL):
                out.append((tok.start[0], tok.string))  # a string alone: a docstring
            if tok.type not in (tokenize.COMMENT, tokenize.NL):
                previous = tok.type
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return out


def hash_comments(text: str) -> list[tuple[int, str]]:
    """(line, text) of each # comment of a shell or CMake file."""
    out = []
    for no, line in enumerate(text.splitlines(), 1):
        m = re.search(r"(?:^|\s)(#(?![!{]).*)$", line)
        if m and not re.match(r"#\s*(?:include|define)\b", m.group(1)):
            out.append((no, m.group(1)))
    return out


def runs(comments: list[tuple[int, str]]) -> list[list[tuple[int, str]]]:
    """Comments on consecutive lines as one run of (line, text) with the comment markers
    taken out (a section's name may wrap onto the next line)."""
    out: list[list[tuple[int, str]]] = []
    last = -2
    for no, text in comments:
        lines = [(no + i, re.sub(r"^\s*(?://+|/\*+|\*+/?|#+)\s?", "", line))
                 for i, line in enumerate(text.splitlines() or [""])]
        if out and no == last + 1:
            out[-1] += lines
        else:
            out.append(lines)
        last = lines[-1][0]
    return out


def headings(root: pathlib.Path, doc: str) -> list[str]:
    """The headings and bold paragraph leads of docs/DOC.md, lower case."""
    path = root / "docs" / f"{doc}.md"
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    found = [h.strip().lower() for h in re.findall(r"(?m)^#{1,6}\s+(.*)$", text)]
    found += [b.strip().lower() for b in re.findall(r"\*\*([^*]+)\*\*", text)]
    return [h.replace("`", "") for h in found]


def problems_in(root: pathlib.Path, rel: str, chunks: list[list[tuple[int, str]]]) -> list[str]:
    problems = []
    for run in chunks:
        for line, text in run:
            for m in PATH.finditer(text):
                path = PLACEHOLDER.sub("*", m.group(1).rstrip("/"))
                if not any(root.glob(path)):
                    problems.append(f"{rel}:{line}: no file or folder '{m.group(1)}'")
            for m in BARE.finditer(text):
                if rel.endswith(".md") or PLACEHOLDER.search(m.group(1)):
                    continue
                if not any(root.glob(f"**/{m.group(1)}")):
                    problems.append(f"{rel}:{line}: no file '{m.group(1)}' in any folder")
        starts, flat = [], ""
        for line, text in run:
            starts.append((len(flat), line))
            flat += " ".join(text.split()) + " "
        for m in SECTION.finditer(flat):
            doc, title = m.group(1), m.group(2).strip().lower().replace("`", "")
            if not any(h.startswith(title) for h in headings(root, doc)):
                line = max(n for off, n in starts if off <= m.start())
                problems.append(f"{rel}:{line}: docs/{doc}.md has no section '{m.group(2)}'")
    return problems


def check(root: pathlib.Path) -> tuple[int, list[str]]:
    """(files read, problems)."""
    problems = []
    read = 0
    for rel in tracked_files(root):
        how = kind(root, rel)
        if how is None:
            continue
        try:
            text = (root / rel).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        read += 1
        if how == "md":
            # Each paragraph whole; a fenced block's lines count too (commands name files).
            chunks = runs([(no, line) for no, line in enumerate(text.splitlines(), 1)])
        elif how == "c":
            chunks = runs(c_comments(text))
        elif how == "py":
            chunks = runs(py_comments(text))
        else:
            chunks = runs(hash_comments(text))
        problems += problems_in(root, rel, chunks)
    return read, problems


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        return usage(__doc__)
    read, problems = check(pathlib.Path(argv[1]))
    return report("check_doc_paths", f"{read} files", problems)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
