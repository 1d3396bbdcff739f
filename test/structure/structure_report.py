"""What the structure checks share: the usage line and the report."""
import sys


def usage(doc: str) -> int:
    """Prints the 'Usage:' line of a check's docstring; the exit status for bad arguments."""
    print(next(line for line in doc.splitlines() if line.startswith("Usage:")), file=sys.stderr)
    return 2


def report(check: str, checked: str, problems: list[str]) -> int:
    """Prints each problem and a summary line; the exit status (1 if any problem)."""
    for p in problems:
        print(p)
    print(f"{check}: {checked}, {len(problems)} problem(s)")
    return 1 if problems else 0
