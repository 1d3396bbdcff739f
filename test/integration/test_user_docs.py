"""The user docs speak to users: no commit hashes, no issue numbers, no C++
class or function names of tiering/, prefetch/ and fs/, no "earlier name"
history and no internal word "lane"; every link into a doc names a heading
that exists; and the one `pip install ./tools/python` line, which works offline.

Needs no build and no mount: `--bin-dir` is accepted and ignored. Exit 0
when every doc passes, 1 with each finding printed as FILE:LINE: what."""
import argparse
import glob
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

# What a user reads: the README, the reference, the operator's guide, the man
# page and the READMEs of what the package installs.
USER_DOCS = ["README.md", "docs/USAGE.md", "docs/OPERATIONS.md", "docs/tierfs.1",
             "tools/slurm/README.md", "tools/python/README.md", "tools/systemd/README.md"]
# Its summary (what comes before its first `## ` heading) is checked like a
# user doc, except that every figure there carries the commit it was measured at.
BENCHMARKS = "docs/BENCHMARKS.md"
# Docs whose links are checked too (developer docs link into sections as well).
LINKED_DOCS = USER_DOCS + [BENCHMARKS, "docs/ARCHITECTURE.md", "docs/DECISIONS.md",
                           "docs/benchmarks/history.md"]
# Where the offline install of the Python helper is written out.
PIP_DOCS = ["README.md", "tools/python/README.md", "docs/USAGE.md"]

CODE_DIRS = ["tiering", "prefetch", "fs"]
# Names of the code that are also plain words in the docs (a heading, a
# sentence's first word, a systemd key, a unit).
ORDINARY_WORDS = {"From", "Type", "KiB", "T", "Use", "Uses", "Options", "Reading", "Queued",
                  "Serve", "Namespace", "Job", "Rendezvous", "Log", "Free", "Hold", "Key",
                  "Kind", "Mark", "State", "Result", "Entry", "Link", "Stream", "Snapshot",
                  "Tier", "Buffer", "Checked", "About", "Action", "Answer", "Role", "Phase",
                  "Pending", "Waiting", "Served", "Shard", "Family", "Route", "Unit", "Op",
                  "Loop", "Ends", "Tail", "Candidate", "Appended", "Connection", "Handler",
                  "Status"}

# A commit hash: 7 to 40 hex digits with a letter and a digit among them (an
# all-digit one is taken for a number unless its line speaks of a commit).
HASH = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")
DIGITS = re.compile(r"\b[0-9]{7,40}\b")
ISSUE = re.compile(r"(?i)\bissues?\b[\s#-]*\d+|(?<![\w&/\\])#\d+\b|\d+\s+issue\b")
HISTORY = re.compile(r"(?i)\b(earlier|former|old|previous) name\b|\bformerly\b")
INTERNAL = re.compile(r"(?i)\blanes?\b")
IDENT = re.compile(r"\b[A-Z][A-Za-z0-9_]*\b")
# `class X`, `struct X`, `enum class X`, also with an attribute (`class [[nodiscard]] Status`).
TYPE_DECL = re.compile(r"\b(?:class|struct|enum)\s+(?:\[\[[^\]]*\]\]\s*)?(?:alignas\([^)]*\)\s*)?"
                       r"([A-Z]\w*)")


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


def code_names():
    """From the headers of the library and the adapter: (classes, structs and
    enums; CamelCase functions such as `ParseJson(`; one-word functions such
    as `Recover(`), each without the ordinary words."""
    classes, camel, words = set(), set(), set()
    for d in CODE_DIRS:
        for path in glob.glob(os.path.join(ROOT, d, "**", "*.h"), recursive=True):
            with open(path, encoding="utf-8") as f:
                text = f.read()
            classes.update(TYPE_DECL.findall(text))
            camel.update(re.findall(r"\b([A-Z][a-z0-9]+[A-Z]\w*)\s*\(", text))
            words.update(re.findall(r"\b([A-Z][a-z0-9]+)\s*\(", text))
    return classes - ORDINARY_WORDS, camel - ORDINARY_WORDS, words - ORDINARY_WORDS


def benchmarks_summary():
    text = read(BENCHMARKS)
    heads = [m.start() for m in re.finditer(r"(?m)^## ", text)]
    return text[:heads[0]] if heads else text


# The peers' wire words, which an operator knows only from a counter or a
# log line quoted in backquotes: in the prose, say connection, handshake,
# admission, connection slots, peer port.
WIRE_WORDS = re.compile(r"\b(doors?|hellos?|places)\b")


