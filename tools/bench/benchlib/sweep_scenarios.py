"""The scenarios of tools/bench/sweep, each run once per contender on a Site
of its own (benchlib/sweep_site.py): `sequential` (jobs one after another
over one dataset), `side-by-side` (4 jobs of two users at once over one
dataset; the `direct` epochs they are held against: direct_epochs) and
`budget` (three datasets whose sum is twice the node cache's budget, jobs
over them in turn). Each returns a dict of its jobs and figures; a failed
prolog, epilog or reader raises JobFailed. Contenders: `baseline`
(NODE_CACHE=no: each job's own daemon, its tiers deleted by its epilog) and
`node-cache` (NODE_CACHE=yes over the pfs-sim mount)."""
import math
import os
import re
import shutil
import threading
import time

from .sweep_site import Site, daemon_memory, drop_caches, node_caches, read_epochs

CONTENDERS = ("baseline", "node-cache")
SCENARIOS = ("sequential", "side-by-side", "budget")
MIB = 1 << 20
STOPPED = re.compile(r"node cache ([0-9a-f]{16}) \((.*)\) is used by no job: stopped for room")
TIER_REMOVED = re.compile(r"node cache ([0-9a-f]{16}): its directory tier removed for room")


def tier_mb(nbytes):
    """A tier (RAM and directory) that holds a dataset of `nbytes`, with room
    for the chunks' rounding: MB for the site's settings and a job's --mem."""
    return math.ceil(nbytes * 1.1 / MIB) + 1


def run_as_user():
    """The baseline's daemons run as the job's user (RUN_AS_USER=yes, the
    default) where users may open /dev/fuse; else as root (no), as a site
    with /dev/fuse 0600 must configure it."""
    return "yes" if os.stat("/dev/fuse").st_mode & 0o006 == 0o006 else "no"


def site_for(run, scenario, contender, budget_mb):
    """A fresh Site; node-cache: NODE_CACHE=yes over the pfs-sim mount with
    budgets of budget_mb each."""
    root = os.path.join(run.work, "sites", f"{scenario}-{contender}")
    shutil.rmtree(root, ignore_errors=True)  # an earlier run's (--keep); Site.close unmounted it
    # --quick: a prolog waiting for the node cache's lock (MOUNT_TIMEOUT + 30 s)
    # must not outlast the smoke test.
    settings = {"RUN_AS_USER": run_as_user(), "MOUNT_TIMEOUT": 20 if run.args.quick else 120}
    if contender == "node-cache":
        settings |= {"NODE_CACHE": "yes", "NODE_CACHE_DATASETS": run.pfs.mnt,
                    "NODE_CACHE_RAM_MB": budget_mb, "NODE_CACHE_TIER_MB": budget_mb}
    return Site(root, run.args.bin_dir, settings)


def job_row(job, user, dataset, prolog_s, rows, pfs_bytes, epilog_s):
    return {"job": job, "user": "root" if user is None else "second", "dataset": dataset,
            "prolog_s": prolog_s, "epoch_s": [r["wall_s"] for r in rows],
            "files": sum(r["files"] for r in rows), "bytes": sum(r["bytes"] for r in rows),
            "errors": sum(r["errors"] for r in rows), "pfs_bytes": pfs_bytes, "epilog_s": epilog_s}


def sequential(run, contender):
    """--jobs jobs one after another over dataset `a`, each: prolog, 2 epochs,
    epilog; the page cache dropped before each job and each epoch (so the
    warm epoch, job 1's second, is served by the tiers as job 2's first is,
    not by the kernel)."""
    args, ds = run.args, run.datasets["a"]
    size_mb = tier_mb(ds["bytes"])
    site = site_for(run, "sequential", contender, size_mb)
    jobs = []
    try:
        start = run.pfs_ops()["read_bytes"]
        for j in range(args.jobs):
            job = 1000 + j
            drop_caches()
            before = run.pfs_ops()["read_bytes"]
            mnt, prolog_s, _ = site.prolog(job, ds["path"], mem_mb=size_mb)
            rows = read_epochs(run.bench, mnt, 2, args.threads, args.seed + j, drop=True)
            epilog_s = site.epilog(job)
            jobs.append(job_row(job, None, "a", prolog_s, rows,
                                run.pfs_ops()["read_bytes"] - before, epilog_s))
            print(f"  sequential/{contender}: job {j + 1}: epochs "
                  + ", ".join(f"{s:.2f}" for s in jobs[-1]["epoch_s"])
                  + f" s, PFS {jobs[-1]['pfs_bytes'] / 1e6:.1f} MB", flush=True)
        pfs = run.pfs_ops()["read_bytes"] - start
    finally:
        leftovers = site.close()
    warm = jobs[0]["epoch_s"][1]
    return {"jobs": jobs, "pfs_bytes": pfs, "pfs_x": pfs / ds["bytes"],
            "first_epoch_s": [j["epoch_s"][0] for j in jobs], "warm_epoch_s": warm,
            "second_job_vs_warm": jobs[1]["epoch_s"][0] / warm if len(jobs) > 1 else None,
            "errors": sum(j["errors"] for j in jobs), "leftovers": leftovers}


