"""The link the peers talk over, measured by UCX itself, and CPU time.

`measure_link` runs Debian's `ucx_perftest` (ucx-utils) as a server and a
client over the same transport the daemons use (UCX_TLS=tcp) and the same
path (loopback, or from one node's network namespace to another's), with
messages of a fetch's size, and returns its bandwidth and what it cost in
CPU: the figure a peer fetch rate is held against in the same run.

`cpu_seconds(pid)` reads a process's user + system time from /proc, so a
benchmark can say how much CPU a byte cost, which (unlike a rate on a
shared 2-core host) holds whatever else runs.
"""
import os
import re
import resource
import shutil
import subprocess
import time

_TICK = os.sysconf("SC_CLK_TCK")
_FINAL = re.compile(r"^Final:\s+(\d+)\s+\S+\s+\S+\s+\S+\s+(\S+)\s+(\S+)", re.M)


def cpu_seconds(pid):
    """User + system CPU seconds of process `pid` and its threads, or None
    if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime


def children_cpu():
    """CPU seconds of the waited-for children of this process so far."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def measure_link(size, count, server_wrap=None, client_wrap=None, server_address="127.0.0.1",
                 port=13337, timeout=120):
    """ucx_perftest's active-message bandwidth test (-t ucp_am_bw, messages
    of `size` bytes, `count` of them) from a client to a server. The wraps
    turn a command into one run elsewhere (e.g. in a network namespace).
    Returns {"mb_s", "cpu_s_per_gb", "size", "count"} or {"error": why}."""
    perftest = shutil.which("ucx_perftest")
    if perftest is None:
        return {"error": "ucx_perftest is not installed (Debian's ucx-utils)"}
    env = dict(os.environ, UCX_TLS="tcp")
    base = [perftest, "-t", "ucp_am_bw", "-s", str(size), "-n", str(count), "-p", str(port)]
    server_cmd = (server_wrap or (lambda c: c))(base)
    client_cmd = (client_wrap or (lambda c: c))(base[:1] + [server_address] + base[1:])
    cpu0 = children_cpu()
    server = subprocess.Popen(server_cmd, env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out, deadline = "", time.monotonic() + timeout
        for _ in range(50):  # until the server listens
            time.sleep(0.2)
            client = subprocess.run(client_cmd, env=env, stdin=subprocess.DEVNULL,
                                    capture_output=True, text=True,
                                    timeout=max(1, deadline - time.monotonic()))
            out = client.stdout + client.stderr
            if client.returncode == 0 or server.poll() is not None:
                break
        server.wait(timeout=max(1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        return {"error": f"ucx_perftest did not finish in {timeout} s"}
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    m = _FINAL.search(out)
    if m is None:
        return {"error": "ucx_perftest printed no result: " + out.strip()[-300:]}
    # Its "overall" bandwidth is in MB/s of 2^20 bytes.
    mb_s = float(m.group(3)) * (1 << 20) / 1e6
    moved_gb = size * count / 1e9
    cpu = children_cpu() - cpu0  # both processes, polling as UCX does
    return {"mb_s": mb_s, "cpu_s_per_gb": cpu / moved_gb if moved_gb else None,
            "size": size, "count": count}
