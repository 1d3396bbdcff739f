"""The contenders of tools/bench/peers: the run's fixed parts (Run: pfs-sim,
the dataset, options; make_dataset), a contender's daemons started
(prepare, start_nodes: a tierfs per node, with peers a private munged, the
peers file and a job id) and its epochs run, measured and printed
(run_contender), the link measured before the peers contenders
(measure_run_link). Used by tools/bench/peers."""
import json
import os
import platform
import shutil
import subprocess
import time

from . import link as linklib
from . import munged as munge
from . import netcut
from .peers_daemons import (PYTHON, Daemon, Failed, Skip, drop_caches, free_ports, read_json,
                            run_bounded)
from .peers_epochs import (delta, epoch_row, node_stats, process_figures,
                           run_epoch, stopper, together)
from .peers_kill import Kill, kill_markdown, kill_summary, killer, shares_for
from .peers_net import Network
from .peers_report import row_line


class Run:
    """The run's fixed parts: pfs-sim, the dataset, its file list, options."""

    def __init__(self, args, work, out):
        self.args, self.work, self.out = args, work, out
        self.pfs = None
        self.slow_pfs = None  # --slow-node: that node's own, slower pfs-sim
        self.files = []      # (relative path, size), sorted
        self.bytes = 0
        self.net = None      # --netns: the Network
        self.link = {}       # ucx_perftest over the peers' link (measure_link)
        self.net_text = ""

    def pfs_ops(self):
        """pfs-sim's operation counters, the slow node's instance added."""
        ops = read_json(os.path.join(self.pfs.mnt, ".pfs-sim", "stats"))["ops"]
        if self.slow_pfs is not None:
            more = read_json(os.path.join(self.slow_pfs.mnt, ".pfs-sim", "stats"))["ops"]
            ops = {k: v + more.get(k, 0) if isinstance(v, (int, float)) else v
                   for k, v in ops.items()}
        return ops

    def source_of(self, node):
        """The PFS node `node` reads: --slow-node's reads a slower pfs-sim of the same data."""
        if self.slow_pfs is not None and node == self.args.slow_node:
            return self.slow_pfs.mnt
        return self.pfs.mnt

    def tierfs_cmd(self, node, options, bin_dir=None):
        mnt = os.path.join(self.work, "mnt", f"node{node}")
        return [os.path.join(bin_dir or self.args.bin_dir, "tierfs"), self.source_of(node), mnt,
                "-o", options], mnt


def measure_run_link(run):
    """ucx_perftest from node 1 to node 0 over the link the daemons use
    (loopback, or the namespaces' veths), 1 MiB messages as a fetch's
    pieces; printed, and kept in run.link."""
    net = run.net
    wraps = ({"server_wrap": lambda c: net.wrap(0, c), "client_wrap": lambda c: net.wrap(1, c),
              "server_address": Network.address(0)} if net else {})
    link = linklib.measure_link(1 << 20, 2000, **wraps)
    if "error" in link:
        print(f"link: not measured: {link['error']}", flush=True)
    else:
        print(f"link: ucx_perftest (ucp_am_bw, UCX_TLS=tcp, 1 MiB messages) node 1 -> node 0: "
              f"{link['mb_s']:.0f} MB/s, {link['cpu_s_per_gb']:.2f} CPU s per GB", flush=True)
    return link


def start_nodes(run, name, option_of, stack, env=None, bin_dir=None):
    """Starts one tierfs per node (option_of(node) -> -o string); returns the
    daemons. Each goes on `stack` before it starts, so the caller's finally
    stops it even if a later one fails."""
    daemons = []
    for node in range(run.args.nodes):
        cmd, mnt = run.tierfs_cmd(node, option_of(node), bin_dir)
        if run.net is not None:
            cmd = run.net.wrap(node, cmd)
        d = Daemon(f"tierfs node{node}", cmd, mnt,
                   os.path.join(run.work, "logs", f"{name}-node{node}.log"), env)
        daemons.append(d)
        stack.append(d)
        d.start()
    return daemons


