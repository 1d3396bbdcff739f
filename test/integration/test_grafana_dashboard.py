"""tools/grafana/tierfs.json queries only metrics a real mount exports: every
tierfs_* name in every panel's and variable's query is in a scrape of a
mount with tiers and order hints (after reads, so histograms and per-tier
series exist). Also: the file is a dashboard (uid, panels with targets), and
its hit ratio is tierfs stat's: from_tiers over every read piece."""
import json
import os
import re
import subprocess
import unittest

import harness

DASHBOARD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools",
                         "grafana", "tierfs.json")
METRIC = re.compile(r"\btierfs_[a-zA-Z0-9_]+")
# Every part of a read served, wherever from: the one denominator of a hit
# ratio (tools/tierfs/commands.h, ReadPieces).
READ_PIECES = {f"tierfs_reads_{name}_parts_total" for name in
               ("from_tiers", "after_promotion", "early", "from_copy", "from_source",
                "from_peers")}


def queried_metrics(dashboard):
    names = set()
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            names.update(METRIC.findall(target["expr"]))
    for var in dashboard["templating"]["list"]:
        query = var.get("query")
        if isinstance(query, dict):
            names.update(METRIC.findall(query.get("query", "")))
    return names


def load_dashboard():
    with open(DASHBOARD) as f:
        return json.load(f)


def hit_ratio_panel(dashboard):
    return next(p for p in dashboard["panels"] if p["title"] == "Tier hit ratio")


def scraped(text):
    """{name: value summed over its series} of a Prometheus scrape."""
    values = {}
    for line in text.splitlines():
        if line.startswith("tierfs_"):
            name = line.split("{")[0].split(" ")[0]
            values[name] = values.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
    return values


def evaluate(expr, values):
    """The value of a ratio of sums of rates over one mount's scrape, every
    counter having started at 0 at the same moment: each rate over that
    window is the counter's value over its length, which cancels out."""
    expr = re.sub(r"rate\((tierfs_\w+)\{[^}]*\}\[\$__rate_interval\]\)",
                  lambda m: repr(values[m.group(1)]), expr)
    expr = expr.replace("sum by (instance) ", "").replace("clamp_min", "max")
    assert re.fullmatch(r"[0-9.e+\-*/(), max]+", expr), expr
    return eval(expr)  # noqa: S307 (numbers, operators and max only: checked above)


class GrafanaDashboard(unittest.TestCase):
    def test_hit_ratio_divides_by_every_read_piece(self):
        # Only tier and SOURCE reads were counted: reads served early from a
        # copy being made, or from the reader's own copy, made it look higher.
        for target in hit_ratio_panel(load_dashboard())["targets"]:
            _, slash, denominator = target["expr"].partition(" / ")
            self.assertTrue(slash, target["expr"])
            self.assertEqual(set(METRIC.findall(denominator)), READ_PIECES, target["refId"])

    def test_every_queried_metric_is_exported(self):
        dashboard = load_dashboard()
        self.assertEqual(dashboard["uid"], "tierfs")
        self.assertTrue(all(p["targets"] for p in dashboard["panels"]))
        wanted = queried_metrics(dashboard)
        self.assertGreater(len(wanted), 15)
        port = harness.free_port()
        with harness.workdir() as (src, mnt):
            files = harness.make_files(src, 20, 8192)
            tier = os.path.join(os.path.dirname(src), "nvme")
            os.mkdir(tier)
            options = ["ram=1M", f"tier={tier}:16M", "prefetch=order", f"metrics={port}"]
            with harness.Mount(src, mnt, options):
                with open(os.path.join(mnt, ".tierfs", "order"), "w") as f:
                    f.write("".join(rel + "\n" for rel in files))
                for rel in files:
                    harness.read_file(os.path.join(mnt, rel))
                text = harness.scrape_metrics(port)
        self.assertEqual(sorted(wanted - set(scraped(text))), [])

    def test_hit_ratio_is_tierfs_stats(self):
        # A directory tier only: its cold reads are served from the copy their
        # reader has just made (reads.from_copy), then some are read again
        # from the tier (hits). passthrough=off: those reads reach the daemon.
        port = harness.free_port()
        with harness.workdir() as (src, mnt):
            files = harness.make_files(src, 10, 8192)
            tier = os.path.join(os.path.dirname(src), "nvme")
            os.mkdir(tier)
            options = [f"tier={tier}:16M", f"metrics={port}", "passthrough=off"]
            with harness.Mount(src, mnt, options) as m:
                for rel in files:
                    harness.read_file(os.path.join(mnt, rel))
                harness.wait_for(lambda: m.stats()["promotions"]["files_resident"] == len(files),
                                 what="every file in the tier")
                for rel in list(files)[:4]:
                    harness.read_file(os.path.join(mnt, rel))
                values = scraped(harness.scrape_metrics(port))
                stat = subprocess.run([harness.tierfs_bin(), "stat", mnt], capture_output=True,
                                      text=True, timeout=30).stdout
        self.assertGreaterEqual(values["tierfs_reads_from_copy_parts_total"], len(files), values)
        self.assertGreaterEqual(values["tierfs_reads_from_tiers_parts_total"], 4, values)
        shown = re.search(r"\n +\S+ \(([0-9.]+)%\) from a tier, resident when asked \(hits\)", stat)
        self.assertIsNotNone(shown, stat)
        ratio = evaluate(hit_ratio_panel(load_dashboard())["targets"][0]["expr"], values)
        self.assertAlmostEqual(100 * ratio, float(shown.group(1)), delta=0.05)
        self.assertLess(ratio, 0.5)


if __name__ == "__main__":
    harness.main()
