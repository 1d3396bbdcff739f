"""Every metric a real mount exports follows Prometheus's naming rules
(https://prometheus.io/docs/practices/naming/): checked over whole scrapes of
a mount with two tiers, declared orders (more streams than get a series of
their own, one of them named), staging and SOURCE's permissions, and of two
peered daemons when munged is installed.

Checked for every family: a name of ^tierfs_[a-z0-9_]+$; counters end in
_total, other types do not; no unit other than the base ones (no _ms, _us,
_per_s, _kb, _mb); figures in bytes end in _bytes (or _bytes_total,
_bytes_per_second), durations in _seconds; a HELP that is a sentence, not a
path of .tierfs/stats; label values from a bounded set (no process ids,
stream series capped, the rest as stream="other"); and tierfs_info names
the version, SOURCE and mount point.

And what a name says is what it counts: a gauge ends in the unit it counts
(tierfs_prefetch_order_lookahead_files, not ..._lookahead) unless it is a
yes/no (HELP "1 if ..."); parts of reads (a read split at chunk boundaries)
end in _parts, so they cannot be taken for whole reads (tierfs_tiers_hits
were parts, said to be "reads served whole"); no precomputed rate (a
counter, and rate()); no negative value standing for "unknown" (a stage ETA
of -1); no stutter (autotune_tune, stage_staged, open_files_open)."""
import os
import re
import subprocess
import sys
import tempfile
import unittest

import harness

NAME = re.compile(r"^tierfs_[a-z0-9_]+$")
BAD_UNIT = re.compile(r"_(ms|us|per_s|kb|mb|kib|mib|gb)(_|$)")
BYTES_NAME = re.compile(r"_bytes(_total|_per_second)?$")
SECONDS_NAME = re.compile(r"_seconds(_total)?$")
# A HELP whose subject is bytes, a size or a duration measures it.
BYTES_HELP = re.compile(r"^(\w+ )?(bytes|size)\b", re.I)
SECONDS_HELP = re.compile(r"^(time|how long|mean latency|lowest mean latency|estimated time)\b",
                          re.I)
# Figures known to be in bytes or seconds whatever their HELP says.
BYTES_STEMS = ("tierfs_tiers_budget", "tierfs_tiers_limit", "tierfs_tiers_used",
               "tierfs_promotions_chunk_size", "tierfs_tiers_bytes", "tierfs_tiers_served")
SECONDS_STEMS = ("tierfs_uptime", "tierfs_prefetch_autotune_source_latency",
                 "tierfs_prefetch_autotune_best_source_latency", "tierfs_requests_read_latency")
# A path of .tierfs/stats in a HELP (tiers.used, tiers_used): a name, not a meaning.
JSON_PATH = re.compile(r"(?<![\w./])[a-z0-9_]+\.[a-z0-9_]+(?![\w/])|\.tierfs/stats"
                       r"|[a-z0-9]+_[a-z0-9_]+")
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
STREAM_SERIES = 16  # StreamPlanner::kSeries
# The nouns a gauge may end in: what it counts, or its unit.
GAUGE_UNITS = ("bytes", "seconds", "files", "chunks", "parts", "entries", "promotions",
               "directories", "symlinks", "streams", "threads", "snapshots")
FLAG_HELP = re.compile(r"^1 if ")
PARTS_HELP = re.compile(r"^parts of reads\b", re.I)
COUNT_HELP = {"files": re.compile(r"^(\w+ )?files\b", re.I),
              "chunks": re.compile(r"^(\w+ )?chunks\b", re.I)}
# Figures of the peers: their names are the peers' code's, not yet held to
# these rules (counts of nodes, a port, a number of bits, server_serve).
UNIT_RULE_EXEMPT = ("tierfs_peers_",)


def parse(text):
    """{family: {"help", "type", "samples": [(name, {labels}, value)]}}."""
    families, order = {}, []
    for line in text.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            kind, rest = line[2:6].lower(), line[7:]
            name, _, value = rest.partition(" ")
            fam = families.setdefault(name, {"samples": []})
            if name not in order:
                order.append(name)
            fam[kind] = value
            continue
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        name, labels, value = m.group(1), dict(LABEL.findall(m.group(2) or "")), float(m.group(3))
        family = name
        for suffix in ("_bucket", "_sum", "_count"):
            base = name[: -len(suffix)]
            if name.endswith(suffix) and families.get(base, {}).get("type") == "histogram":
                family = base
        assert family in families, f"{name}: a sample without # HELP and # TYPE"
        families[family]["samples"].append((name, labels, value))
    return families


