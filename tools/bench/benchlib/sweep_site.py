"""A node of tools/bench/sweep: one site tree per scenario and contender
(Site: the config file the prolog and epilog read through
TIERFS_SLURM_CONF, fake scancel/scontrol/squeue, the jobs run as slurmd
runs them: as root, no PATH, Slurm's variables), the second user
(TestUser, made as test/integration/harness.py makes it), the epoch reader
(read_epochs: tools/bench's tierfs-bench, as root or as that user) and
what the node shows: the node caches (node_caches), the daemons' memory
(daemon_memory). Everything a Site starts is stopped by Site.close().
Used by tools/bench/sweep and benchlib/sweep_scenarios.py."""
import json
import os
import pwd
import signal
import subprocess
import time

from .peers_daemons import mount_entry, run_bounded

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(os.path.dirname(HERE))
PROLOG = os.path.join(REPO, "tools", "slurm", "tierfs-prolog")
EPILOG = os.path.join(REPO, "tools", "slurm", "tierfs-epilog")
USER_NAME = "tierfs-t-sweep"
USER_COMMENT = "tierfs integration tests"  # as harness.TEST_ACCOUNT: a test account


class JobFailed(RuntimeError):
    """A prolog, an epilog or a reader failed; the message says how."""


class TestUser:
    """The second user: made with useradd (a system account, no home) unless
    it exists; removed by remove() only if made here."""

    def __init__(self):
        self.made = False
        try:
            pw = pwd.getpwnam(USER_NAME)
        except KeyError:
            subprocess.run(["useradd", "--system", "--no-create-home", "--shell",
                            "/usr/sbin/nologin", "--comment", USER_COMMENT, USER_NAME],
                           check=True, capture_output=True, timeout=30)
            self.made = True
            pw = pwd.getpwnam(USER_NAME)
        if pw.pw_uid == 0:
            raise RuntimeError(f"{USER_NAME} is uid 0")
        self.uid, self.gid = pw.pw_uid, pw.pw_gid

    def remove(self):
        if self.made:
            subprocess.run(["userdel", USER_NAME], capture_output=True, timeout=30)
            self.made = False


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def read_epochs(bench, root, epochs, threads, seed, user=None, drop=False, timeout=1800):
    """tierfs-bench over `root`: every file once per epoch in a seeded shuffled
    order, `threads` workers, as `user` (uid, gid) or root, the page cache
    dropped before each epoch if `drop`. Returns its epoch rows (wall_s,
    files, bytes, errors). Raises JobFailed if it fails."""
    cmd = [bench, root, "--epochs", str(epochs), "--workers", str(threads), "--seed", str(seed),
           "--json", "-", "--allow-errors"] + (["--drop-caches"] if drop else [])
    if user is not None:
        cmd = ["setpriv", f"--reuid={user[0]}", f"--regid={user[1]}", "--clear-groups", "--"] + cmd
    code, out = run_bounded(cmd, timeout, cwd="/")
    rows = [json.loads(line) for line in out.decode(errors="replace").splitlines()
            if line.startswith("{")]
    epochs_read = [r for r in rows if r.get("phase") == "epoch"]
    if code != 0 or len(epochs_read) != epochs:
        tail = out.decode(errors="replace").strip().splitlines()[-2:]
        raise JobFailed(f"reader over {root} exited {code}: {' | '.join(tail)}")
    return epochs_read


