#!/usr/bin/env python3
"""Checks that docs/ARCHITECTURE.md names the code as it is, where a script can.

Usage: check_architecture.py REPO_ROOT

  - The lock table ("Concurrency and lock order") has one row per mutex
    member of the daemon's code (tiering/, prefetch/, fs/, and the tierfs
    command's own in tools/tierfs/): every Mutex or SharedMutex
    (tiering/base/mutex.h; a std:: mutex too) a class or struct declares
    (alone, as an array, or a std::array of them) is a row, named
    Class::member (Outer::Inner::member for a nested struct), and every row
    names one that exists. A renamed, added or removed mutex fails until the
    table says so.
  - No mutex member is a std:: one: each is a Mutex or SharedMutex, whose
    GUARDED_BY fields tools/check-thread-safety checks.
  - The lock order the code states agrees with the table's "may be held when
    it is taken" column: a mutex declared ACQUIRED_BEFORE(y) (or y declared
    ACQUIRED_AFTER(it)) is listed in y's row, and a row listing a mutex of
    its own class has that annotation (clang checks an order only between
    locks one function takes, so an order across classes stays in the table).
    Every mutex the column names has a row.
  - "Folders and libraries": every tierfs_* library it names is made by an
    add_library of a CMakeLists.txt, every library of tiering/, prefetch/
    and fs/ is named there, and every folder its diagram names exists.
  - The component table (unit | file | role): each file entry names at least
    one existing file (globs allowed; a bare name is in the folder of the
    entry before it), and each `Identifier` of its unit column appears in one
    of those files.
  - The page stays a newcomer's: at most 400 lines, and no commit hash
    (history and measurements go to docs/DECISIONS.md).
Exit status 1 lists every mismatch.
"""
import pathlib
import re
import sys

from structure_report import report, usage

CODE_DIRS = ("tiering", "prefetch", "fs", "tools/tierfs")
MUTEX_TYPE = (r"(?:std::(?:shared_|recursive_|timed_|recursive_timed_)?mutex"
              r"|(?:tierfs::)?(?:Shared)?Mutex)")
ORDER = r"(?:ACQUIRED_(?:BEFORE|AFTER)\([^()]*\)\s*)*"
MUTEX_MEMBER = re.compile(
    rf"^(?:(?:mutable|static|inline)\s+)*({MUTEX_TYPE}|std::array<\s*{MUTEX_TYPE}\s*,[^<>]*>)"
    rf"\s+(\w+)\s*(?:\[[^\]]*\])?\s*({ORDER})(?:\{{\s*\}})?$")
ORDER_ANNOTATION = re.compile(r"ACQUIRED_(BEFORE|AFTER)\(([^()]*)\)")
CLASS_HEAD = re.compile(r"\b(?:class|struct|union)\s+(?:\[\[[^\]]*\]\]\s*)?(\w+(?:::\w+)*)"
                        r"(?:\s+final)?\s*(?::[^;{}()]*)?$")


def strip_comments_and_strings(text: str) -> str:
    """The code with comments, string and character literals blanked."""
    pattern = re.compile(r'//[^\n]*|/\*.*?\*/|R"(\w*)\(.*?\)\1"|"(?:\\.|[^"\\\n])*"'
                         r"|'(?:\\.|[^'\\\n])*'", re.S)
    return pattern.sub(lambda m: " " if m.group(0)[0] in "/R" else '""', text)