def prepare(run, name, stack, result):
    """Sets a contender up; returns (roots, daemons, options text). Whatever
    it starts goes on `stack` (stopped in the caller's finally); facts about
    the setup go into `result`."""
    args = run.args
    tier = f"ram={int(run.bytes * args.tier_factor) // 1024}K,shutdown_timeout=10"
    if name == "direct":
        return [run.source_of(n) for n in range(args.nodes)], [], ""
    if name == "tierfs-node":
        daemons = start_nodes(run, name, lambda n: tier, stack)
        return [d.mnt for d in daemons], daemons, tier
    # tierfs-peers, tierfs-peers-paused, tierfs-peers-baseline
    bin_dir = args.bin_dir
    if name == "tierfs-peers-baseline":
        if not args.baseline_bin_dir:
            raise Skip("no --baseline-bin-dir")
        bin_dir = args.baseline_bin_dir
    help_text = run_bounded([os.path.join(bin_dir, "tierfs"), "--help"], 10)[1].decode()
    if "peer_timeout" not in help_text:
        raise Skip("this tierfs has no peers options (-o peers=...): a build from before peers")
    try:
        # In /tmp: munged wants its socket's directories open to all. One
        # munged serves every node here (a cluster has one per node): give it
        # a thread per two nodes, so it is not the job's bottleneck.
        m = munge.Munged(args=[f"--num-threads={max(2, min(32, args.nodes // 2))}"]).start()
    except munge.MungedMissing as e:
        raise Skip(str(e))
    except munge.MungedError as e:
        raise Failed(str(e))
    stack.append(m)
    result.update(munged_dir=m.dir, munged_pid=m.proc.pid)
    ports = free_ports(args.nodes)
    peers_file = os.path.join(run.work, "peers.txt")

    def address(n):
        return run.net.address(n) if run.net is not None else "127.0.0.1"

    with open(peers_file, "w") as f:
        f.write("# tools/bench/peers: the job's nodes, all on this machine ("
                + ("a network namespace each" if run.net is not None else "loopback") + ")\n")
        f.writelines(f"node{n} {address(n)}:{ports[n]}\n" for n in range(args.nodes))
    job = f"tierfs-bench-peers:{platform.node()}:{os.getpid()}:{int(time.time())}"
    common = (f"{tier},peers={peers_file},peer_job={job},"
              f"munge_socket={m.socket}" + (f",{args.peer_opts}" if args.peer_opts else ""))
    env = dict(os.environ)
    env.setdefault("UCX_TLS", "tcp")  # a network, as between real nodes
    daemons = start_nodes(
        run, name,
        lambda n: f"{common},peer_name=node{n},peer_port={ports[n]},peer_listen={address(n)}",
        stack, env, bin_dir)
    return ([d.mnt for d in daemons], daemons,
            common + ",peer_name=nodeI,peer_port=PORT_I,peer_listen=ADDRESS_I")


def wait_listening(daemons, timeout):
    """Waits until every node's peer service listens, as a job's prolog has
    them running before training starts (nodes connect to each other on
    first need, so nothing else is waited for). Returns the seconds waited;
    raises Failed after `timeout`."""
    start = time.monotonic()
    while True:
        listening = [read_json(os.path.join(d.mnt, ".tierfs", "stats"))["peers"]
                     .get("server", {}).get("listening") for d in daemons]
        if all(listening):
            return time.monotonic() - start
        if time.monotonic() - start > timeout:
            raise Failed(f"peer services not all listening after {timeout} s ({listening}); see "
                         "the daemons' logs in WORK/logs")
        time.sleep(0.1)


def spread(values):
    return f"{min(values):g}-{max(values):g}" if values else "-"