class Site:
    """One node's Slurm site for one scenario and contender, below `root`."""

    def __init__(self, root, bin_dir, settings):
        self.root = root
        self.mount_root = os.path.join(root, "mnt")
        self.state_root = os.path.join(root, "state")
        self.scratch = os.path.join(root, "scratch")
        self.node_root = os.path.join(root, "node")
        self.cancelled = os.path.join(root, "cancelled")
        os.makedirs(self.scratch)
        os.chmod(root, 0o755)
        os.chmod(self.scratch, 0o755)
        fakes = {"scancel": f'#!/bin/sh\necho "$@" >> {self.cancelled}\n',
                 "scontrol": f'#!/bin/sh\nprintf "%s\\n" "$*" >> {root}/scontrol-calls\n',
                 "squeue": "#!/bin/sh\nexit 1\n"}
        for name, text in fakes.items():
            with open(os.path.join(root, name), "w") as f:
                f.write(text)
            os.chmod(os.path.join(root, name), 0o755)
        conf = {"TIERFS_BIN": os.path.join(bin_dir, "tierfs"), "MOUNT_ROOT": self.mount_root,
                "LOCAL_SCRATCH": self.scratch, "STATE_ROOT": self.state_root,
                "TIER_MIN_MB": 1, "RAM_MIN_MB": 1, "STEP_TIMEOUT": 10,
                "NODE_CACHE_ROOT": self.node_root, "NODE_CACHE_IDLE": 3600,
                "SCANCEL": os.path.join(root, "scancel"),
                "SCONTROL": os.path.join(root, "scontrol"),
                "SQUEUE": os.path.join(root, "squeue")}
        conf.update(settings)
        self.conf = os.path.join(root, "slurm.conf")
        with open(self.conf, "w") as f:
            f.write("".join(f"{k}={v}\n" for k, v in conf.items()))
        os.chmod(self.conf, 0o644)
        self.settings = conf
        self.jobs = {}  # job id -> env of its prolog, until its epilog ran
        self.log = os.path.join(root, "scripts.log")
        self.cache_keys = set()  # the node caches seen (their cgroups are removed at close)

    def env(self, job, script, user, dataset, mem_mb):
        uid, gid, name = (0, 0, "root") if user is None else (user[0], user[1], USER_NAME)
        env = {"SLURM_JOB_ID": str(job), "SLURM_JOBID": str(job), "SLURM_JOB_USER": name,
               "SLURM_JOB_UID": str(uid), "SLURM_JOB_GID": str(gid),
               "SLURM_JOB_NODELIST": "node001", "SLURM_JOB_PARTITION": "gpu",
               "SLURM_JOB_ACCOUNT": "ml", "SLURM_CLUSTER_NAME": "sweep",
               "SLURMD_NODENAME": "node001", "TIERFS_SLURM_CONF": self.conf,
               "SLURM_SCRIPT_CONTEXT": f"{script}_slurmd", "TIERFS_DATASET": dataset}
        if mem_mb:
            env["SLURM_MEM_PER_NODE"] = str(mem_mb)
        return env

    def run_script(self, path, env):
        start = time.monotonic()
        proc = subprocess.run([path], env=env, capture_output=True, text=True, timeout=600,
                              cwd="/")
        with open(self.log, "a") as f:
            f.write(f"== {os.path.basename(path)} job {env['SLURM_JOB_ID']} exit "
                    f"{proc.returncode}\n{proc.stderr}")
        return proc, time.monotonic() - start

    def prolog(self, job, dataset, user=None, mem_mb=None):
        """Runs the prolog of `job`; returns (its mount point, seconds, stderr).
        Raises JobFailed if it failed, cancelled the job or mounted nothing."""
        env = self.env(job, "prolog", user, dataset, mem_mb)
        self.jobs[job] = env
        proc, seconds = self.run_script(PROLOG, env)
        mnt = os.path.join(self.mount_root, str(job))
        cancelled = os.path.exists(self.cancelled) and str(job) in open(self.cancelled).read()
        if proc.returncode != 0 or cancelled or mount_entry(mnt) is None:
            why = [l for l in proc.stderr.splitlines() if ": err: " in l][-2:] \
                or proc.stderr.strip().splitlines()[-2:]
            raise JobFailed(f"prolog of job {job} exited {proc.returncode}"
                            + (", cancelled it" if cancelled else "")
                            + ("" if mount_entry(mnt) else ", nothing mounted") + ": "
                            + " | ".join(why))
        return mnt, seconds, proc.stderr

    def epilog(self, job):
        env = dict(self.jobs.pop(job), SLURM_SCRIPT_CONTEXT="epilog_slurmd")
        proc, seconds = self.run_script(EPILOG, env)
        if proc.returncode != 0:
            raise JobFailed(f"epilog of job {job} exited {proc.returncode}: "
                            + " | ".join(proc.stderr.strip().splitlines()[-2:]))
        return seconds

    def daemon_pids(self):
        """Pids of the tierfs daemons serving this site (the jobs' and the node caches')."""
        pids = []
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/comm") as f:
                    if f.read().strip() != "tierfs":
                        continue
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    args = f.read().split(b"\0")
            except OSError:
                continue
            if any(a.startswith(self.root.encode() + b"/") for a in args):
                pids.append(int(pid))
        return pids

    def close(self):
        """Epilogs of the jobs still there, then the node caches stopped (no
        epilog stops one), then anything left below root killed and unmounted."""
        errors = []
        for job in list(self.jobs):
            try:
                self.epilog(job)
            except (JobFailed, subprocess.SubprocessError, OSError) as e:
                errors.append(str(e))
        for key in node_caches(self).keys():
            mnt = os.path.join(self.node_root, key, "mnt")
            if mount_entry(mnt) is not None:
                run_bounded(["fusermount3", "-u", mnt], 20)
        deadline = time.monotonic() + 15
        while self.daemon_pids() and time.monotonic() < deadline:
            time.sleep(0.1)
        for pid in self.daemon_pids():
            errors.append(f"tierfs pid {pid} still running: killed")
            os.kill(pid, signal.SIGKILL)
        with open("/proc/self/mountinfo") as f:
            left = [l.split()[4] for l in f if l.split()[4].startswith(self.root + "/")]
        for mnt in sorted(left, reverse=True):
            run_bounded(["umount", "-l", mnt], 20)
        for cgroup in ("/sys/fs/cgroup/tierfs", "/sys/fs/cgroup/memory/tierfs"):
            for name in (os.listdir(cgroup) if os.path.isdir(cgroup) else ()):
                if name.startswith("node_") and name[5:] in self.cache_keys:
                    try:
                        os.rmdir(os.path.join(cgroup, name))
                    except OSError:
                        pass
        return errors


