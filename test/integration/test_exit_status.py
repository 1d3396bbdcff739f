"""One exit-status table: `tierfs --help`, docs/USAGE.md, the man page and
docs/OPERATIONS.md give the same statuses with the same words, and one case
of every row, run through the program, exits with the status the table
gives it. A doc that disagrees with the others, a row without a case here,
or a program that exits otherwise fails."""
import os
import re
import resource
import signal
import subprocess
import tempfile
import unittest

import harness

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


def words(text):
    """`text` without markup (markdown's backticks, roff's escapes), its
    white space collapsed."""
    text = text.replace("`", "").replace("\\-", "-").replace("\\(aq", "'")
    text = re.sub(r"\\f[BIRP]", "", text)
    return " ".join(text.split())


def help_table(text):
    """{status: words} from --help's "Exit status" lines (`  N  words`)."""
    part = text.split("Exit status, whose failure it is:\n", 1)[1]
    rows = {}
    for line in part.splitlines():
        m = re.match(r"^  (\d+)  (\S.*)$", line)
        if not m:
            break
        rows[int(m.group(1))] = words(m.group(2))
    return rows


def markdown_table(text):
    """{status: words} from the markdown table headed `| status | whose
    failure it is |`."""
    part = text.split("| status | whose failure it is |\n|---|---|\n", 1)[1]
    rows = {}
    for line in part.splitlines():
        m = re.match(r"^\| (\d+) \| (.*) \|$", line)
        if not m:
            break
        rows[int(m.group(1))] = words(m.group(2))
    return rows


def man_table(text):
    """{status: words} from the man page's EXIT STATUS section (.TP/.B N/text)."""
    part = text.split(".SH EXIT STATUS\n", 1)[1].split("\n.PP\n", 1)[0]
    rows = {}
    for item in part.split(".TP\n")[1:]:
        head, _, body = item.partition("\n")
        m = re.match(r"^\.B (\d+)$", head)
        if m:
            rows[int(m.group(1))] = words(re.sub(r"(?m)^\.[A-Z]+ ?", "", body))
    return rows


class ExitStatusTable(unittest.TestCase):
    def setUp(self):
        self.base = tempfile.mkdtemp(prefix="tierfs-exit-")
        self.src = os.path.join(self.base, "src")
        self.mnt = os.path.join(self.base, "mnt")
        os.mkdir(self.src)
        os.mkdir(self.mnt)
        harness.make_files(self.src, 10, 1000, subdirs=2)

    def tearDown(self):
        harness.tear_down([], self.base)

    def tables(self):
        r = subprocess.run([harness.tierfs_bin(), "--help"], capture_output=True, text=True,
                           timeout=30)
        self.assertEqual(r.returncode, 0)
        return {"tierfs --help": help_table(r.stdout),
                "docs/USAGE.md": markdown_table(read("docs/USAGE.md")),
                "docs/OPERATIONS.md": markdown_table(read("docs/OPERATIONS.md")),
                "docs/tierfs.1": man_table(read("docs/tierfs.1"))}

    def test_every_doc_gives_the_same_table(self):
        tables = self.tables()
        first, table = next(iter(tables.items()))
        self.assertEqual(sorted(table), list(range(7)), f"{first}: {table}")
        for where, other in tables.items():
            for status in sorted(set(table) | set(other)):
                with self.subTest(doc=where, status=status):
                    self.assertEqual(other.get(status), table.get(status),
                                     f"{where} and {first} disagree on status {status}")

    def run_mount(self, *args, limit_files=None):
        def limit():
            if limit_files:
                resource.setrlimit(resource.RLIMIT_NOFILE, (limit_files, limit_files))
        return subprocess.run([harness.tierfs_bin(), *args], capture_output=True, text=True,
                              timeout=60, preexec_fn=limit)

    def dead_mount(self):
        """A FUSE mount whose daemon was killed: its file system answers
        ENOTCONN, as a disconnected PFS mount does."""
        dead = os.path.join(self.base, "dead")
        os.mkdir(dead)
        m = harness.Mount(self.src, dead)
        m.proc.send_signal(signal.SIGKILL)
        m.proc.wait(timeout=20)
        m.log.close()
        return dead

    def test_one_case_of_every_row_exits_as_the_table_says(self):
        table = self.tables()["docs/USAGE.md"]
        missing = os.path.join(self.base, "missing")
        cases = {
            0: lambda: self.run_mount(self.src, self.mnt),
            1: lambda: self.run_mount(self.src, self.mnt, "-o", "max_open_files=150",
                                      limit_files=200),
            2: lambda: self.run_mount(self.src, self.mnt, "-o", "prefech=order"),
            3: lambda: self.run_mount(missing, self.mnt),
            4: lambda: self.run_mount(self.src, missing),
            5: lambda: self.run_mount(self.src, self.mnt, "-o", f"tier={missing}:1G"),
            6: lambda: self.run_mount(self.dead_mount(), self.mnt),
        }
        self.assertEqual(sorted(cases), sorted(table), "a row of the table has no case here")
        for status, case in sorted(cases.items()):
            with self.subTest(status=status, row=table[status]):
                r = case()
                self.assertEqual(r.returncode, status, r.stderr)
                if status == 0:
                    self.assertTrue(harness.is_mounted(self.mnt))
                    subprocess.run(["fusermount3", "-u", self.mnt], check=True, timeout=30)
                    harness.wait_for(lambda: not harness.tierfs_pids(self.mnt),
                                     what="the daemon to exit")
                else:
                    self.assertFalse(harness.is_mounted(self.mnt), r.stderr)


if __name__ == "__main__":
    harness.main()
