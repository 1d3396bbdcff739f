"""An epoch of tools/bench/peers: each rank's share of the permutation
(epoch_shares), one loader per rank at once (run_epoch; the loader itself
is rank_loader, the script's --rank-loader mode), a node stopped or its
link cut during it (stopper, together), and its figures: the daemons'
counters (daemon_figures, node_stats, delta), their processes
(process_figures) and the epoch's row of the results (epoch_row). Used by
tools/bench/peers and benchlib/peers_contenders.py."""
import json
import os
import random
import resource
import signal
import subprocess
import threading
import time

from .peers_daemons import PYTHON, Failed, read_json

# The script whose --rank-loader mode runs rank_loader, one per rank.
PEERS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "peers")
PEER_KEYS = ("fetched_chunks", "fetched_bytes", "served_chunks", "served_bytes",
             "source_fallbacks", "source_bytes_saved", "latency_us", "read_here", "adopted")


def rank_loader(argv):
    """Internal mode (`peers --rank-loader ROOT LIST THREADS [PACE_MS]`):
    reads every file of LIST (lines 'SIZE<TAB>PATH', PATH relative to ROOT)
    whole, with THREADS threads taking the next file in list order, as a
    DataLoader's workers do, each spending PACE_MS after each file (the
    model's step: paced readers, so that many nodes on few cores measure
    the protocol, not CPU starvation); prints one JSON line: rank start/end
    (CLOCK_MONOTONIC, the same clock in every process), files read, bytes,
    errors (an error or a size other than SIZE), the first error."""
    root, list_path, threads = argv[0], argv[1], int(argv[2])
    pace = float(argv[3]) / 1000 if len(argv) > 3 else 0.0
    with open(list_path) as f:
        items = [(int(size), path) for size, path in (line.rstrip("\n").split("\t", 1) for line in f)]
    lock, state = threading.Lock(), {"next": 0, "files": 0, "bytes": 0, "errors": 0, "first": ""}

    def worker():
        buf = bytearray(1 << 20)
        while True:
            with lock:
                i = state["next"]
                state["next"] += 1
            if i >= len(items):
                return
            size, path = items[i]
            n, error = 0, ""
            try:
                with open(os.path.join(root, path), "rb", buffering=0) as f:
                    while True:
                        got = f.readinto(buf)
                        if not got:
                            break
                        n += got
                if n != size:
                    error = f"{path}: read {n} bytes, expected {size}"
            except OSError as e:
                error = f"{path}: {e.strerror or e}"
            with lock:
                state["files"] += 1
                state["bytes"] += n
                if error:
                    state["errors"] += 1
                    state["first"] = state["first"] or error
            if pace:
                time.sleep(pace)

    start = time.monotonic()
    pool = [threading.Thread(target=worker) for _ in range(max(1, threads))]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    end = time.monotonic()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"start": start, "end": end, "seconds": end - start, "files": state["files"],
                      "cpu_s": usage.ru_utime + usage.ru_stime,
                      "bytes": state["bytes"], "errors": state["errors"],
                      "first_error": state["first"]}))
    return 0


