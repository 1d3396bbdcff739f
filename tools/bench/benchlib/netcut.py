"""A node whose network goes away while the job reads, and comes back.

With tools/bench/peers --netns every node's daemon sits in a network
namespace of its own, joined to the bridge by a veth pair. `link_cutter`
sets the host's end of one node's pair down part of the way into an epoch
and up again some seconds later, as a pulled cable or a switch port reset
would: the node's connections see no reset, only silence, and its
address stops answering. The link always comes back (a finally), whatever
happened in between.

`link_cutter` also measures, per node, how long after the link's return
every peer the node had up before the cut is up and usable again
(`peers_back`, from each daemon's peers.remote[] entries: up, not slow,
not dead). `cut_summary` reads, after the run, what every daemon says of it: whether
UCX failed on its asking or serving side and stays failed
(`transport_failed`: an abort inside UCX the daemon contained, and no
restart left), how often a side's transport was started again after UCX
failed (`transport_restarts`), whether the daemon is still alive, and
how often the cut node and the others connected to each other (`ups`,
`downs`) and took each other for gone (`dead`). A daemon that died is
reported as such, never left out.
"""
import time

REMOTE_KEYS = ("ups", "downs", "dead", "stalls", "timeouts", "hedges", "probes")


class LinkCut:
    """What a cut did: when the link went down and came up (seconds after
    the epoch's loaders started), what failed (an `ip` command), and per
    node the seconds from the link's return until every peer it had up
    before the cut was up, usable (not slow) and not taken for gone again
    (`back_s`; None: not within the limit, or not measured)."""

    def __init__(self):
        self.down_s = self.up_s = None
        self.error = ""
        self.back_s = {}

    def as_dict(self):
        return {"down_s": self.down_s, "up_s": self.up_s, "error": self.error,
                "back_s": self.back_s}


def _usable(entry):
    return bool(entry.get("up")) and not entry.get("slow") and not entry.get("dead")


def peers_back(remotes_of, asked, limit=30.0, step=0.1):
    """Polls remotes_of(node) (that node's peers.remote[] entries) until each
    node of `asked` (node -> names of the peers it had up before the cut)
    has them all usable again; returns node -> seconds (None past `limit`).
    A node whose stats cannot be read counts as not back."""
    start, back = time.monotonic(), {}
    while len(back) < len(asked) and time.monotonic() - start < limit:
        for node, names in asked.items():
            if node in back:
                continue
            try:
                entries = {r.get("name"): r for r in remotes_of(node)}
            except Exception:  # noqa: BLE001  (a stopped or dying daemon: not back)
                continue
            if all(_usable(entries.get(n, {})) for n in names):
                back[node] = round(time.monotonic() - start, 2)
        time.sleep(step)
    return {node: back.get(node) for node in asked}


def link_cutter(set_link, node, after, seconds, cut, remotes_of=None, nodes=0):
    """A function for peers' run_epoch `during`: `after` s in, set_link(node,
    False); `seconds` later set_link(node, True), in a finally. Records the
    times and any error in `cut` (a LinkCut). With remotes_of (node ->
    its peers.remote[]), also when each of the `nodes` nodes has its peers
    usable again after the link's return (cut.back_s)."""
    def run():
        start = time.monotonic()
        time.sleep(after)
        asked = {}
        if remotes_of is not None:
            for n in range(nodes):
                try:
                    asked[n] = [r.get("name") for r in remotes_of(n) if r.get("up")]
                except Exception:  # noqa: BLE001  (measured for the nodes that answer)
                    pass
        try:
            set_link(node, False)
            cut.down_s = time.monotonic() - start
            time.sleep(seconds)
        except Exception as e:  # noqa: BLE001  (reported by the epoch, not lost on this thread)
            cut.error = f"link down: {e}"
        finally:
            try:
                set_link(node, True)
                cut.up_s = time.monotonic() - start
            except Exception as e:  # noqa: BLE001
                cut.error = (cut.error + "; " if cut.error else "") + f"link up: {e}"
        if asked and not cut.error:
            cut.back_s = peers_back(remotes_of, asked)
    return run


def _remote_sum(stats, name=None):
    """ups, downs, dead, stalls, timeouts summed over this daemon's
    peers.remote[] (only the entries named `name`, if given)."""
    remote = (stats.get("peers") or {}).get("remote") or []
    pick = [r for r in remote if name is None or r.get("name") == name]
    return {k: sum(int(r.get(k) or 0) for r in pick) for k in REMOTE_KEYS}