def unit_violations(name, kind, help_text, samples):
    """What the name does not say of what it counts, and stutters."""
    bad = []
    if name.startswith(UNIT_RULE_EXEMPT):
        return bad
    words = name.split("_")[1:]
    if words and words[-1] == "total":
        words = words[:-1]
    for a, b in zip(words, words[1:]):
        if a != b and min(len(a), len(b)) >= 3 and (a in b or b in a):
            bad.append(f"{name}: stutters ({a}_{b})")
    repeated = {w for w in words[:-1] if words.count(w) > 1 and w not in GAUGE_UNITS}
    if repeated:
        bad.append(f"{name}: says {', '.join(sorted(repeated))} twice")
    if name.endswith("_per_second"):
        bad.append(f"{name}: a precomputed rate (export a counter: rate() makes the rate)")
    if PARTS_HELP.search(help_text) and not re.search(r"_parts(_total)?$", name):
        bad.append(f"{name}: counts parts of reads, not named _parts")
    if kind == "gauge" and name != "tierfs_info":
        if FLAG_HELP.search(help_text):
            if words and words[-1] in GAUGE_UNITS:
                bad.append(f"{name}: a yes/no named as a count")
        elif not words or words[-1] not in GAUGE_UNITS:
            bad.append(f"{name}: a count that does not end in what it counts "
                       f"({', '.join(GAUGE_UNITS)})")
        for unit, subject in COUNT_HELP.items():
            if subject.search(help_text) and not name.endswith("_" + unit):
                bad.append(f"{name}: counts {unit}, not named _{unit}")
        for sample, labels, value in samples:
            if value < 0:
                bad.append(f"{sample}: {value} (a negative value for 'unknown': leave it out)")
    return bad


def violations(families, source, mount):
    """Every breach of the conventions, one line each."""
    bad = []
    for name, fam in families.items():
        kind, help_text = fam.get("type"), fam.get("help", "")
        if not NAME.match(name):
            bad.append(f"{name}: not ^tierfs_[a-z0-9_]+$")
        if kind not in ("counter", "gauge", "histogram"):
            bad.append(f"{name}: TYPE {kind!r}")
        if (kind == "counter") != name.endswith("_total"):
            bad.append(f"{name}: TYPE {kind} {'without' if kind == 'counter' else 'with'} _total")
        if BAD_UNIT.search(name):
            bad.append(f"{name}: a unit other than the base ones")
        if (BYTES_HELP.search(help_text) or name.startswith(BYTES_STEMS)) and \
                not BYTES_NAME.search(name):
            bad.append(f"{name}: in bytes, not named _bytes")
        if "bytes" in name and not BYTES_NAME.search(name):
            bad.append(f"{name}: 'bytes' is not the unit suffix")
        if (SECONDS_HELP.search(help_text) or name.startswith(SECONDS_STEMS)
                or kind == "histogram") and not SECONDS_NAME.search(name):
            bad.append(f"{name}: a duration not named _seconds")
        words = help_text.split()
        if len(words) < 3 or not help_text.endswith(".") or not help_text[0].isupper() and \
                not help_text[0].isdigit():
            bad.append(f"{name}: HELP {help_text!r} is not a sentence")
        if JSON_PATH.search(help_text):
            bad.append(f"{name}: HELP {help_text!r} names a path, not what is measured")
        if not fam["samples"]:
            bad.append(f"{name}: no sample")
        bad += unit_violations(name, kind, help_text, fam["samples"])
        for sample, labels, _ in fam["samples"]:
            for key, value in labels.items():
                if "pid:" in value or re.fullmatch(r"\d{3,}", value):
                    bad.append(f"{sample}{{{key}={value!r}}}: a process id as a label")
    streams = {labels.get("stream") for fam in families.values()
               for _, labels, _ in fam["samples"] if "stream" in labels}
    if len(streams - {"other"}) > STREAM_SERIES:
        bad.append(f"{len(streams)} stream series: more than {STREAM_SERIES} and other")
    info = families.get("tierfs_info", {"samples": []})["samples"]
    if len(info) != 1:
        bad.append(f"tierfs_info: {len(info)} samples")
    else:
        labels = info[0][1]
        want = {"source": source, "mount": mount}
        for key, value in want.items():
            if labels.get(key) != value:
                bad.append(f"tierfs_info: {key}={labels.get(key)!r}, not {value!r}")
        if not labels.get("version"):
            bad.append("tierfs_info: no version label")
    return bad