def epoch_shares(n_files, nodes, seed, epoch):
    """Each rank's indices in one epoch, as torch's DistributedSampler(shuffle,
    drop_last=False) makes them: one permutation for all ranks, padded with
    its own head to a multiple of `nodes`, rank r takes r::nodes."""
    order = list(range(n_files))
    random.Random(seed + epoch).shuffle(order)
    total = -(-n_files // nodes) * nodes
    order += order[:total - n_files]
    return [order[r::nodes] for r in range(nodes)]


def run_epoch(roots, files, shares, list_dir, threads, timeout, pace_ms=0.0, during=None):
    """Runs one loader per rank at once; returns their JSON results. Raises
    Failed on a timeout or a loader that did not finish. `during`, if
    given, runs on a thread of its own once the loaders are started (a
    node stopped and continued, say)."""
    procs = []
    try:
        for r, (root, share) in enumerate(zip(roots, shares)):
            path = os.path.join(list_dir, f"rank{r}.txt")
            with open(path, "w") as f:
                f.writelines(f"{files[i][1]}\t{files[i][0]}\n" for i in share)
            procs.append(subprocess.Popen([PYTHON, PEERS, "--rank-loader", root,
                                           path, str(threads), str(pace_ms)],
                                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
        side = threading.Thread(target=during, daemon=True) if during else None
        if side:
            side.start()
        deadline = time.monotonic() + timeout
        out = []
        for r, p in enumerate(procs):
            try:
                stdout, stderr = p.communicate(timeout=max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise Failed(f"rank {r}'s loader still reading after {timeout} s")
            if p.returncode != 0:
                raise Failed(f"rank {r}'s loader exited {p.returncode}: {stderr.strip()[-300:]}")
            out.append(json.loads(stdout))
        if side:
            side.join(timeout=max(1, deadline - time.monotonic()))
        return out
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass


def deep_sum(obj, key):
    """The value of `key` in a stats group: the group's own number if it has
    one, else the sum over its sub-groups and lists (per-peer entries), so
    the figure is found wherever the daemon puts it; None if nowhere."""
    if isinstance(obj, dict):
        if isinstance(obj.get(key), (int, float)) and not isinstance(obj.get(key), bool):
            return obj[key]
        children = obj.values()
    elif isinstance(obj, list):
        children = obj
    else:
        return None
    found = [v for v in (deep_sum(c, key) for c in children) if v is not None]
    return sum(found) if found else None


def daemon_figures(stats):
    """The counters of one tierfs daemon that the table uses (None: absent)."""
    peers = stats.get("peers")
    out = {"source_bytes": deep_sum(stats.get("reads", {}), "source_bytes"),
           "promoted_bytes": deep_sum(stats.get("promotions", {}), "bytes")}
    for k in PEER_KEYS + ("up", "down", "dead"):
        out["peer_" + k] = deep_sum(peers, k) if isinstance(peers, dict) else None
    return out


def delta(after, before):
    """after - before per key; None where a counter is absent or not a number."""
    return {k: after[k] - (before.get(k) or 0) if isinstance(after.get(k), (int, float)) else None
            for k in after}


def sum_nodes(figures, key):
    values = [f[key] for f in figures if f.get(key) is not None]
    return sum(values) if values else None


def node_stats(daemons, gone=()):
    """Each daemon's figures; a daemon of `gone` (killed on purpose) has
    none. Raises Failed if another died."""
    out = []
    for i, d in enumerate(daemons):
        if i in gone:
            out.append(daemon_figures({}))
            continue
        if not d.alive():
            code = d.proc.returncode if d.proc else None
            how = f"killed by signal {-code}" if code and code < 0 else f"exited {code}"
            raise Failed(f"{d.name} died ({how}): {d.log_tail()}")
        out.append(daemon_figures(read_json(os.path.join(d.mnt, ".tierfs", "stats"))))
    return out


def process_figures(daemons):
    """Per daemon: threads, open descriptors, sockets among them, resident
    memory (MiB): what a node pays for the job's size."""
    out = []
    for d in daemons:
        pid = d.proc.pid
        fds = sockets = 0
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                fds += 1
                try:
                    sockets += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
                except OSError:
                    pass
            status = dict(line.split(":", 1) for line in open(f"/proc/{pid}/status"))
            rss = int(status["VmRSS"].split()[0])
        except (OSError, KeyError):  # gone (a zombie has no memory)
            continue
        out.append({"threads": int(status["Threads"]), "fds": fds, "sockets": sockets,
                    "rss_mib": rss / 1024})
    return out


def together(sides):
    """One `during` for run_epoch that runs every function of `sides` at
    once (a node stopped and another cut); None if there are none."""
    if len(sides) < 2:
        return sides[0] if sides else None

    def run():
        threads = [threading.Thread(target=f, daemon=True) for f in sides]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return run


def stopper(daemon, after, seconds):
    """A node that stalls: SIGSTOP `after` s into the epoch, SIGCONT `seconds` later."""
    def run():
        time.sleep(after)
        if daemon.alive():
            os.kill(daemon.proc.pid, signal.SIGSTOP)
            try:
                time.sleep(seconds)
            finally:
                os.kill(daemon.proc.pid, signal.SIGCONT)
    return run


def epoch_row(run, epoch, shares, ranks, pfs, nodes, nodes_now, daemon_cpu=None, lost=()):
    """One epoch's figures. The ranks of `lost` (a node killed during the
    epoch) count for nothing: their reads failed with their daemon."""
    want = sum(len(s) for i, s in enumerate(shares) if i not in lost)
    counted = [r for i, r in enumerate(ranks) if i not in lost]
    time_s = max(r["seconds"] for r in ranks)
    peer_bytes = sum_nodes(nodes, "peer_fetched_bytes")
    disturbed = run.args.stop_node if run.args.stop_node is not None else run.args.cut_node
    return {
        # CPU seconds over the epoch: the daemons', and the loaders' (ranks)
        "daemon_cpu_s": daemon_cpu, "reader_cpu_s": sum(r.get("cpu_s", 0) for r in ranks),
        # the job's fetch rate: bytes from peers over the epoch (MB/s), and
        # that against the link ucx_perftest measured in the same run
        "job_fetch_mb_s": peer_bytes / time_s / 1e6 if peer_bytes and time_s else None,
        # On loopback every node shares the one link (the host's CPU): the
        # job's rate against it. With --netns each node has a link of its
        # own: a node's inbound rate (the mean) against it.
        "link_ratio": (peer_bytes / (run.args.nodes if run.net else 1) / time_s / 1e6
                       / run.link["mb_s"]
                       if peer_bytes and time_s and run.link.get("mb_s") else None),
        "epoch": epoch + 1,
        "time_s": time_s,
        "rank_s": [r["seconds"] for r in ranks],
        # --stop-node (or --cut-node): the slowest of the other ranks (the
        # stopped node's own rank waits for its daemon)
        "others_s": (max(r["seconds"] for i, r in enumerate(ranks) if i != disturbed)
                     if disturbed is not None and len(ranks) > 1 else None),
        "span_s": max(r["end"] for r in ranks) - min(r["start"] for r in ranks),
        "files": sum(r["files"] for r in ranks), "files_expected": want,
        "unique_files": len({i for s in shares for i in s}),
        "bytes": sum(r["bytes"] for r in ranks),
        "errors": sum(r["errors"] for r in counted) + (want - sum(r["files"] for r in counted)),
        "first_error": next((r["first_error"] for r in counted if r["first_error"]), ""),
        "pfs_read_bytes": pfs["read_bytes"], "pfs_reads": pfs["reads"],
        "pfs_meta_ops": pfs["meta_ops"], "pfs_opens": pfs["opens"],
        "pfs_pct": 100.0 * pfs["read_bytes"] / run.bytes,
        "peer_bytes": peer_bytes,
        "peer_chunks": sum_nodes(nodes, "peer_fetched_chunks"),
        "fetch_mb_s": fetch_rate(nodes),
        "served_bytes": sum_nodes(nodes, "peer_served_bytes"),
        "source_fallbacks": sum_nodes(nodes, "peer_source_fallbacks"),
        # chunks whose home had none: read by the asker, handed to the home
        "read_here": sum_nodes(nodes, "peer_read_here"),
        "handed": sum_nodes(nodes, "peer_adopted"),
        "daemon_source_bytes": sum_nodes(nodes, "source_bytes"),
        "promoted_bytes": sum_nodes(nodes, "promoted_bytes"),
        "peers_up": [n["peer_up"] for n in nodes_now], "peers_down": [n["peer_down"] for n in nodes_now],
        "peers_dead": [n["peer_dead"] for n in nodes_now],
        # per node: counter deltas over the epoch; up and down (gauges) at its end
        "nodes": [dict(d, peer_up=n["peer_up"], peer_down=n["peer_down"], peer_dead=n["peer_dead"])
                  for d, n in zip(nodes, nodes_now)],
    }


def fetch_rate(nodes):
    """MB/s of one fetch: the bytes fetched over the summed fetch times."""
    fetched, us = sum_nodes(nodes, "peer_fetched_bytes"), sum_nodes(nodes, "peer_latency_us")
    return fetched / us if fetched and us else None
