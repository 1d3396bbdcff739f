"""tools/grafana/tierfs.json queries only metrics a real mount exports: every
tierfs_* name in every panel's and variable's query is in a scrape of a
mount with tiers and order hints (after reads, so histograms and per-tier
series exist). Also: the file is a dashboard (uid, panels with targets)."""
import json
import os
import re
import socket
import unittest
import urllib.request

import harness

DASHBOARD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools",
                         "grafana", "tierfs.json")
METRIC = re.compile(r"\btierfs_[a-zA-Z0-9_]+")


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


class GrafanaDashboard(unittest.TestCase):
    def test_every_queried_metric_is_exported(self):
        with open(DASHBOARD) as f:
            dashboard = json.load(f)
        self.assertEqual(dashboard["uid"], "tierfs")
        self.assertTrue(all(p["targets"] for p in dashboard["panels"]))
        wanted = queried_metrics(dashboard)
        self.assertGreater(len(wanted), 15)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
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
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                    text = r.read().decode()
        exported = {line.split("{")[0].split(" ")[0] for line in text.splitlines()
                    if line.startswith("tierfs_")}
        self.assertEqual(sorted(wanted - exported), [])


if __name__ == "__main__":
    harness.main()