def mutex_members(path: pathlib.Path) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """Class::member for each mutex member declared in `path`, its type, and
    its order annotations as (held, taken) pairs of qualified names."""
    code = strip_comments_and_strings(path.read_text())
    code = re.sub(r"^\s*#.*$", "", code, flags=re.M)  # preprocessor lines
    scopes: list[str | None] = []  # a class's name, or None for any other brace
    found = []
    start = 0
    for i, ch in enumerate(code):
        if ch not in "{};":
            continue
        statement = " ".join(code[start:i].split())
        statement = re.sub(r"^(?:(?:public|private|protected)\s*:\s*)+", "", statement)
        start = i + 1
        if ch == "{":
            head = CLASS_HEAD.search(statement)
            is_class = head and not statement.startswith(("enum", "namespace"))
            scopes.append(head.group(1) if is_class else None)
        elif ch == "}":
            if scopes:
                scopes.pop()
        elif scopes and scopes[-1] is not None:
            member = MUTEX_MEMBER.match(statement)
            if member:
                scope = "::".join(s for s in scopes if s is not None)
                name = f"{scope}::{member.group(2)}"
                order = []
                for direction, others in ORDER_ANNOTATION.findall(member.group(3)):
                    for other in (o.strip() for o in others.split(",")):
                        other = other if "::" in other else f"{scope}::{other}"
                        order.append((name, other) if direction == "BEFORE" else (other, name))
                found.append((name, member.group(1), order))
    return found


def code_mutexes(root: pathlib.Path) -> dict[str, tuple[str, str, list[tuple[str, str]]]]:
    """Qualified mutex member -> the file that declares it, its type, its order annotations."""
    result = {}
    for folder in CODE_DIRS:
        for path in sorted((root / folder).rglob("*")):
            if path.suffix in (".h", ".cc"):
                for name, kind, order in mutex_members(path):
                    result[name] = (str(path.relative_to(root)), kind, order)
    return result