def save_stats(run, name, daemons):
    """Each daemon's last .tierfs/stats, kept for analysis: OUT/stats/NAME-nodeI.json
    (none for a daemon killed on purpose)."""
    os.makedirs(os.path.join(run.out, "stats"), exist_ok=True)
    for node, d in enumerate(daemons):
        if not d.alive() and node == run.args.kill_node:
            continue
        with open(os.path.join(run.out, "stats", f"{name}-node{node}.json"), "w") as f:
            json.dump(read_json(os.path.join(d.mnt, ".tierfs", "stats")), f, indent=1)


def remotes(daemons, n, gone):
    """Node n's peers.remote[]; raises Failed for a node killed on purpose
    (a cut's figures are for the nodes alive)."""
    if n in gone:
        raise Failed(f"node {n} was killed")
    return (read_json(os.path.join(daemons[n].mnt, ".tierfs", "stats"))
            .get("peers") or {}).get("remote") or []


def run_contender(run, name):
    """Runs one contender's epochs; returns its result dict (status ok,
    skipped or failed)."""
    args = run.args
    result = {"contender": name, "status": "ok", "note": "", "epochs": []}
    stack, daemons, cut, kill, gone = [], [], None, None, set()
    print(f"\n== {name} ==", flush=True)
    try:
        before = run.pfs_ops()
        start = time.monotonic()
        roots, daemons, options = prepare(run, name, stack, result)
        result.update(setup_s=time.monotonic() - start, options=options,
                      setup_pfs=delta(run.pfs_ops(), before))
        print(f"  setup {result['setup_s']:.2f} s ({result['setup_pfs']['meta_ops']} PFS metadata "
              f"operations){'; -o ' + options if options else ''}", flush=True)
        result["daemon_pids"] = [d.proc.pid for d in daemons]
        paused = name == "tierfs-peers-paused"
        if name.startswith("tierfs-peers"):
            result["listening_s"] = wait_listening(daemons, args.peer_wait)
            print(f"  every node's peer service listens after {result['listening_s']:.2f} s",
                  flush=True)
            if paused and args.start_pause:
                print(f"  pause of {args.start_pause:g} s before the first read", flush=True)
                time.sleep(args.start_pause)
        result["processes_start"] = process_figures(daemons)
        if daemons:
            raw = read_json(os.path.join(daemons[0].mnt, ".tierfs", "stats"))
            result["peers_group_keys"] = sorted(raw["peers"]) if isinstance(raw.get("peers"), dict) else None
        list_dir = os.path.join(run.work, "lists", name)
        os.makedirs(list_dir, exist_ok=True)
        for epoch in range(args.epochs):
            shares = shares_for(len(run.files), args.nodes, args.seed, epoch, gone)
            if paused and epoch and args.epoch_pause:
                time.sleep(args.epoch_pause)
            if not args.keep_caches:
                drop_caches()
            pfs0, nodes0 = run.pfs_ops(), node_stats(daemons, gone)
            cpu0 = [linklib.cpu_seconds(d.proc.pid) for d in daemons]
            sides, lost = [], set()
            if daemons and args.kill_node is not None and epoch == args.kill_epoch - 1:
                kill, lost = Kill(), {args.kill_node}
                sides.append(killer(daemons[args.kill_node], args.kill_after, kill))
            if daemons and args.stop_node is not None and epoch == args.stop_epoch - 1:
                sides.append(stopper(daemons[args.stop_node], args.stop_after, args.stop_s))
            if daemons and args.cut_node is not None and epoch == args.cut_epoch - 1:
                cut = netcut.LinkCut()
                sides.append(netcut.link_cutter(
                    run.net.set_link, args.cut_node, args.cut_after, args.cut_s, cut,
                    lambda n: remotes(daemons, n, gone), len(daemons)))
            ranks = run_epoch(roots, run.files, shares, list_dir, args.threads, args.timeout,
                              args.pace_ms, together(sides))
            if cut is not None and cut.error:
                raise Failed(f"epoch {epoch + 1}: node {args.cut_node}'s link: {cut.error}")
            if kill is not None and kill.error:
                raise Failed(f"epoch {epoch + 1}: node {args.kill_node} not killed: {kill.error}")
            gone |= lost  # the job goes on with the survivors
            pfs1, nodes1 = run.pfs_ops(), node_stats(daemons, gone)
            cpu1 = [linklib.cpu_seconds(d.proc.pid) for d in daemons]
            # (a daemon killed on purpose counts for nothing)
            cpu = [(a, b) for i, (a, b) in enumerate(zip(cpu0, cpu1)) if i not in gone]
            daemon_cpu = (sum(b - a for a, b in cpu)
                          if cpu and None not in [x for pair in cpu for x in pair] else None)
            row = epoch_row(run, epoch, shares, ranks, delta(pfs1, pfs0),
                            [delta(b, a) for a, b in zip(nodes0, nodes1)], nodes1, daemon_cpu,
                            lost)
            result["epochs"].append(row)
            print("  " + row_line(row, run.net is not None), flush=True)
            if row["errors"]:
                raise Failed(f"epoch {epoch + 1}: {row['errors']} read errors, first: {row['first_error']}")
        result["processes"] = process_figures(daemons)
        if daemons:
            pf = result["processes"]
            print(f"  per daemon: threads {spread([p['threads'] for p in pf])}, fds "
                  f"{spread([p['fds'] for p in pf])}, sockets {spread([p['sockets'] for p in pf])}, "
                  f"RSS {spread([round(p['rss_mib']) for p in pf])} MiB", flush=True)
        save_stats(run, name, daemons)
    except Skip as e:
        result.update(status="skipped", note=str(e))
        print(f"  skipped: {e}", flush=True)
    except (Failed, OSError, ValueError, subprocess.SubprocessError) as e:
        result.update(status="failed", note=str(e))
        print(f"  FAILED: {e}", flush=True)
    finally:
        if cut is not None:  # what every daemon says of the cut, the dead ones too
            result["cut"] = dict(netcut.cut_summary(
                daemons, args.cut_node,
                lambda d: read_json(os.path.join(d.mnt, ".tierfs", "stats"))),
                epoch=args.cut_epoch, link=cut.as_dict())
            for n in result["cut"]["nodes"]:
                n["killed"] = n["node"] in gone
            print("  " + "\n  ".join(netcut.cut_markdown(name, result["cut"]["link"],
                                                         result["cut"])), flush=True)
            if result["cut"]["alive"] < len(daemons) - len(gone) and result["status"] == "ok":
                result.update(status="failed", note="a daemon died (see the cut's lines)")
        if kill is not None:  # every node's PFS share while the node is gone, and after
            result["kill"] = kill_summary(result["epochs"], args.kill_node, args.kill_epoch,
                                          run.bytes, kill)
            print("  " + "\n  ".join(kill_markdown(name, result["kill"])), flush=True)
        for thing in reversed(stack):  # daemons first, then munged
            try:
                (thing.stop if isinstance(thing, Daemon) else thing.close)()
            except Exception as e:  # noqa: BLE001  (cleanup goes on whatever happened)
                print(f"  cleanup: {e}", flush=True)
    return result


def make_dataset(run):
    """The small-file dataset (mkdataset images, as tools/bench/run makes it)."""
    args = run.args
    path = os.path.join(run.work, "datasets", f"images-{args.files}-{args.mean_kb}k")
    if not os.path.isdir(path):
        cmd = [PYTHON, os.path.join(args.bin_dir, "mkdataset"), "images", path + ".tmp",
               "--files", str(args.files), "--classes", "10", "--mean-kb", str(args.mean_kb),
               "--seed", str(args.seed)]
        shutil.rmtree(path + ".tmp", ignore_errors=True)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, timeout=1800)
        os.rename(path + ".tmp", path)
    for dirpath, dirs, names in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for n in sorted(names):
            if not n.startswith("."):
                full = os.path.join(dirpath, n)
                run.files.append((os.path.relpath(full, path), os.path.getsize(full)))
    run.bytes = sum(size for _, size in run.files)
    return path