SIDE_USERS = (False, True, False, True)  # job i's user: root, or the second user


def together(fns):
    """Runs the callables at once; returns their results in order, or raises
    the first exception one raised (after all ended)."""
    out, errors = [None] * len(fns), []

    def call(i):
        try:
            out[i] = fns[i]()
        except Exception as e:  # noqa: BLE001  re-raised below, in this thread
            errors.append(e)
    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(fns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return out


def direct_epochs(run):
    """The 4 readers of side-by-side over the pfs-sim mount itself, at once,
    one epoch each, the page cache dropped first."""
    ds, args = run.datasets["a"], run.args
    drop_caches()
    users = [run.user if second else None for second in SIDE_USERS]
    before = run.pfs_ops()["read_bytes"]
    rows = together([lambda i=i: read_epochs(run.bench, ds["path"], 1, args.threads,
                                             args.seed + i, users[i])
                     for i in range(len(users))])
    epochs = [r[0]["wall_s"] for r in rows]
    print(f"  side-by-side/direct: epochs {', '.join(f'{s:.2f}' for s in epochs)} s", flush=True)
    pfs = run.pfs_ops()["read_bytes"] - before
    return {"epoch_s": epochs, "mean_s": sum(epochs) / len(epochs),
            "errors": sum(r[0]["errors"] for r in rows), "pfs_bytes": pfs,
            "pfs_x": pfs / ds["bytes"]}


def side_by_side(run, contender, direct):
    """4 jobs at once (root's and the second user's) over dataset `a`: their
    prologs at once, then each reads 2 epochs while the others do."""
    args, ds = run.args, run.datasets["a"]
    size_mb = tier_mb(ds["bytes"])
    site = site_for(run, "side-by-side", contender, size_mb)
    users = [run.user if second else None for second in SIDE_USERS]
    ids = [2000 + i for i in range(len(users))]
    try:
        drop_caches()
        before = run.pfs_ops()["read_bytes"]
        mounted = together([lambda i=i: site.prolog(ids[i], ds["path"], users[i], size_mb)
                            for i in range(len(ids))])
        rows = together([lambda i=i: read_epochs(run.bench, mounted[i][0], 2, args.threads,
                                                 args.seed + i, users[i])
                         for i in range(len(ids))])
        rss, cgroup = daemon_memory(site)
        daemons = len(site.daemon_pids())
        epilogs = [site.epilog(job) for job in ids]
        pfs = run.pfs_ops()["read_bytes"] - before
    finally:
        leftovers = site.close()
    jobs = [job_row(ids[i], users[i], "a", mounted[i][1], rows[i], None, epilogs[i])
            for i in range(len(ids))]
    for j in jobs:
        print(f"  side-by-side/{contender}: job {j['job']} ({j['user']}): epochs "
              + ", ".join(f"{s:.2f}" for s in j["epoch_s"]) + " s", flush=True)
    first = [j["epoch_s"][0] for j in jobs]
    return {"jobs": jobs, "pfs_bytes": pfs, "pfs_x": pfs / ds["bytes"], "daemons": daemons,
            "rss_bytes": rss, "rss_x": rss / ds["bytes"], "cgroup_bytes": cgroup,
            "cgroup_x": None if cgroup is None else cgroup / ds["bytes"],
            "first_epoch_s": first, "first_vs_direct": [s / direct["mean_s"] for s in first],
            "errors": sum(j["errors"] for j in jobs), "leftovers": leftovers}


def short(dataset):
    """The run's name of a dataset (a, b or c) from its path."""
    return os.path.basename(dataset.rstrip("/")).split("-")[0]


def budget_use(site):
    """The node caches' use of the budgets now: RAM recorded for running caches,
    directory tier recorded for caches with a tier directory, bytes in those."""
    caches = node_caches(site)
    return {"ram_kb": sum(c["ram_kb"] for c in caches.values() if c["running"]),
            "tier_kb": sum(c["tier_kb"] for c in caches.values() if c["tier_dir"]),
            "tier_bytes": sum(c["tier_bytes"] for c in caches.values()),
            "running": sorted(short(c["dataset"]) for c in caches.values() if c["running"])}


def budget(run, contender):
    """Datasets a, b, c (their sum twice the budget) read by jobs in turn,
    a b c a b c, one epoch each; after each prolog and epilog the caches' use
    is held against NODE_CACHE_RAM_MB and NODE_CACHE_TIER_MB."""
    args = run.args
    total = sum(run.datasets[n]["bytes"] for n in "abc")
    budget_mb = max(1, round(total / 2 / MIB))
    site = site_for(run, "budget", contender, budget_mb)
    names = {}  # cache key -> dataset name
    jobs, checks = [], []
    try:
        start = run.pfs_ops()["read_bytes"]
        for j, name in enumerate("abcabc"):
            job, ds = 3000 + j, run.datasets[name]
            drop_caches()
            before = run.pfs_ops()["read_bytes"]
            mnt, prolog_s, said = site.prolog(job, ds["path"], mem_mb=tier_mb(ds["bytes"]))
            for key, c in node_caches(site).items():
                names[key] = short(c["dataset"])
            during = budget_use(site)
            rows = read_epochs(run.bench, mnt, 1, args.threads, args.seed + j)
            epilog_s = site.epilog(job)
            after = budget_use(site)
            row = job_row(job, None, name, prolog_s, rows, run.pfs_ops()["read_bytes"] - before,
                          epilog_s)
            row["stopped_for_room"] = [names.get(k, k) for k, _ in STOPPED.findall(said)]
            row["tier_removed_for_room"] = [names.get(k, k) for k in TIER_REMOVED.findall(said)]
            row["started"] = "started the node cache" in said
            jobs.append(row)
            for when, use in (("running", during), ("after", after)):
                checks.append(dict(use, job=job, when=when,
                                   ok=contender != "node-cache"
                                   or (use["ram_kb"] <= budget_mb * 1024
                                       and use["tier_kb"] <= budget_mb * 1024
                                       and use["tier_bytes"] <= budget_mb * MIB)))
            print(f"  budget/{contender}: job {j + 1} ({name}): errors {row['errors']}, "
                  f"PFS {row['pfs_bytes'] / 1e6:.1f} MB"
                  + (f", caches running {during['running']}, RAM {during['ram_kb']} KiB, tier "
                     f"{during['tier_kb']} KiB of {budget_mb * 1024}; stopped for room: "
                     f"{row['stopped_for_room'] or '-'}" if contender == "node-cache" else ""),
                  flush=True)
        pfs = run.pfs_ops()["read_bytes"] - start
    finally:
        leftovers = site.close()
    return {"jobs": jobs, "budget_mb": budget_mb, "datasets_x_budget": total / (budget_mb * MIB),
            "pfs_bytes": pfs, "pfs_x": pfs / total, "checks": checks,
            "within_budget": all(c["ok"] for c in checks),
            "max_ram_kb": max(c["ram_kb"] for c in checks),
            "max_tier_kb": max(c["tier_kb"] for c in checks),
            "stopped_for_room": [s for j in jobs for s in j["stopped_for_room"]],
            "errors": sum(j["errors"] for j in jobs), "leftovers": leftovers}


def run_scenario(run, scenario, contender, direct=None):
    started = time.monotonic()
    if scenario == "sequential":
        res = sequential(run, contender)
    elif scenario == "side-by-side":
        res = side_by_side(run, contender, direct)
    else:
        res = budget(run, contender)
    res["seconds"] = time.monotonic() - started
    return res