def section(doc: str, title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", doc, re.M | re.S)
    if not match:
        raise SystemExit(f"check_architecture: no section '## {title}' in docs/ARCHITECTURE.md")
    return match.group(1)


def table_rows(text: str, header: str) -> list[list[str]]:
    """The cells of each row of the table whose header row starts with `header`."""
    lines = text.splitlines()
    for n, line in enumerate(lines):
        if line.startswith(header):
            rows = []
            for row in lines[n + 2:]:
                if not row.startswith("|"):
                    break
                rows.append([c.strip() for c in row.strip().strip("|").split("|")])
            return rows
    raise SystemExit(f"check_architecture: no table '{header}' in docs/ARCHITECTURE.md")


def check_locks(root: pathlib.Path, doc: str) -> list[str]:
    rows = table_rows(section(doc, "Concurrency and lock order"), "| mutex |")
    documented = {}  # row -> the mutexes it says may be held when it is taken
    problems = []
    for cells in rows:
        name = re.match(r"`([\w:]+)`", cells[0])
        if not name:
            problems.append(f"lock table: a row names no `Class::member`: {cells[0]}")
            continue
        documented[name.group(1)] = set(re.findall(r"`([\w:]+)`", cells[2] if len(cells) > 2 else ""))
    code = code_mutexes(root)
    for name, (path, kind, _) in sorted(code.items()):
        if name not in documented:
            problems.append(f"lock table: {name} ({path}) has no row")
        if re.search(r"std::\w*mutex", kind):
            problems.append(f"{name} ({path}) is a {kind}: make it a Mutex or SharedMutex "
                            "(tiering/base/mutex.h) so clang checks what it guards")
    for name in sorted(documented):
        if name not in code:
            problems.append(f"lock table: row {name}: no such mutex member in {', '.join(CODE_DIRS)}")
    return problems + check_order(code, documented)


def check_order(code: dict, documented: dict[str, set[str]]) -> list[str]:
    """The code's ACQUIRED_BEFORE/AFTER against the table's "may be held" column."""
    problems = []
    annotated = set()
    for name, (path, _, order) in sorted(code.items()):
        for held, taken in order:
            annotated.add((held, taken))
            other = taken if held == name else held
            if other not in code:
                problems.append(f"lock order: {name} ({path}) is ordered against {other}, "
                                "no such mutex member")
            elif taken in documented and held not in documented[taken]:
                problems.append(f"lock order: {path} takes {held} before {taken}, but the row of "
                                f"{taken} does not list it as may be held")
    for taken, held_set in sorted(documented.items()):
        for held in sorted(held_set):
            if held not in documented:
                problems.append(f"lock table: row {taken}: may be held: {held} has no row")
            elif (held, taken) not in annotated and held.rsplit("::", 1)[0] == taken.rsplit(
                    "::", 1)[0] and taken in code:
                problems.append(f"lock order: the row of {taken} lists {held} ({code[taken][0]}, "
                                f"one class): declare {held} ACQUIRED_BEFORE({taken.rsplit('::')[-1]})"
                                " so clang checks it")
    return problems


def defined_libraries(root: pathlib.Path) -> dict[str, str]:
    libraries = {}
    for cmake in root.rglob("CMakeLists.txt"):
        rel = cmake.relative_to(root)
        if rel.parts[0] in ("build", ".git") or rel.parts[0].startswith("build-"):
            continue
        for name in re.findall(r"add_library\(\s*(\w+)", cmake.read_text()):
            libraries[name] = str(rel.parent)
    return libraries


def check_libraries(root: pathlib.Path, doc: str) -> list[str]:
    text = section(doc, "Folders and libraries")
    problems = []
    libraries = defined_libraries(root)
    named = set(re.findall(r"\b(tierfs_\w+)", text))
    for name in sorted(named - set(libraries)):
        problems.append(f"Folders and libraries: {name} is made by no add_library")
    for name, folder in sorted(libraries.items()):
        if folder.split("/")[0] in CODE_DIRS and name not in named:
            problems.append(f"Folders and libraries: {name} ({folder}/CMakeLists.txt) is not named")
    diagram = re.search(r"```\n(.*?)```", text, re.S)
    for folder in re.findall(r"(?<![\w/])((?:tiering|prefetch|fs)(?:/\w+)*)/", diagram.group(1)):
        if not (root / folder).is_dir():
            problems.append(f"Folders and libraries: folder {folder}/ does not exist")
    return problems


def check_components(root: pathlib.Path, doc: str) -> list[str]:
    problems = []
    for cells in table_rows(section(doc, "Folders and libraries"), "| unit |"):
        unit, files = cells[0], cells[1]
        paths: list[pathlib.Path] = []
        folder = ""
        for entry in (e.strip() for e in files.split(",")):
            entry = re.sub(r"\s*\(.*\)$", "", entry).strip("`")
            if "/" in entry:
                folder = entry.rsplit("/", 1)[0]
            else:
                entry = f"{folder}/{entry}"
            matched = sorted(p for p in root.glob(entry) if p.is_file())
            if not matched:
                problems.append(f"component {unit}: no file {entry}")
            paths += matched
        text = "".join(p.read_text() for p in paths)
        for ident in re.findall(r"`(\w+)(?:<\w+>)?`", unit):
            if paths and not re.search(rf"\b{ident}\b", text):
                problems.append(f"component {unit}: {ident} is not in {files}")
    return problems


MAX_LINES = 400
COMMIT_HASH = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")


def check_size(doc: str) -> list[str]:
    problems = []
    lines = doc.splitlines()
    if len(lines) > MAX_LINES:
        problems.append(f"{len(lines)} lines, more than {MAX_LINES}: history and measurements "
                        "go to docs/DECISIONS.md")
    for no, line in enumerate(lines, 1):
        for m in COMMIT_HASH.finditer(line):
            problems.append(f"line {no}: a commit hash '{m.group(0)}' (docs/DECISIONS.md keeps them)")
    return problems


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        return usage(__doc__)
    root = pathlib.Path(argv[1])
    doc = (root / "docs" / "ARCHITECTURE.md").read_text()
    problems = (check_locks(root, doc) + check_libraries(root, doc) + check_components(root, doc) +
                check_size(doc))
    return report("check_architecture", f"{len(code_mutexes(root))} mutexes", problems)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
