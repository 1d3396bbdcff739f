"""The report of tools/bench/sweep: each figure held against its target
(figures: met, or MISSED), the table as printed (markdown), and
OUT/results.md and OUT/sweep.json with the run's header (write_results)."""
import json
import os
import subprocess

from .peers_report import machine
from .sweep_scenarios import run_as_user

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def commit():
    r = subprocess.run(["git", "-C", REPO, "rev-parse", "HEAD"], capture_output=True, text=True)
    return r.stdout.strip() or "?"


def fmt_x(v):
    return "-" if v is None else f"{v:.2f}x"


def fmt_s(values):
    return " ".join(f"{v:.2f}" for v in values)


def figures(scenarios):
    """[(scenario, contender, figure, value text, target text, status)]: the
    node cache's figures against their targets, the baseline's beside them."""
    rows = []

    def add(sc, con, figure, value, target=None, limit=None):
        status = ""
        if figure == "read errors":
            status = "ok" if value == 0 else "FAILED"
        elif limit is not None and con == "node-cache":
            status = "met" if value is not None and value <= limit else "MISSED"
        text = fmt_x(value) if isinstance(value, float) or value is None else str(value)
        rows.append((sc, con, figure, text, target or "", status))
    for con, r in scenarios.get("sequential", {}).items():
        add("sequential", con, "PFS bytes / dataset", r["pfs_x"], "<= 1.05x", 1.05)
        add("sequential", con, "first epochs s (jobs 1..N)", fmt_s(r["first_epoch_s"]))
        add("sequential", con, "warm epoch s (job 1's 2nd)", f"{r['warm_epoch_s']:.2f}")
        add("sequential", con, "job 2's first epoch / warm", r["second_job_vs_warm"],
            "<= 1.2x", 1.2)
        add("sequential", con, "read errors", r["errors"], "0")
    direct = scenarios.get("side-by-side", {}).get("direct")
    if direct:
        add("side-by-side", "direct", "first epochs s (4 readers)", fmt_s(direct["epoch_s"]))
        add("side-by-side", "direct", "PFS bytes / dataset", direct["pfs_x"])
    for con, r in scenarios.get("side-by-side", {}).items():
        if con == "direct":
            continue
        add("side-by-side", con, "PFS bytes / dataset", r["pfs_x"], "<= 1.05x", 1.05)
        add("side-by-side", con, f"daemons' RSS / dataset ({r['daemons']} daemons)", r["rss_x"],
            "<= 1.1x", 1.1)
        add("side-by-side", con, "daemons' cgroups' memory / dataset", r["cgroup_x"])
        add("side-by-side", con, "first epochs s (4 jobs)", fmt_s(r["first_epoch_s"]))
        add("side-by-side", con, "worst first epoch / direct", max(r["first_vs_direct"]),
            "<= 1.0x", 1.0)
        add("side-by-side", con, "read errors", r["errors"], "0")
    for con, r in scenarios.get("budget", {}).items():
        add("budget", con, "datasets / budget", r["datasets_x_budget"])
        add("budget", con, "PFS bytes / datasets", r["pfs_x"])
        if con == "node-cache":
            add("budget", con, "max RAM, tier recorded KiB (budget)",
                f"{r['max_ram_kb']}, {r['max_tier_kb']} ({r['budget_mb'] * 1024})")
            rows.append(("budget", con, "within the budgets after every prolog and epilog",
                         str(r["within_budget"]).lower(), "true",
                         "met" if r["within_budget"] else "MISSED"))
            add("budget", con, "stopped for room", " ".join(r["stopped_for_room"]) or "none")
        add("budget", con, "read errors", r["errors"], "0")
    return rows


def markdown(scenarios):
    lines = ["| scenario | contender | figure | value | target | |", "|---|---|---|---:|---|---|"]
    lines += [f"| {' | '.join(row)} |" for row in figures(scenarios)]
    jobs = ["", "| scenario | contender | job | user | dataset | prolog s | epochs s | files | "
            "errors | PFS MB | epilog s |", "|---|---|---:|---|---|---:|---|---:|---:|---:|---:|"]
    for sc, by in scenarios.items():
        for con, r in by.items():
            for j in r.get("jobs", []):
                pfs = "-" if j["pfs_bytes"] is None else f"{j['pfs_bytes'] / 1e6:.1f}"
                jobs.append(f"| {sc} | {con} | {j['job']} | {j['user']} | {j['dataset']} | "
                            f"{j['prolog_s']:.2f} | {fmt_s(j['epoch_s'])} | {j['files']} | "
                            f"{j['errors']} | {pfs} | {j['epilog_s']:.2f} |")
    return "\n".join(lines + jobs) + "\n"


def write_results(run, command, params, scenarios, elapsed, failures):
    """OUT/results.md and OUT/sweep.json; returns the header and the table."""
    args = run.args
    ds = {n: {"files": d["files"], "bytes": d["bytes"]} for n, d in run.datasets.items()}
    header = (f"Command: `{command}`  \nCommit: {commit()}  \nMachine: {machine()}  \n"
              f"pfs-sim parameters: `{json.dumps(params)}`  \n"
              f"Datasets: " + ", ".join(f"{n}: {d['files']} files, {d['bytes'] / 1e6:.1f} MB"
                                        for n, d in ds.items())
              + f"; {args.jobs} sequential jobs; {args.threads} reader threads per job "
              f"(tierfs-bench); seed {args.seed}; page cache dropped before every job (sequential: before every epoch); run took "
              f"{elapsed:.0f} s.  \nContenders: baseline = NODE_CACHE=no (each job's own daemon, "
              f"its tiers deleted by the epilog), node-cache = NODE_CACHE=yes (RAM and tier "
              f"budgets 1.1x the dataset + 1 MB; budget: the three datasets' half).  \n"
              f"side-by-side's direct: the same 4 readers over the pfs-sim mount at once. "
              f"RUN_AS_USER={run_as_user()} (yes where users may open /dev/fuse).\n\n")
    if failures:
        header += "Failures:\n" + "".join(f"- {f}\n" for f in failures) + "\n"
    table = markdown(scenarios)
    with open(os.path.join(run.out, "results.md"), "w") as f:
        f.write(header + table)
    doc = {"command": command, "commit": commit(), "machine": machine(), "pfs_params": params,
           "datasets": ds, "jobs": args.jobs, "threads": args.threads, "seed": args.seed,
           "run_s": elapsed, "run_as_user": run_as_user(), "scenarios": scenarios, "failures": failures,
           "figures": [dict(zip(("scenario", "contender", "figure", "value", "target", "status"),
                                row)) for row in figures(scenarios)]}
    with open(os.path.join(run.out, "sweep.json"), "w") as f:
        json.dump(doc, f, indent=1)
    return header + table