class MetricsConventions(unittest.TestCase):
    def check(self, text, source, mount):
        families = parse(text)
        self.assertGreater(len(families), 100)
        bad = violations(families, source, mount)
        self.assertEqual(bad, [], "\n".join(bad))
        return families

    def test_a_mount_with_tiers_streams_and_staging(self):
        port = harness.free_port()
        with harness.workdir() as (src, mnt):
            files = sorted(harness.make_files(src, 30, 8192))
            tier = os.path.join(os.path.dirname(src), "nvme")
            os.mkdir(tier)
            options = ["ram=1M", f"tier={tier}:16M", "prefetch=order", f"metrics={port}"]
            if os.geteuid() == 0:
                options += ["allow_other", "permissions=source"]
            with harness.Mount(src, mnt, options):
                order = os.path.join(mnt, ".tierfs", "order")
                with open(order, "a") as f:
                    f.write("//stream rank0\n" + "".join(rel + "\n" for rel in files))
                # A stream per writing process: more than get a series of their own.
                for i in range(STREAM_SERIES + 4):
                    subprocess.run(["sh", "-c", 'echo "$1" >> "$2"', "sh", files[i], order],
                                   check=True)
                with open(os.path.join(mnt, ".tierfs", "stage"), "w") as f:
                    f.write(files[0] + "\n")
                for rel in files:
                    harness.read_file(os.path.join(mnt, rel))
                text = harness.scrape_metrics(port)
                stats = harness.mount_stats(mnt)
        families = self.check(text, src, mnt)
        streams = {labels["stream"]: value for _, labels, value in
                   families["tierfs_prefetch_order_streams_declared_files"]["samples"]}
        self.assertEqual(len(stats["prefetch"]["order"]["streams"]), STREAM_SERIES + 5)
        # The first slot is rank0's, the next are processes'.
        self.assertEqual(streams["rank0"], len(files))
        self.assertEqual(streams["process-1"], 1)
        # The streams beyond the cap are added up, none lost.
        self.assertEqual(streams["other"], 5)
        self.assertEqual(sum(streams.values()), stats["prefetch"]["order"]["declared"])
        if os.geteuid() == 0:
            self.assertIn("tierfs_permissions_checks_total", families)
        # Converted, not only renamed: the tiers' bytes as in the stats.
        used = {labels["tier"]: value for _, labels, value in
                families["tierfs_tiers_used_bytes"]["samples"]}
        self.assertEqual(used["ram"], stats["tiers"][0]["used"])
        # The tiers' hits and the reads from tiers are one unit, parts of reads.
        hits = sum(v for _, _, v in families["tierfs_tiers_hit_parts_total"]["samples"])
        self.assertEqual(hits, families["tierfs_reads_from_tiers_parts_total"]["samples"][0][2])
        # Staging's progress as a counter, not a rate.
        self.assertIn("tierfs_prefetch_stage_made_resident_bytes_total", families)

    def test_the_rules_catch_what_a_mount_exported_before(self):
        # Names a mount exported (each a breach): counts with no unit, a yes/no
        # that stutters, parts of reads named as reads, a rate, an ETA of -1.
        before = [
            ("tierfs_prefetch_order_lookahead", "gauge", "Files promoted ahead of the readers "
                                                        "at most.", 64),
            ("tierfs_open_files_open", "gauge", "SOURCE files held open now.", 3),
            ("tierfs_prefetch_autotune_tune_parallelism", "gauge",
             "1 if the number of parallel SOURCE reads is tuned.", 1),
            ("tierfs_reads_from_tiers_total", "counter",
             "Parts of reads served from a tier, resident when asked for (hits).", 7),
            ("tierfs_prefetch_stage_rate_bytes_per_second", "gauge",
             "Staged bytes made resident per second since staging started.", 10),
            ("tierfs_prefetch_stage_eta_seconds", "gauge",
             "Estimated time until every staged file is resident.", -1),
        ]
        for name, kind, help_text, value in before:
            with self.subTest(name=name):
                self.assertNotEqual(unit_violations(name, kind, help_text, [(name, {}, value)]), [])

    def test_peered_daemons(self):
        try:
            sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                            "tools", "bench"))
            from benchlib import munged
            daemon = munged.Munged().start()
        except Exception as e:  # munged missing or unable to start here
            self.skipTest(f"munged: {e}")
        os.environ["UCX_TLS"] = "tcp"
        try:
            with harness.workdir() as (src, mnt):
                files = harness.make_files(src, 12, 64 * 1024)
                base = os.path.dirname(src)
                ports = [harness.free_port() for _ in range(2)]
                metrics = [harness.free_port() for _ in range(2)]
                peers = os.path.join(base, "peers")
                with open(peers, "w") as f:
                    f.write("".join(f"n{i} 127.0.0.1:{p}\n" for i, p in enumerate(ports)))
                mounts, texts = [], []
                try:
                    for i in range(2):
                        m = mnt if i == 0 else os.path.join(base, "mnt1")
                        os.makedirs(m, exist_ok=True)
                        mounts.append(harness.Mount(src, m, [
                            "ram=64M", f"peers={peers}", f"peer_name=n{i}", "peer_job=conv",
                            f"munge_socket={daemon.socket}", f"metrics={metrics[i]}"]))
                    harness.wait_for(
                        lambda: all(x.stats()["peers"]["server"]["listening"] for x in mounts),
                        what="peers listening")
                    for rel in files:  # connects to n1 on first need
                        harness.read_file(os.path.join(mnt, rel))
                    harness.wait_for(lambda: mounts[0].stats()["peers"]["up"] == 1,
                                     what="n1 up as n0's peer")
                    texts = [harness.scrape_metrics(p) for p in metrics]
                finally:
                    for x in mounts:
                        x.close()
                for i, text in enumerate(texts):
                    families = self.check(text, src, mnt if i == 0 else os.path.join(base, "mnt1"))
                    self.assertIn("tierfs_peers_remote_latency_seconds_total", families)
                    self.assertIn("tierfs_peers_server_in_flight_bytes", families)
        finally:
            daemon.close()


if __name__ == "__main__":
    harness.main()