def node_caches(site):
    """{key: {...}} of the node caches in site's NODE_CACHE_ROOT: running or
    not (pid file naming a live tierfs and its mount there), the budgets the
    scripts recorded (ram_kb, tier_kb), whether its tier directory exists
    and the bytes in it, its dataset."""
    caches = {}
    root = site.node_root
    tier_root = site.settings.get("NODE_CACHE_TIER_ROOT") or os.path.join(site.scratch, "tierfs-node")
    for key in sorted(os.listdir(root)) if os.path.isdir(root) else ():
        d = os.path.join(root, key)
        if len(key) != 16 or not os.path.isdir(d):
            continue
        site.cache_keys.add(key)

        def value(name, default=0):
            try:
                with open(os.path.join(d, name)) as f:
                    return f.read().strip()
            except OSError:
                return default
        pid, running = value("pid", ""), False
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/comm") as f:
                    running = f.read().strip() == "tierfs"
            except OSError:
                pass
        running = running and mount_entry(os.path.join(d, "mnt")) is not None
        tier = os.path.join(tier_root, key)
        used = 0
        for dirpath, _, names in os.walk(tier):
            for n in names:
                try:
                    used += os.lstat(os.path.join(dirpath, n)).st_blocks * 512
                except OSError:
                    pass
        caches[key] = {"running": running, "pid": int(pid) if pid.isdigit() else None,
                       "ram_kb": int(value("ram_kb") or 0), "tier_kb": int(value("tier_kb") or 0),
                       "size_kb": int(value("size_kb") or 0), "tier_dir": os.path.isdir(tier),
                       "tier_bytes": used, "dataset": value("dataset", "?")}
    return caches


def daemon_memory(site):
    """(sum of VmRSS of the site's tierfs daemons, sum of their cgroups'
    memory.current (v2) or memory.usage_in_bytes (v1), or None), bytes."""
    rss, cgroups = 0, set()
    for pid in site.daemon_pids():
        try:
            with open(f"/proc/{pid}/status") as f:
                rss += next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmRSS:"))
            with open(f"/proc/{pid}/cgroup") as f:
                for line in f:
                    _, controllers, path = line.rstrip("\n").split(":", 2)
                    if "/tierfs/" not in path:
                        continue
                    if controllers == "":
                        cgroups.add(f"/sys/fs/cgroup{path}/memory.current")
                    elif "memory" in controllers.split(","):
                        cgroups.add(f"/sys/fs/cgroup/memory{path}/memory.usage_in_bytes")
        except (OSError, StopIteration, ValueError):
            continue
    total = None
    for path in cgroups:
        try:
            with open(path) as f:
                total = (total or 0) + int(f.read())
        except (OSError, ValueError):
            pass
    return rss, total
