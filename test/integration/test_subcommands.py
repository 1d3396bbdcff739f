"""`tierfs stat`, `tierfs hint` and `tierfs stage` against real mounts, and
their errors for what is not a tierfs mount or a bad command line."""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import unittest

import harness

MiB = 1 << 20


def read_pieces(reads):
    """Every read piece served, wherever from (the "reads" group): the hit
    ratio's one denominator, as tierfs stat, stat --watch and the Grafana
    panel compute it."""
    return sum(reads[k] for k in ("from_tiers", "after_promotion", "early", "from_copy", "from_source",
                                  "from_peers"))


class SubcommandTest(unittest.TestCase):
    def setUp(self):
        self._work = harness.workdir()
        self.src, self.mnt = self._work.__enter__()
        self.addCleanup(self._work.__exit__, None, None, None)
        self.files = harness.make_files(self.src, 40, 10_000)
        self.total = sum(map(len, self.files.values()))

    def tierfs(self, *args, input=None, cwd=None):
        return subprocess.run([harness.tierfs_bin(), *args], input=input, capture_output=True,
                              text=True, timeout=30, cwd=cwd)

    # ---- stat ----

    def test_stat_summarises_the_counters(self):
        with harness.Mount(self.src, self.mnt, ["ram=16M"]) as m:
            for rel in list(self.files)[:10]:
                harness.read_file(os.path.join(self.mnt, rel))
            out = self.tierfs("stat", self.mnt)
            self.assertEqual(out.returncode, 0, out.stderr)
            s = m.stats()
            used = sum(len(self.files[r]) for r in list(self.files)[:10])
            text = out.stdout
            self.assertIn(f"tierfs {s['version']} at {self.mnt}", text)
            self.assertIn("namespace   40 files, 5 directories", text)
            self.assertRegex(text, r"tiers +RAM: [0-9.]+ KiB of 16\.0 MiB used")
            self.assertIn(f"SOURCE      {used / 1024:.1f} KiB read in", text)
            self.assertIn("promotions  10 chunks copied into the tiers", text)
            self.assertIn("waiting for a thread: 0 for reads, 0 to read ahead, 0 in the background",
                          text)
            self.assertIn("0 refused (queue full), 0 fit in no tier, 0 evicted; "
                          "10 of 40 files fully resident", text)
            self.assertIn("prefetch    mode on-access: a file is copied into the tiers when it is "
                          "first read", text)
            # A tier's hits are the pieces read from its finished copies; those
            # read from a copy still being made from SOURCE (reads.early) are
            # SOURCE's bytes and shown apart (counted as hits, a cold epoch
            # showed "hit ratio 100%").
            r = s["reads"]
            hits = sum(t["hits"] for t in s["tiers"])
            pieces = read_pieces(r)
            self.assertEqual(hits, r["from_tiers"], r)
            shown = re.search(r"(\d+) hits \(([0-9.]+)% of reads\)", text)
            self.assertIsNotNone(shown, text)
            self.assertEqual(int(shown.group(1)), hits)
            self.assertAlmostEqual(float(shown.group(2)), 100 * hits / pieces, delta=0.05)
            self.assertIn(f"reads       {pieces} parts of reads served", text)
            self.assertIn(f"\n            {hits} (0.0%) from a tier, resident when asked (hits)\n",
                          text)
            self.assertIn(f"            {r['early']} (", text)
            # Each of these reads was the file's first: each came from SOURCE,
            # through the promotion its miss started, so none is a hit (they
            # were counted as hits: "hit ratio 100%" on a cold epoch).
            self.assertEqual(hits, 0, r)
            self.assertGreaterEqual(r["after_promotion"] + r["early"], 10, r)
            self.assertIn(f"            {r['after_promotion']} (100.0%) from a tier once their miss "
                          "was promoted\n", text)

    def test_hit_ratio_counts_the_reads_served_from_their_readers_copy(self):
        # A directory tier: a cold read of a small file is served from the
        # copy its reader has just made from SOURCE, while the tier commits it
        # (reads.from_copy): SOURCE's bytes, not a hit. stat and stat --watch
        # left those pieces out of the ratio: 100% hits on an epoch whose
        # first reads all came from SOURCE.
        tier = os.path.join(os.path.dirname(self.src), "nvme")
        os.mkdir(tier)
        # passthrough=off: warm reads must reach the daemon (a root daemon
        # would let the kernel read files wholly in the tier itself).
        with harness.Mount(self.src, self.mnt, [f"tier={tier}:16M", "passthrough=off"]) as m:
            names = sorted(self.files)[:10]
            before = m.stats()["reads"]
            watch = subprocess.Popen([harness.tierfs_bin(), "stat", self.mnt, "--watch", "5",
                                      "--count", "1"], stdout=subprocess.PIPE, text=True)
            time.sleep(1)  # its first sample is taken
            for rel in names:  # cold: each from its reader's copy
                harness.read_file(os.path.join(self.mnt, rel))
            harness.wait_for(lambda: m.stats()["promotions"]["files_resident"] == len(names),
                             what="the copies committed")
            for rel in names[:4]:  # warm: hits
                harness.read_file(os.path.join(self.mnt, rel))
            watched, _ = watch.communicate(timeout=30)
            self.assertEqual(watch.returncode, 0)
            s = m.stats()
            r = s["reads"]
            hits, pieces = r["from_tiers"], read_pieces(r)
            new_hits, new_pieces = hits - before["from_tiers"], pieces - read_pieces(before)
            self.assertGreaterEqual(r["from_copy"] - before["from_copy"], len(names), r)
            self.assertGreaterEqual(new_hits, 4, r)
            # The watch saw this traffic and nothing else: its ratio is these counts'.
            shown = re.search(r"hit ratio ([0-9.]+)%", watched)
            self.assertIsNotNone(shown, watched)
            self.assertAlmostEqual(float(shown.group(1)), 100 * new_hits / new_pieces, delta=0.05)
            self.assertLess(float(shown.group(1)), 50, watched)
            # Its tiers are named as tierfs stat names them: here, by the tier's path.
            self.assertIn(f"tiers {os.path.realpath(tier)} ", watched)
            text = self.tierfs("stat", self.mnt).stdout
            shown = re.search(r"(\d+) hits \(([0-9.]+)% of reads\)", text)
            self.assertIsNotNone(shown, text)
            self.assertEqual(int(shown.group(1)), hits)
            self.assertAlmostEqual(float(shown.group(2)), 100 * hits / pieces, delta=0.05)
            self.assertLess(float(shown.group(2)), 50, text)
            self.assertIn(f"{r['from_copy']} ({100 * r['from_copy'] / pieces:.1f}%) from the copy "
                          "their reader had just made from SOURCE", text)

    def test_stat_says_what_each_figure_is(self):
        # No bare figures ("queued 0+0") and no raw keys ("source_latency_ms
        # 140.03527659574468"): each number is named in words.
        with harness.Mount(self.src, self.mnt, ["ram=16M", "prefetch=order"]):
            self.tierfs("hint", self.mnt, "-", input="d1/f00001\nno/such\n")
            self.tierfs("stage", self.mnt, "d2", "--quiet")
            text = self.tierfs("stat", self.mnt).stdout
            self.assertNotRegex(text, r"\d\+\d")
            self.assertNotRegex(text, r"[a-z]+_[a-z_]+ \d")  # a JSON key and its value
            self.assertNotRegex(text, r"\d\.\d{3,}")  # rounded for people
            self.assertIn("readers past 0 of 1 declared file (0.0%)\n", text)
            self.assertRegex(text, r"read ahead: up to \d+ files, \d+ resident ahead of the "
                                   r"readers")
            self.assertIn("hints: 1 path accepted, 1 line rejected (last: 'no/such': not in the "
                          "mount", text)
            self.assertRegex(text, r"stage     10 of 10 files asked for are resident \(\S+ \S+ of "
                                   r"\S+ \S+\)\n +0 tried and not resident, 0 queued; 0 paths rejected")
            self.assertRegex(text, r"autotune  \d+ SOURCE reads at once \(tuned\), read-ahead "
                                   r"window tuned\n +SOURCE latency [0-9.]+ ms \(best [0-9.]+ ms\)")

    def test_stat_json_is_the_raw_stats(self):
        with harness.Mount(self.src, self.mnt) as m:
            out = self.tierfs("stat", "--json", self.mnt)
            self.assertEqual(out.returncode, 0, out.stderr)
            stats = json.loads(out.stdout)
            self.assertEqual(set(stats), set(m.stats()))
            self.assertEqual(stats["namespace"]["files"], 40)
            out = self.tierfs("stat", self.mnt)
            self.assertIn("tiers       none", out.stdout)

    def test_stat_reads_right_for_a_newcomer(self):
        # Lines of at most 100 characters (the reads line was 250), tiers by
        # where they are, the page cache said to be unseen, hint lines and
        # declared files told apart ("hint lines accepted 1,203" beside
        # "1,200 declared files": 3 were directives).
        tier = os.path.join(os.path.dirname(self.src), "nvme")
        os.mkdir(tier)
        names = sorted(self.files)
        with harness.Mount(self.src, self.mnt, ["ram=16M", f"tier={tier}:16M",
                                                 "prefetch=order"]):
            order = "//stream a\n//epoch\n" + "".join(r + "\n" for r in names) + "//epoch\n"
            self.assertEqual(self.tierfs("hint", self.mnt, "-", input=order).returncode, 0)
            for rel in names[:5]:
                harness.read_file(os.path.join(self.mnt, rel))
            text = self.tierfs("stat", self.mnt).stdout
        long = [line for line in text.splitlines() if len(line) > 100]
        self.assertEqual(long, [], text)
        self.assertRegex(text, r"\ntiers       RAM: .* of 16\.0 MiB used")
        self.assertIn(f"\n            {tier}: ", text)
        self.assertNotIn("dir0", text)
        self.assertIn("page cache  not seen: reads the kernel serves from its page cache never "
                      "reach tierfs,\n", text)
        self.assertIn("of 40 declared files", text)
        self.assertIn("hints: 40 paths and 3 directives accepted, 0 lines rejected", text)

    def test_stat_of_a_mirror_shows_no_prefetching(self):
        # A mount without tiers promotes nothing: no promotion, prefetch,
        # order, stage or autotune lines, no tier hits.
        with harness.Mount(self.src, self.mnt):
            for rel in sorted(self.files)[:3]:
                harness.read_file(os.path.join(self.mnt, rel))
            text = self.tierfs("stat", self.mnt).stdout
        for word in ("promotions", "prefetch", "order", "stage", "autotune", "hits",
                     "waited for a promotion"):
            self.assertNotIn(word, text)
        self.assertIn("tiers       none: a mirror only", text)
        self.assertIn("            3 (100.0%) directly from SOURCE", text)
        self.assertIn("page cache  not seen", text)

    def test_stat_in_on_access_mode_says_a_declared_order_is_not_followed(self):
        with harness.Mount(self.src, self.mnt, ["ram=16M"]):
            text = self.tierfs("stat", self.mnt).stdout
            self.assertNotIn("order", text)  # nothing declared: nothing to say
            self.assertNotIn("stage", text)
            self.assertNotIn("read-ahead window", text)
            self.tierfs("hint", self.mnt, "-", input="d1/f00001\n")
            text = self.tierfs("stat", self.mnt).stdout
        self.assertIn("  order     1 declared file, not followed in mode on-access; to follow "
                      "them: echo order >", text)
        self.assertNotIn("readers past", text)

    def test_stat_watch_prints_rates_until_counted_or_interrupted(self):
        # The reads must reach the daemon to show in its rates: with
        # passthrough (a root daemon) the kernel reads prefetched files itself.
        with harness.Mount(self.src, self.mnt,
                           ["ram=16M", "prefetch=order", "passthrough=off"]) as m:
            with open(os.path.join(self.mnt, ".tierfs", "order"), "w") as f:
                f.write("//epoch\n" + "".join(r + "\n" for r in sorted(self.files)))
            proc = subprocess.Popen([harness.tierfs_bin(), "stat", self.mnt, "--watch", "0.3",
                                     "--count", "3"], stdout=subprocess.PIPE, text=True)
            time.sleep(0.4)  # its first sample is taken
            for rel in sorted(self.files):  # traffic while it watches
                harness.read_file(os.path.join(self.mnt, rel))
                time.sleep(0.01)
            out, _ = proc.communicate(timeout=20)
            self.assertEqual(proc.returncode, 0)
            # Not a terminal: each interval's lines, the first unindented.
            lines = [l for l in out.splitlines() if not l.startswith("  ")]
            self.assertEqual(len(lines), 3, out)
            for line in lines:
                self.assertRegex(line, r"^reads [0-9]+/s \(.*/s\), hit ratio .*, SOURCE .*/s")
            for said in ("  tiers RAM ", "  promotions ",
                         # this process wrote the order and runs: its pid names the stream
                         f"  look-ahead lead (files resident ahead of the readers): pid "
                         f"{os.getpid()} "):
                self.assertEqual(out.count(said), 3, out)
            self.assertTrue(any(not l.startswith("reads 0/s") for l in lines), out)
            # Without --count it runs until Ctrl-C, and then exits 0 at once.
            proc = subprocess.Popen([harness.tierfs_bin(), "stat", self.mnt, "--watch"],
                                    stdout=subprocess.PIPE, text=True)
            time.sleep(1.5)
            proc.send_signal(signal.SIGINT)
            t0 = time.monotonic()
            out, _ = proc.communicate(timeout=10)
            self.assertLess(time.monotonic() - t0, 2)
            self.assertEqual(proc.returncode, 0)
            self.assertGreaterEqual(len(out.splitlines()), 1)
            self.assertTrue(m.alive())
        for bad in (["--watch", "0"], ["--watch", "1", "--json"], ["--count", "3"],
                    ["--watch", "--count", "0"]):
            r = self.tierfs("stat", self.mnt, *bad)
            self.assertEqual(r.returncode, 2, (bad, r.stderr))

    # ---- hint ----

    def test_hint_reports_accepted_and_rejected_lines(self):
        with harness.Mount(self.src, self.mnt, ["ram=16M", "prefetch=order"]) as m:
            names = sorted(self.files)[:3]
            listing = os.path.join(os.path.dirname(self.src), "order.txt")
            with open(listing, "w") as f:
                f.write("\n".join(names + ["no/such/file", "../escape"]))  # no final newline
            out = self.tierfs("hint", self.mnt, listing)
            self.assertEqual(out.returncode, 1, out.stderr)  # not every line accepted
            self.assertIn("accepted 3 of 5 paths, rejected 2", out.stdout)
            order = m.stats()["prefetch"]["order"]
            self.assertEqual((order["valid_lines"], order["rejected_lines"]), (3, 2))

            absolute = "".join(os.path.join(self.mnt, n) + "\n" for n in names)
            out = self.tierfs("hint", self.mnt, "-", input=absolute)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertIn("accepted 3 of 3 paths, rejected 0", out.stdout)
            self.assertEqual(m.stats()["prefetch"]["order"]["valid_lines"], 6)

            # As `find MOUNT -type f` prints them: relative to the current
            # directory, the mount's name first (0 of 5 were accepted).
            parent = os.path.dirname(self.mnt)
            found = "".join(os.path.join(os.path.basename(self.mnt), n) + "\n" for n in names)
            out = self.tierfs("hint", self.mnt, "-", input=found, cwd=parent)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertIn("accepted 3 of 3 paths, rejected 0", out.stdout)
            self.assertEqual(m.stats()["prefetch"]["order"]["valid_lines"], 9)

    def test_hint_counts_its_own_lines_while_another_writer_declares(self):
        # The daemon's counts are everyone's: lines another process declared
        # on the same mount while tierfs hint wrote made "accepted 603 of 600".
        with harness.Mount(self.src, self.mnt, ["ram=16M", "prefetch=order"]) as m:
            names = sorted(self.files)
            order = os.path.join(self.mnt, ".tierfs", "order")
            theirs = "".join(n + "\n" for n in names[:20]) + "not/in/the/mount\n"
            stop = threading.Event()

            def other_writer():
                while not stop.is_set():
                    try:
                        with open(order, "w") as f:
                            f.write(theirs)
                    except OSError:  # EINVAL: their line that is not in the mount
                        pass
            writer = threading.Thread(target=other_writer)
            writer.start()
            try:
                runs = []
                for _ in range(10):
                    before = m.stats()["prefetch"]["order"]["valid_lines"]
                    out = self.tierfs("hint", self.mnt, "-",
                                      input="".join(n + "\n" for n in names[-3:]) + "no/such\n")
                    runs.append((out, m.stats()["prefetch"]["order"]["valid_lines"] - before))
            finally:
                stop.set()
                writer.join()
            for out, grew in runs:
                said = re.search(r"accepted (\d+) of (\d+) paths, rejected (\d+);", out.stdout)
                self.assertIsNotNone(said, out.stdout)
                accepted, sent, rejected = map(int, said.groups())
                # Its status follows what it says (the other writer's lines blur
                # which were its own; the count never claims more than it sent).
                self.assertEqual(out.returncode, 1 if rejected else 0, out.stdout + out.stderr)
                self.assertEqual(sent, 4, out.stdout)
                self.assertLessEqual(accepted, sent, out.stdout)
                self.assertLessEqual(accepted + rejected, sent, out.stdout)
            # The other writer's lines were counted meanwhile (else this proves nothing).
            self.assertTrue(any(grew > 3 for _, grew in runs), [g for _, g in runs])

    def test_hint_says_which_line_was_rejected_and_why(self):
        with harness.Mount(self.src, self.mnt, ["ram=16M", "prefetch=order"]) as m:
            names = sorted(self.files)[:2]
            out = self.tierfs("hint", self.mnt, "-",
                              input="\n".join([names[0], "no/such/file", "../escape", names[1]]))
            # Some rejected: the others are kept, and the status says not all were.
            self.assertEqual(out.returncode, 1, out.stderr)
            self.assertIn("accepted 2 of 4 paths", out.stdout)
            self.assertIn("tierfs hint: rejected 2 of 4 lines; first: 'no/such/file': not in the "
                          "mount (paths are relative to its root)", out.stderr)
            order = m.stats()["prefetch"]["order"]
            self.assertEqual(order["last_rejected"], {
                "line": "no/such/file", "reason": "not in the mount (paths are relative to its root)"})

            # The Python helper returns what the daemon accepted, not what it
            # wrote, and warns with the first rejected path.
            helper = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                  "tools", "python")
            code = ("import sys, warnings, tierfs_hint\n"
                    "warnings.simplefilter('always')\n"
                    "print(tierfs_hint.hint(sys.argv[1], sys.argv[2:]))\n")
            py = subprocess.run(["/usr/bin/python3", "-c", code, self.mnt, names[0],
                                 "no/such/file", names[1]], capture_output=True, text=True,
                                timeout=30, cwd=self.mnt,
                                env=dict(os.environ, PYTHONPATH=os.path.normpath(helper)))
            self.assertEqual(py.stdout.strip(), "2", py.stderr)
            self.assertIn("rejected 1 of 3 paths; first: 'no/such/file'", py.stderr)

            # Nothing accepted: the reason, and a failure.
            out = self.tierfs("hint", self.mnt, "-", input="d1\n" + names[0] + "/x\n")
            self.assertEqual(out.returncode, 1)
            self.assertIn("rejected 2 of 2 lines; first: 'd1': a directory (name its files)",
                          out.stderr)
            self.assertIn("no valid path", out.stderr)

            # Written directly: EINVAL, and the stats tell why, the line made
            # printable and bounded.
            with self.assertRaises(OSError):
                with open(os.path.join(self.mnt, ".tierfs", "order"), "ab") as f:
                    f.write(b"\x1b[2J" + b"y" * 300 + b"\n")
            shown = m.stats()["prefetch"]["order"]["last_rejected"]
            self.assertEqual(shown["line"], "\\x1b[2J" + "y" * 196 + "...")
            self.assertIn("not in the mount", shown["reason"])

            # The Python helper's warning names it too: a file made on SOURCE
            # after the mount is not in its snapshot.
            with open(os.path.join(self.src, "late.jpg"), "w") as f:
                f.write("x")
            helper = ("import sys, warnings; sys.path.insert(0, sys.argv[1]); import tierfs_hint\n"
                      "with warnings.catch_warnings(record=True) as w:\n"
                      "    warnings.simplefilter('always')\n"
                      "    print(tierfs_hint.hint(sys.argv[2], [sys.argv[2] + '/late.jpg']))\n"
                      "print(*[str(x.message) for x in w])\n")
            python = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
                os.path.abspath(__file__)))), "tools", "python")
            out = subprocess.run([sys.executable, "-c", helper, python, self.mnt],
                                 capture_output=True, text=True, timeout=30)
            self.assertEqual(out.stdout.splitlines()[0], "0", out.stderr)
            self.assertIn("rejected every path (none names a file in the mount); first: "
                          "'late.jpg': not in the mount", out.stdout)

    def test_hint_with_no_valid_line_fails(self):
        with harness.Mount(self.src, self.mnt, ["ram=16M", "prefetch=order"]) as m:
            out = self.tierfs("hint", self.mnt, "-", input="nope\nnot/here\n")
            self.assertEqual(out.returncode, 1)
            self.assertIn("no valid path", out.stderr)
            self.assertEqual(m.stats()["prefetch"]["order"]["valid_lines"], 0)
            out = self.tierfs("hint", self.mnt, "-", input="\n\n")
            self.assertEqual(out.returncode, 1)
            self.assertIn("standard input holds no paths", out.stderr)
            out = self.tierfs("hint", self.mnt, os.path.join(self.src, "missing.txt"))
            self.assertEqual(out.returncode, 1)
            self.assertIn("No such file or directory", out.stderr)

    def test_hint_to_a_mount_not_in_order_mode_is_taken_and_warned_about(self):
        # Written to an on-access mount, a hint was accepted with no word
        # that nothing would follow it.
        with harness.Mount(self.src, self.mnt, ["ram=16M"]) as m:
            out = self.tierfs("hint", self.mnt, "-", input="//epoch\nd1/f00001\nd2/f00002\n")
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertIn("accepted 2 of 2 paths and 1 of 1 directive, rejected 0; declared order "
                          "now 2 files (mode on-access)", out.stdout)
            switch = f"echo order > {self.mnt}/.tierfs/prefetch"
            self.assertEqual(out.stderr, f"tierfs hint: warning: {self.mnt} is in prefetch mode "
                                         "on-access: the declared order is kept but not followed; "
                                         f"to follow it: {switch}\n")
            # The control file's own report says it too, and the daemon's log.
            order = m.stats()["prefetch"]["order"]
            self.assertEqual(order["warning"], "the prefetch mode is on-access: the declared order "
                                               f"is kept but not followed; to follow it: {switch}")
            self.assertEqual((order["valid_lines"], order["directive_lines"]), (3, 1))
            self.assertIn(f"warning: order hints written: the prefetch mode is on-access", m.output())
            # Switched as said: followed, and no more warning.
            subprocess.run(["sh", "-c", switch], check=True)
            out = self.tierfs("hint", self.mnt, "-", input="d1/f00001\n")
            self.assertEqual((out.returncode, out.stderr), (0, ""))
            self.assertNotIn("warning", m.stats()["prefetch"]["order"])
            harness.wait_for(lambda: m.stats()["promotions"]["files_resident"] > 0,
                             what="the order followed once switched")

    def test_hint_alone_starts_prefetching(self):
        with harness.Mount(self.src, self.mnt, ["ram=16M", "prefetch=order"]) as m:
            out = self.tierfs("hint", self.mnt, "-", input="\n".join(sorted(self.files)) + "\n")
            self.assertEqual(out.returncode, 0, out.stderr)
            harness.wait_for(lambda: m.stats()["promotions"]["files_resident"] > 0,
                             what="a promotion driven by the hint alone")
            reads = m.stats()["reads"]  # of files: none (stats reads are requests too)
            self.assertEqual(reads["from_tiers"] + reads["from_source"], 0)

    # ---- stage ----

    def test_stage_everything_then_reads_touch_no_source(self):
        with harness.Mount(self.src, self.mnt, ["ram=16M"]) as m:
            out = self.tierfs("stage", self.mnt)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertRegex(out.stdout, r"^staged 40 files, [0-9.]+ KiB in [0-9.]+ s\n$")
            s = m.stats()
            stage = s["prefetch"]["stage"]
            self.assertEqual((stage["requested_files"], stage["done_files"]), (40, 40))
            self.assertEqual(stage["done_bytes"], self.total)
            self.assertEqual(s["promotions"]["files_resident"], 40)
            self.assertEqual(s["source"]["read_bytes"], self.total)
            for rel, data in self.files.items():
                self.assertEqual(harness.read_file(os.path.join(self.mnt, rel)), data)
            self.assertEqual(m.stats()["source"]["read_bytes"], self.total)

    def test_stage_counts_what_was_resident_already(self):
        # "staged 10 files" for 20 asked when 10 were resident: now both.
        with harness.Mount(self.src, self.mnt, ["ram=16M"]):
            for rel in [r for r in self.files if r.startswith("d1/")]:
                harness.read_file(os.path.join(self.mnt, rel))
            out = self.tierfs("stage", self.mnt, "d1", "d2")
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertRegex(out.stdout, r"^staged 10 files, [0-9.]+ KiB in [0-9.]+ s; 10 of the "
                                         r"20 files asked for were resident already\n$")
            out = self.tierfs("stage", self.mnt, "d1", "d2", "d2/f00002")
            self.assertEqual(out.stdout, "nothing to stage: the 20 files asked for were resident "
                                         "already\n")

    def test_stage_into_a_tier_too_small_fails_every_time_with_the_reason(self):
        """A RAM tier that holds a third of the dataset: each run of stage
        exits 1 and says how many files are not resident and why; the
        counters agree (stat, the JSON, Prometheus, stage); the daemon's log
        names the reason with its first files."""
        port = harness.free_port()
        with harness.Mount(self.src, self.mnt, ["ram=128K", f"metrics=127.0.0.1:{port}"]) as m:
            for run in (1, 2):
                with self.subTest(run=run):
                    out = self.tierfs("stage", self.mnt)
                    self.assertEqual(out.returncode, 1, out.stdout + out.stderr)
                    said = re.search(r"tierfs stage: (\d+) of the 40 files asked for are not "
                                     r"resident:\n +(\d+) fit in no tier", out.stderr)
                    self.assertIsNotNone(said, out.stderr)
                    self.assertEqual(said.group(1), said.group(2))
                    stage = m.stats()["prefetch"]["stage"]
                    resident = m.stats()["promotions"]["files_resident"]
                    self.assertEqual(int(said.group(1)), 40 - resident)
                    if run == 2:  # what failed leads, not "staged 0 files, 0 B"
                        self.assertRegex(out.stdout, r"^staged nothing: \d+ files failed in ")
            stage = m.stats()["prefetch"]["stage"]
            self.assertEqual(stage["failed_files"], stage["failed_no_room_files"])
            self.assertEqual(stage["asked_files"],
                             stage["asked_resident_files"] + stage["failed_files"])
            self.assertEqual(stage["asked_files"], 80)
            metrics = harness.scrape_metrics(port)
            self.assertIn(f"tierfs_prefetch_stage_failed_files_total {stage['failed_files']}",
                          metrics)
            stat = self.tierfs("stat", self.mnt).stdout
            self.assertIn(f"asks failed since the mount: {stage['failed_files']} fit in no tier",
                          stat)
            self.assertIn("stage: ", m.output())
            self.assertRegex(m.output(), r"stage: \d+ files not made resident: fit in no tier .*"
                                         r"\(first: 'd\d/f\d+'")

    def test_stage_some_paths_quietly(self):
        with harness.Mount(self.src, self.mnt, ["ram=16M"]) as m:
            out = self.tierfs("stage", self.mnt, "d1", "d2/f00002", "--quiet")
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertEqual(out.stdout + out.stderr, "")
            want = [r for r in self.files if r.startswith("d1/")] + ["d2/f00002"]
            s = m.stats()
            self.assertEqual(s["promotions"]["files_resident"], len(want))
            self.assertEqual(s["source"]["read_bytes"], sum(len(self.files[r]) for r in want))

    def test_stage_of_a_missing_path_fails(self):
        with harness.Mount(self.src, self.mnt, ["ram=16M"]) as m:
            out = self.tierfs("stage", self.mnt, "no/such/dir")
            self.assertEqual(out.returncode, 1)
            self.assertIn("'no/such/dir' does not exist", out.stderr)
            # A misspelt path among good ones fails the whole request.
            out = self.tierfs("stage", self.mnt, "d1", "d2/no-such-file")
            self.assertEqual(out.returncode, 1)
            self.assertIn("'d2/no-such-file' does not exist", out.stderr)
            self.assertEqual(m.stats()["prefetch"]["stage"]["requested_files"], 0)

    def test_stage_says_why_the_daemon_rejected_a_path(self):
        os.symlink("d1", os.path.join(self.src, "link"))
        with harness.Mount(self.src, self.mnt, ["ram=16M"]) as m:
            out = self.tierfs("stage", self.mnt, "link")
            self.assertEqual(out.returncode, 1)
            self.assertIn("tierfs stage: rejected 1 of 1 line; first: 'link': not a regular "
                          "file", out.stderr)
            self.assertIn("nothing staged", out.stderr)
            # The rest is staged; the request still fails, saying which one.
            out = self.tierfs("stage", self.mnt, "d2", "link", "--quiet")
            self.assertEqual(out.returncode, 1)
            self.assertIn("rejected 1 of 2 lines; first: 'link': not a regular file", out.stderr)
            stage = m.stats()["prefetch"]["stage"]
            self.assertEqual(stage["last_rejected"], {"line": "link",
                                                      "reason": "not a regular file"})
            self.assertEqual(stage["done_files"], len([r for r in self.files if r.startswith("d2/")]))

    def test_stage_on_a_mount_without_tiers_fails(self):
        with harness.Mount(self.src, self.mnt):
            out = self.tierfs("stage", self.mnt)
            self.assertEqual(out.returncode, 1)
            self.assertIn("has no tier", out.stderr)

    def test_stage_ctrl_c_stops_watching_not_staging(self):
        # A slow SOURCE (pfs-sim at 4 MB/s) keeps 8 MiB staging for 2 seconds.
        pfs_sim = os.path.join(harness.BIN_DIR, "pfs-sim")
        if not os.access(pfs_sim, os.X_OK):
            self.skipTest("pfs-sim is not built")
        with open(os.path.join(self.src, "big.bin"), "wb") as f:
            f.write(os.urandom(8 * MiB))
        slow = os.path.join(os.path.dirname(self.src), "slow")
        os.mkdir(slow)
        sim = subprocess.run([pfs_sim, self.src, slow, "-o", "total_mbps=4,stream_mbps=4"],
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(sim.returncode, 0, sim.stderr)
        self.addCleanup(harness.force_unmount, slow)
        with harness.Mount(slow, self.mnt, ["ram=64M", "chunk_size=1M"]) as m:
            proc = subprocess.Popen([harness.tierfs_bin(), "stage", self.mnt, "big.bin"],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            harness.wait_for(lambda: m.stats()["prefetch"]["stage"]["requested_files"] == 1,
                             what="the stage request")
            time.sleep(0.3)
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=10)
            self.assertEqual(proc.returncode, 130, err)
            self.assertIn("interrupted; the daemon keeps staging", err)
            self.assertLess(m.stats()["prefetch"]["stage"]["done_files"], 1)
            harness.wait_for(lambda: m.stats()["prefetch"]["stage"]["done_files"] == 1,
                             timeout=30, what="staging to finish without the watcher")

    # ---- errors ----

    def test_not_a_tierfs_mount(self):
        plain = os.path.dirname(self.src)
        for args in (["stat", plain], ["stat", "--json", plain], ["hint", plain, "-"],
                     ["stage", plain]):
            out = self.tierfs(*args, input="x\n")
            self.assertEqual(out.returncode, 1, args)
            self.assertIn(f"'{plain}' is not a tierfs mount (it has no .tierfs/stats)", out.stderr)
            self.assertEqual(out.stdout, "")
        out = self.tierfs("stat", os.path.join(plain, "nowhere"))
        self.assertEqual(out.returncode, 1)
        self.assertIn("No such file or directory", out.stderr)
        out = self.tierfs("stat", os.path.join(self.src, "d0", "f00000"))
        self.assertEqual(out.returncode, 1)
        self.assertIn("is not a directory", out.stderr)
        with harness.Mount(self.src, self.mnt):
            out = self.tierfs("stat", os.path.join(self.mnt, "d0"))
            self.assertEqual(out.returncode, 1)
            self.assertIn("inside a tierfs mount but not its root", out.stderr)

    def test_bad_command_lines(self):
        for args, message in ((["stat"], "expected MOUNT"),
                              (["stat", self.mnt, "extra"], "expected only MOUNT"),
                              (["stat", "--bogus", self.mnt], "unknown option '--bogus'"),
                              (["hint", self.mnt], "expected a FILE"),
                              (["hint", self.mnt, "a", "b"], "expected one FILE only"),
                              (["stage", "--json", self.mnt], "unknown option '--json'")):
            out = self.tierfs(*args)
            self.assertEqual(out.returncode, 2, args)
            self.assertIn(message, out.stderr)
            self.assertIn("usage: tierfs", out.stderr)

    def test_help_lists_the_subcommands(self):
        out = self.tierfs("--help")
        self.assertEqual(out.returncode, 0)
        for word in ("tierfs stat MOUNT", "tierfs hint MOUNT FILE|-", "tierfs stage MOUNT",
                     "tierfs index SOURCE FILE"):
            self.assertIn(word, out.stdout)
        # It ends with where the full reference is on an installed system.
        self.assertTrue(out.stdout.rstrip().endswith("man docs/tierfs.1)."), out.stdout[-200:])
        self.assertNotIn("USAGE.md", out.stdout)
        out = self.tierfs("stage", "--help")
        self.assertEqual(out.returncode, 0)
        self.assertIn("usage: tierfs stage", out.stdout)
        # `tierfs help` is --help (it said "expected SOURCE and MOUNTPOINT").
        self.assertEqual(self.tierfs("help").stdout, out_all := self.tierfs("--help").stdout)
        self.assertIn("tierfs help [SUBCOMMAND]", out_all)
        out = self.tierfs("help", "stage")
        self.assertEqual((out.returncode, out.stdout), (0, self.tierfs("stage", "--help").stdout))
        out = self.tierfs("help", "mount")
        self.assertEqual(out.returncode, 2)
        self.assertIn("expected one subcommand", out.stderr)
        # The index synopsis once, not twice.
        out = self.tierfs("index", "--help")
        self.assertEqual(out.returncode, 0)
        self.assertEqual(out.stdout.count("SOURCE FILE [--check"), 1, out.stdout)

    def test_index_takes_a_relative_file_and_the_option_says_its_absolute_path(self):
        """Positional FILE may be relative; -o index= takes a path from / and
        names the one the relative path would be."""
        with harness.workdir() as (src, mnt):
            harness.make_files(src, 3, 100)
            here = os.path.dirname(src)
            out = self.tierfs("index", src, "ns.idx", "--quiet", cwd=here)
            self.assertEqual(out.returncode, 0, out.stderr)
            self.assertTrue(os.path.exists(os.path.join(here, "ns.idx")))
            out = self.tierfs(src, mnt, "-o", "index=ns.idx", cwd=here)
            self.assertEqual(out.returncode, 2)
            self.assertIn(f"index={os.path.join(here, 'ns.idx')}", out.stderr)


if __name__ == "__main__":
    harness.main()