def wire_words(rel, text):
    """Findings: the peers' wire words outside code spans and tables of
    fuzz targets' frames, in OPERATIONS."""
    found = []
    # Code spans blanked out, line breaks kept (a span may run over two lines).
    prose_text = re.sub(r"`[^`]*`", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    for no, (line, prose) in enumerate(zip(text.splitlines(), prose_text.splitlines()), 1):
        if line.startswith("| `peer_"):  # the fuzz targets' table names the frames
            continue
        for m in WIRE_WORDS.finditer(prose):
            found.append(f"{rel}:{no}: the wire word '{m.group(0)}' (say: connection, "
                         "handshake, admission, connection slots, peer port)")
    return found


def scan(rel, text, names, hashes=True):
    """Findings in one doc's text. A class name counts anywhere; a function's
    name anywhere if CamelCase, else only in a code span (`Recover`)."""
    classes, camel, words = names
    found = []
    commit_table = False  # inside a Markdown table with a "commit" column
    for no, line in enumerate(text.splitlines(), 1):
        where = f"{rel}:{no}"
        if not line.startswith("|"):
            commit_table = False
        elif re.search(r"(?i)\bcommit", line):
            commit_table = True
        if hashes:
            for m in HASH.finditer(line):
                found.append(f"{where}: a commit hash '{m.group(0)}'")
            if commit_table or re.search(r"(?i)\bcommit", line):
                for m in DIGITS.finditer(line):
                    found.append(f"{where}: a commit hash '{m.group(0)}'")
        for m in ISSUE.finditer(line):
            found.append(f"{where}: an issue number '{m.group(0)}'")
        for m in HISTORY.finditer(line):
            found.append(f"{where}: history of a name '{m.group(0)}'")
        for m in INTERNAL.finditer(line):
            found.append(f"{where}: the internal word '{m.group(0)}' (say: read ahead, "
                         "a reader waits, in the background)")
        for m in IDENT.finditer(line):
            if m.group(0) in classes:
                found.append(f"{where}: a class of the code '{m.group(0)}'")
            elif m.group(0) in camel:
                found.append(f"{where}: a function of the code '{m.group(0)}'")
        for span in re.findall(r"`([^`]+)`", line):
            for m in IDENT.finditer(span):
                if m.group(0) in words and m.group(0) not in classes | camel:
                    found.append(f"{where}: a function of the code '{m.group(0)}'")
    return found


def slug(heading):
    """GitHub's anchor of a Markdown heading."""
    s = heading.strip().lower().replace("`", "")
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(rel):
    seen, out = {}, set()
    in_code = False
    for line in read(rel).splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code:
            continue
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else f"{s}-{n}")
    return out


def check_links(rel):
    found = []
    if not rel.endswith(".md") or not os.path.exists(os.path.join(ROOT, rel)):
        return found
    base = os.path.dirname(rel)
    for no, line in enumerate(read(rel).splitlines(), 1):
        for m in re.finditer(r"\]\(([^)\s]+)\)", line):
            target = m.group(1)
            if re.match(r"[a-z]+:", target):
                continue  # http:, mailto:
            path, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(base, path)) if path else rel
            if not os.path.exists(os.path.join(ROOT, dest)):
                found.append(f"{rel}:{no}: a link to '{target}': no such file")
            elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                found.append(f"{rel}:{no}: a link to '{target}': {dest} has no such heading")
    return found


def pip_lines():
    """Every doc that installs the helper says the one line that works with or
    without a package index, and none still asks for Debian's build wheels
    (the package builds with the standard library alone)."""
    found = []
    for rel in PIP_DOCS:
        text = re.sub(r"\s+", " ", read(rel))
        if "pip install ./tools/python" not in text:
            found.append(f"{rel}: no `pip install ./tools/python` line")
        for g in re.findall(r"pip install (?:--[a-z-]+(?: /\S+)? )+\./tools/python", text):
            found.append(f"{rel}: `{g}`: plain `pip install ./tools/python` works offline")
    return found


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir")  # accepted for ctest's uniform command line
    parser.parse_args()
    names = code_names()
    found = []
    for rel in USER_DOCS:
        found += scan(rel, read(rel), names)
    found += scan(BENCHMARKS + " (summary)", benchmarks_summary(), names, hashes=False)
    found += wire_words("docs/OPERATIONS.md", read("docs/OPERATIONS.md"))
    for rel in LINKED_DOCS:
        found += check_links(rel)
    found += pip_lines()
    for f in found:
        print(f)
    if found:
        print(f"FAIL: {len(found)} finding(s) in the user docs")
        return 1
    print(f"OK: {', '.join(USER_DOCS)} and {BENCHMARKS}'s summary")
    return 0


if __name__ == "__main__":
    sys.exit(main())