def cut_summary(daemons, cut_node, read_stats):
    """After a cut run: per node alive, exit, transport_failed and
    transport_restarts (client, server); the daemons alive; the cut node's remote[] ups, downs, dead,
    stalls and timeouts summed (its view of the others) and the others'
    entries for it.
    read_stats(daemon) -> its .tierfs/stats (raises if unreadable)."""
    nodes, mine, theirs = [], None, dict.fromkeys(REMOTE_KEYS, 0)
    cut_name = f"node{cut_node}"
    for i, d in enumerate(daemons):
        entry = {"node": i, "alive": d.alive(), "client_transport_failed": None,
                 "server_transport_failed": None}
        if not entry["alive"]:
            code = d.proc.returncode if d.proc else None
            entry["exit"] = (f"killed by signal {-code}" if code is not None and code < 0
                             else f"exited {code}")
            entry["log"] = d.log_tail(5)
        else:
            try:
                stats = read_stats(d)
            except Exception as e:  # noqa: BLE001  (a hung or broken mount is a finding too)
                entry["stats_error"] = str(e)
                nodes.append(entry)
                continue
            peers = stats.get("peers") or {}
            entry["client_transport_failed"] = bool(peers.get("transport_failed"))
            entry["server_transport_failed"] = bool((peers.get("server") or {})
                                                    .get("transport_failed"))
            entry["transport_restarts"] = (int(peers.get("transport_restarts") or 0),
                                           int((peers.get("server") or {})
                                               .get("transport_restarts") or 0))
            entry["up"], entry["dead"] = peers.get("up"), peers.get("dead")
            if i == cut_node:
                mine = _remote_sum(stats)
            else:
                for k, v in _remote_sum(stats, cut_name).items():
                    theirs[k] += v
        nodes.append(entry)
    return {"node": cut_node, "nodes": nodes, "alive": sum(n["alive"] for n in nodes),
            "daemons": len(nodes),
            "transport_failed": [n["node"] for n in nodes
                                 if n["client_transport_failed"] or n["server_transport_failed"]],
            "transport_restarts": {n["node"]: n["transport_restarts"] for n in nodes
                                   if any(n.get("transport_restarts") or ())},
            "cut_node_remote": mine, "others_remote_for_cut_node": theirs}


def _flags(n):
    if not n["alive"]:
        return f"node {n['node']}: DIED ({n['exit']}): {n['log']}"
    if "stats_error" in n:
        return f"node {n['node']}: stats unreadable: {n['stats_error']}"
    return (f"node {n['node']}: client {str(n['client_transport_failed']).lower()}, "
            f"server {str(n['server_transport_failed']).lower()}")


def cut_markdown(name, cut, summary):
    """Lines for results.md on one contender's cut (cut: LinkCut.as_dict())."""
    lines = [f"- {name}: node {summary['node']}'s link down at {cut['down_s'] or 0:.2f} s into "
             f"the epoch, up at {cut['up_s'] or 0:.2f} s"
             + (f" (FAILED: {cut['error']})" if cut["error"] else "")
             + f"; daemons alive after the run: {summary['alive']} of {summary['daemons']}"]
    for n in summary["nodes"]:
        if not n["alive"]:
            what = "killed on purpose (--kill-node)" if n.get("killed") else "FAILURE"
            lines.append(f"  - {what}: {_flags(n)}")
    failed = [_flags(n) for n in summary["nodes"]
              if n["alive"] and (n.get("stats_error") or n["client_transport_failed"]
                                 or n["server_transport_failed"])]
    lines.append("  - transport failed and not started again: "
                 + ("; ".join(failed) if failed else
                    f"none of the {sum(n['alive'] for n in summary['nodes'])} daemons alive"))
    restarts = summary.get("transport_restarts") or {}
    lines.append("  - transport restarts (client, server): "
                 + ("; ".join(f"node {i}: {c}, {s}" for i, (c, s) in sorted(restarts.items()))
                    or "none"))
    back = cut.get("back_s") or {}
    if back:
        times = [v for v in back.values() if v is not None]
        lines.append("  - peers usable again after the link's return, per node (s): "
                     + ", ".join(f"{n}: {'-' if v is None else f'{v:.2f}'}"
                                 for n, v in sorted(back.items()))
                     + (f"; slowest {max(times):.2f}" if times else "")
                     + (f"; NOT BACK within the limit: {sorted(n for n, v in back.items() if v is None)}"
                        if len(times) < len(back) else ""))
    mine, theirs = summary["cut_node_remote"], summary["others_remote_for_cut_node"]
    if mine is not None:
        def text(counts):
            return ", ".join(f"{k} {counts[k]}" for k in REMOTE_KEYS)
        lines.append(f"  - node {summary['node']}'s remote[] summed: {text(mine)}; the others' "
                     f"entries for it: {text(theirs)}")
    return lines
