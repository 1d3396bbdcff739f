"""tools/slurm under a real Slurm: a private slurmctld and two slurmd on this
host, jobs submitted with sbatch, srun and salloc by an unprivileged user.

The cluster: a private munged (auth/munge), one slurm.conf in a temporary
directory, slurmctld and `slurmd -N tfs-node1`, `slurmd -N tfs-node2` with
ports of their own, Prolog/Epilog = the repository's tierfs-prolog and
tierfs-epilog (through a two-line wrapper that names the node's site config:
two slurmd on one host need two MOUNT_ROOTs), PlugStackConfig loading the
SPANK plugin (tools/slurm/spank; the build's, else compiled here from the
source). The test runs in a private mount namespace whose /etc/hosts gives
each node a loopback address of its own (127.0.0.11, .12), so the two
daemons of a 2-node job can listen on the same peer port, as on two hosts;
every process it starts lives in that namespace, and all of them are ended
at the end, whatever failed.

Checked: `sbatch --tierfs=DATASET --tierfs-mount=NAME --tierfs-options=...`
gets a mount the job reads the dataset through, with its options and its RAM
capped at the job's --mem; so do `srun` (a job of its own) and `salloc`
(mounted before its command runs; an srun inside it makes a step, whose
--tierfs is ignored and said to be); the epilog leaves no daemon, mount,
tier or state; an option the site does not allow cancels the job, and says
why in its output file (written as the job's user) and its AdminComment,
and a missing dataset cancels an srun, saying why on its stderr, both nodes
staying idle; a ram= capped at --mem is said on srun's stderr and at the
end of a batch job's output file; a malformed plugin value is refused by sbatch,
before anything is submitted; a job cancelled while it reads is cleaned up;
a 2-node job's daemons become peers: a cold read hands the chunk to its
home, and the other node then fetches what it does not home instead of
reading SOURCE.

With TIERFS_PACKAGE_TEST=1 (or TIERFS_DEB=PATH), PackageUnderSlurm installs
the Debian package, sets the cluster up as tools/slurm/README.md says, runs a
--tierfs job, removes the package (dpkg -r) and runs a job without --tierfs:
it runs, sbatch says nothing of a plugin, both nodes stay idle.

Skipped (exit 77, the reason printed) unless root with FUSE, Slurm's daemons
and clients (slurmctld, slurmd, slurm-client), munged, a second user
(useradd), and either a built plugin or <slurm/spank.h> and a C compiler.
The job's daemon runs as the job's user where that user may open /dev/fuse,
else as root (RUN_AS_USER=no).
"""
import ctypes
import json
import os
import pathlib
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import harness

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tools", "bench"))
from benchlib import munged  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SLURM_DIR = os.path.join(REPO, "tools", "slurm")
SPANK_SOURCE = os.path.join(SLURM_DIR, "spank", "tierfs_spank.c")
NODES = {"tfs-node1": "127.0.0.11", "tfs-node2": "127.0.0.12"}
FIRST_JOB_ID = 7300000
SLURM_PROGRAMS = ("slurmctld", "slurmd", "sbatch", "srun", "salloc", "scontrol", "scancel",
                  "sinfo")
CLONE_NEWNS = 0x00020000
CLUSTER = None


def free_port(taken):
    """A port that was free a moment ago, below the ephemeral range (UCX's
    and the clients' ports come from there)."""
    low = int(pathlib.Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(max(1024, low - 20000), low)
        if port in taken:
            continue
        with socket.socket() as s:
            try:
                s.bind(("0.0.0.0", port))
            except OSError:
                continue
        taken.add(port)
        return port
    raise AssertionError("no free port below the ephemeral range")


def why_not_here():
    """'' if this machine can run the cluster, else why not."""
    if os.geteuid() != 0:
        return "slurmd and the prolog run as root; this is not root"
    missing = [p for p in SLURM_PROGRAMS if shutil.which(p, path="/usr/sbin:/usr/bin") is None]
    if missing:
        return f"{', '.join(missing)} not installed (Debian: slurmctld, slurmd, slurm-client)"
    if munged.find_munged() is None:
        return "munged is not installed (Debian: munge)"
    if shutil.which("unshare") is None or shutil.which("setpriv") is None:
        return "unshare or setpriv missing (util-linux)"
    return ""


def find_plugin(workdir):
    """The SPANK plugin: the build's (BIN_DIR/../lib), else compiled from the
    source into workdir; None if neither can be had."""
    for candidate in (os.path.join(harness.BIN_DIR, "..", "lib", "tierfs_spank.so"),
                      os.path.join(harness.BIN_DIR, "tierfs_spank.so")):
        if os.path.exists(candidate):
            return os.path.realpath(candidate)
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None or not os.path.exists("/usr/include/slurm/spank.h"):
        return None
    out = os.path.join(workdir, "tierfs_spank.so")
    subprocess.run([cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-O2", "-fPIC", "-shared", "-o",
                    out, SPANK_SOURCE], check=True, timeout=120)
    return out


def private_namespace(hosts):
    """From here on this process and its children have a mount namespace of
    their own, whose /etc/hosts is `hosts` (the real system is not changed)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS)")
    subprocess.run(["mount", "--make-rprivate", "/"], check=True, timeout=30)
    subprocess.run(["mount", "--bind", hosts, "/etc/hosts"], check=True, timeout=30)


def namespace_pids():
    """Every other process in this process's mount namespace: all that the test
    started, once private_namespace() has made one (before, every process)."""
    mine = os.readlink("/proc/self/ns/mnt")
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            try:
                if os.readlink(f"/proc/{name}/ns/mnt") == mine:
                    pids.append(int(name))
            except OSError:
                continue
    return pids


class Cluster:
    """slurmctld, two slurmd and munged, configured in self.dir."""

    def __init__(self, user):
        self.user = user
        self.dir = tempfile.mkdtemp(prefix="tierfs-slurm-real-")
        os.chmod(self.dir, 0o755)  # the job's user reads the dataset and the config
        self.procs, self.jobs = {}, []
        self.munged = None
        self.private = False  # in a mount namespace of its own: close() may end all in it

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    # ---- setting up ----

    def start(self):
        ports = set()
        self.ctld_port = free_port(ports)
        self.node_ports = {n: free_port(ports) for n in NODES}
        self.peer_port = free_port(ports)
        self.dataset = self.path("lustre", "imagenet")
        self.files = harness.make_files(self.dataset, 40, 64 * 1024)
        os.makedirs(self.path("jobs"), mode=0o1777)
        os.chmod(self.path("jobs"), 0o1777)
        self.plugin = find_plugin(self.dir)
        with open(self.path("hosts"), "w") as f:
            f.write("127.0.0.1 localhost\n")
            f.writelines(f"{addr} {name}\n" for name, addr in NODES.items())
        private_namespace(self.path("hosts"))
        self.private = True
        self.munged = munged.Munged(die_with_parent=False).start()
        fuse_for_user = harness.as_user(self.user, "test", "-w", "/dev/fuse").returncode == 0
        self.run_as_user = "yes" if fuse_for_user else "no"
        sys.stderr.write("test_slurm_real: the jobs' daemons run as "
                         + ("the job's user\n" if fuse_for_user else
                            "root (the job's user cannot open /dev/fuse: RUN_AS_USER=no)\n"))
        for i, node in enumerate(NODES):
            self.write_site_config(node, cgroup="auto" if i == 0 else "no")
        for script in ("prolog", "epilog"):
            with open(self.path(script), "w") as f:
                f.write("#!/bin/sh\n# The node's site config; the rest is the repository's script.\n"
                        f'TIERFS_SLURM_CONF={self.dir}/site-$SLURMD_NODENAME.conf\n'
                        "export TIERFS_SLURM_CONF\n"
                        f'exec {SLURM_DIR}/tierfs-{script} "$@" 2>>{self.dir}/$SLURMD_NODENAME.log\n')
            os.chmod(self.path(script), 0o755)
        with open(self.path("plugstack.conf"), "w") as f:
            f.write(f"required {self.plugin}\n")
        self.write_slurm_conf()
        os.makedirs(self.path("state"), mode=0o700)
        self.env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "SLURM_CONF": self.path("slurm.conf")}
        for node in NODES:
            os.makedirs(self.path("spool", node))
        self.start_slurm()

    def start_slurm(self):
        self.daemon("slurmctld", ["slurmctld", "-D", "-f", self.path("slurm.conf")])
        for node in NODES:
            self.daemon(node, ["slurmd", "-D", "-N", node, "-f", self.path("slurm.conf")])
        self.wait_idle(timeout=60)

    def restart_slurm(self):
        """slurmctld and both slurmd again, reading slurm.conf (and plugstack) anew."""
        for proc in self.procs.values():
            proc.terminate()
        for proc in self.procs.values():
            proc.wait(timeout=30)
        self.start_slurm()

    def write_site_config(self, node, cgroup):
        """/etc/tierfs/slurm.conf of `node`: its own directories, the peers' settings."""
        conf = {
            "TIERFS_BIN": harness.tierfs_bin(), "MOUNT_ROOT": self.path(node, "mnt"),
            "LOCAL_SCRATCH": self.path(node, "scratch"), "STATE_ROOT": self.path(node, "state"),
            "TIER_MIN_MB": 1, "RAM_MIN_MB": 1, "MOUNT_TIMEOUT": 30, "STEP_TIMEOUT": 5,
            "RUN_AS_USER": self.run_as_user, "PEER_PORT_BASE": self.peer_port,
            "PEER_PORT_COUNT": 1, "PEER_TIMEOUT": 3, "MUNGE_SOCKET": self.munged.socket,
            # Two slurmd on one host share a job's cgroup name: only one node uses it.
            "CGROUP": cgroup,
        }
        os.makedirs(self.path(node, "scratch"), mode=0o755)
        with open(self.path(f"site-{node}.conf"), "w") as f:
            f.write("".join(f"{k}={v}\n" for k, v in conf.items()))
            f.write("export UCX_TLS=tcp\n")  # the peers talk TCP on loopback, as across a network
        os.chmod(self.path(f"site-{node}.conf"), 0o644)

    def write_slurm_conf(self, prolog=None, epilog=None, plugstack=None):
        """slurm.conf: Prolog, Epilog and PlugStackConfig the test's own unless given."""
        d = self.dir
        lines = [
            "ClusterName=tierfstest", "SlurmctldHost=localhost(127.0.0.1)",
            f"SlurmctldPort={self.ctld_port}", "SlurmUser=root", "SlurmdUser=root",
            "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={self.munged.socket}",
            f"StateSaveLocation={d}/state", f"SlurmdSpoolDir={d}/spool/%n",
            f"SlurmctldPidFile={d}/slurmctld.pid", f"SlurmdPidFile={d}/slurmd-%n.pid",
            f"SlurmctldLogFile={d}/slurmctld.log", f"SlurmdLogFile={d}/slurmd-%n.log",
            "SlurmdDebug=debug", "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none", "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none", "SchedulerType=sched/builtin", "SelectType=select/linear",
            "MpiDefault=none", "ReturnToService=2", "KillWait=2", "MinJobAge=600",
            f"FirstJobId={FIRST_JOB_ID}",
            f"Prolog={prolog or d + '/prolog'}", f"Epilog={epilog or d + '/epilog'}",
            "PrologFlags=Alloc", "PrologEpilogTimeout=120",
            f"PlugStackConfig={plugstack or d + '/plugstack.conf'}",
        ]
        lines += [f"NodeName={n} NodeHostname={n} NodeAddr={a} Port={self.node_ports[n]} CPUs=1 "
                  "RealMemory=1000 State=UNKNOWN" for n, a in NODES.items()]
        lines.append("PartitionName=debug Nodes=ALL Default=YES MaxTime=10 State=UP")
        with open(self.path("slurm.conf"), "w") as f:
            f.write("\n".join(lines) + "\n")
        os.chmod(self.path("slurm.conf"), 0o644)

    def daemon(self, name, cmd):
        log = open(self.path(f"{name}.out"), "w")
        self.procs[name] = subprocess.Popen(cmd, env=self.env, stdin=subprocess.DEVNULL, stdout=log,
                                            stderr=subprocess.STDOUT)
        log.close()

    # ---- looking at it ----

    def logs(self):
        """The end of every daemon's and script's log, for a failure message."""
        out = []
        for name in ["slurmctld.log", "slurmctld.out"] + [f"{n}{s}" for n in NODES for s in
                                                           (".log", ".out")] + \
                    [f"slurmd-{n}.log" for n in NODES]:
            try:
                with open(self.path(name), errors="replace") as f:
                    out.append(f"--- {name}:\n" + "".join(f.readlines()[-25:]))
            except OSError:
                pass
        return "\n".join(out)

    def run(self, *cmd, user=None, timeout=30):
        """A Slurm command (as `user`, else root); CompletedProcess with text output."""
        if user is not None:
            cmd = harness.user_command(user, *cmd)
        return subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=timeout)

    def node_states(self):
        r = self.run("sinfo", "-h", "-N", "-o", "%N %T")
        return dict(line.split() for line in r.stdout.splitlines() if line.strip())

    def wait_idle(self, timeout=30):
        """Until both nodes are idle (no job, no epilog running)."""
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise AssertionError(f"{name} exited {proc.returncode}\n{self.logs()}")
        try:
            harness.wait_for(lambda: set(self.node_states().values()) == {"idle"}, timeout=timeout,
                             what="both nodes idle")
        except AssertionError as e:
            raise AssertionError(f"{e}: {self.node_states()}\n{self.logs()}") from None

    def job(self, job_id):
        """`scontrol show job` as a dict (one line, Key=Value)."""
        r = self.run("scontrol", "-o", "show", "job", str(job_id))
        info = {}
        for token in r.stdout.split():
            if "=" in token:
                key, value = token.split("=", 1)
                info.setdefault(key, value)
        if "AdminComment=" in r.stdout:  # a value with spaces: up to the next known key
            info["AdminComment"] = r.stdout.split("AdminComment=", 1)[1].split(" DerivedExitCode=")[0]
        return info

    def sbatch(self, *args, script):
        """Submits `script` as the test's user; the CompletedProcess (job id in .job)."""
        path = self.path("jobs", f"job-{len(self.jobs)}.sh")
        with open(path, "w") as f:
            f.write(script)
        os.chmod(path, 0o755)
        r = self.run("sbatch", "--parsable", f"--chdir={self.path('jobs')}",
                     f"--output={self.path('jobs')}/%j.out", *args, path, user=self.user)
        r.job = int(r.stdout.strip().split(";")[0]) if r.returncode == 0 else None
        if r.job is not None:
            self.jobs.append(r.job)
        return r

    def read_all(self, mount_root, name, *args):
        """Submits READ_ALL with sbatch `args`; the job's id once it COMPLETED
        having read every file through its mount (AssertionError else)."""
        r = self.sbatch(*args, script=READ_ALL.format(mount_root=mount_root, name=name,
                                                      dataset=self.dataset, jobs=self.path("jobs")))
        if r.returncode != 0:
            raise AssertionError(f"sbatch: {r.stderr}")
        info = self.wait_done(r.job)
        with open(self.path("jobs", f"{r.job}.out")) as f:
            out = f.read()
        if info["JobState"] != "COMPLETED" or f"READ {len(self.files)} FILES" not in out:
            raise AssertionError(f"job {r.job}: {info.get('JobState')}\n{out}\n{self.logs()}")
        return r.job

    def wait_done(self, job_id, timeout=90):
        """The job's final state, once its epilogs have finished too."""
        final = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
                 "BOOT_FAIL", "DEADLINE", "PREEMPTED"}
        info = {}

        def done():
            nonlocal info
            info = self.job(job_id)
            return info.get("JobState") in final and "COMPLETING" not in info.get("Reason", "") \
                and set(self.node_states().values()) <= {"idle", "drained", "draining", "down"}
        try:
            harness.wait_for(done, timeout=timeout, what=f"job {job_id} to end")
        except AssertionError as e:
            raise AssertionError(f"{e}: {info}\n{self.logs()}") from None
        return info

    def mnt(self, node, job_id, name=None):
        base = self.path(node, "mnt", str(job_id))
        return os.path.join(base, name) if name else base

    def nothing_left(self, job_id):
        """Why the job's tierfs is not all gone on every node ('' if it is)."""
        problems = []
        for node in NODES:
            for what, path in (("mount point", self.mnt(node, job_id)),
                               ("tier", self.path(node, "scratch", "tierfs-slurm", str(job_id))),
                               ("state", self.path(node, "state", str(job_id)))):
                if os.path.lexists(path):
                    problems.append(f"{node}: the job's {what} {path} is still there")
            problems += [f"{node}: {m} is still mounted" for m in harness.mounts_below(
                self.path(node, "mnt"))]
        daemons = harness.tierfs_pids(self.dir + "/")
        if daemons:
            problems.append(f"tierfs daemons still running: {daemons}")
        return "; ".join(problems)

    def read_as_user(self, path):
        r = harness.as_user(self.user, "cat", path)
        if r.returncode != 0:
            raise AssertionError(f"cat {path} as the job's user: {r.stderr.decode()}")
        return r.stdout

    # ---- tearing down ----

    def close(self):
        """Ends everything the test started, whatever state it is in."""
        if self.jobs and self.procs.get("slurmctld") and self.procs["slurmctld"].poll() is None:
            self.run("scancel", *map(str, self.jobs), timeout=15)
            try:  # let the epilogs clear what they can
                harness.wait_for(lambda: not self.run("squeue", "-h").stdout.strip(), timeout=20)
            except (AssertionError, subprocess.TimeoutExpired):
                pass
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        if self.munged is not None:
            self.munged.close()
        # slurmstepd, jobs, tierfs daemons: all in this mount namespace, nowhere else.
        for _ in range(3 if self.private else 0):
            pids = namespace_pids()
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.5)
        for mnt in sorted(harness.mounts_below(self.dir), reverse=True):
            harness.force_unmount(mnt)
        for job_id in self.jobs:  # the daemon cgroups an interrupted epilog left
            for cg in (f"/sys/fs/cgroup/tierfs/job_{job_id}",
                       f"/sys/fs/cgroup/memory/tierfs/job_{job_id}"):
                try:
                    os.rmdir(cg)
                except OSError:
                    pass
        shutil.rmtree(self.dir, ignore_errors=True)


def start_cluster(cluster_class=Cluster):
    """A started cluster_class (a Cluster) for a module's setUpModule; raises
    unittest.SkipTest (the reason) where it cannot run here."""
    # Run even when this setup skips or fails (tearDownModule is not).
    unittest.addModuleCleanup(harness.remove_made_users)
    reason = why_not_here()
    if reason:
        raise unittest.SkipTest(reason)
    user = harness.unprivileged_user()
    if user is None:
        raise unittest.SkipTest(f"cannot make the jobs' user ({harness.OTHER_USER}) with useradd")
    cluster = cluster_class(user)
    try:
        cluster.start()
    except munged.MungedMissing as e:
        cluster.close()
        raise unittest.SkipTest(str(e))
    except BaseException:
        cluster.close()
        raise
    if cluster.plugin is None:
        cluster.close()
        raise unittest.SkipTest("no SPANK plugin built (BIN_DIR/../lib/tierfs_spank.so) and no "
                                "<slurm/spank.h> to build it (Debian: libslurm-dev)")
    return cluster


def setUpModule():
    global CLUSTER
    CLUSTER = start_cluster()


def tearDownModule():
    if CLUSTER is not None:
        CLUSTER.close()


READ_ALL = r"""#!/bin/bash
# The job reads the dataset through its mount and compares it with the PFS.
set -eu
echo "JOB $SLURM_JOB_ID"
mnt={mount_root}/$SLURM_JOB_ID/{name}
n=0
while IFS= read -r f; do
  cmp -s -- "$mnt/$f" "{dataset}/$f" || {{ echo "DIFFERS: $f"; exit 1; }}
  n=$((n + 1))
done < <(cd "{dataset}" && find . -type f | sort)
echo "READ $n FILES"
cat "$mnt/.tierfs/stats" >{jobs}/$SLURM_JOB_ID.stats
"""

WAIT_FOR_RELEASE = r"""#!/bin/bash
# Runs until the test creates the release file (at most 60 s).
for _ in $(seq 600); do [ -e {release} ] && exit 0; sleep 0.1; done
exit 1
"""


class RealSlurm(unittest.TestCase):
    def setUp(self):
        self.c = CLUSTER
        self.c.wait_idle()

    def tearDown(self):
        # A drained node fails the test that drained it; the next one gets it back.
        drained = {n: s for n, s in self.c.node_states().items() if s != "idle"}
        for node in drained:
            self.c.run("scontrol", "update", f"nodename={node}", "state=resume")
        self.assertEqual(drained, {}, f"nodes left not idle\n{self.c.logs()}")

    def test_a_job_reads_its_dataset_through_the_mount_then_the_epilog_clears_it(self):
        c = self.c
        job = c.read_all(c.path("tfs-node1", "mnt"), "imagenet", "-N1", "-w", "tfs-node1",
                         "--mem=300", f"--tierfs={c.dataset}", "--tierfs-mount=imagenet",
                         "--tierfs-options=prefetch=stage-in,ram=1G,promote_threads=3")
        with open(c.path("jobs", f"{job}.stats")) as f:
            stats = json.load(f)
        self.assertEqual(stats["promotions"]["threads"], 3)
        tiers = {t["kind"]: t for t in stats["tiers"]}
        # ram=1G asked for, capped at the job's --mem=300 (slurmd's SLURM_MEM_PER_NODE).
        self.assertEqual(tiers["memory"]["budget"], 300 << 20)
        self.assertEqual(tiers["directory"]["path"],
                         c.path("tfs-node1", "scratch", "tierfs-slurm", str(job)))
        with open(c.path("tfs-node1.log")) as f:
            log = f.read()
        self.assertIn(f"mounted {c.dataset} at {c.mnt('tfs-node1', job, 'imagenet')}", log)
        self.assertIn("prefetch=stage-in", log)
        self.assertEqual(c.nothing_left(job), "")

    def test_srun_mounts_the_dataset_for_the_job_it_makes(self):
        c = self.c
        script = c.path("jobs", "srun-read-all.sh")
        with open(script, "w") as f:
            f.write(READ_ALL.format(mount_root=c.path("tfs-node2", "mnt"), name="val",
                                    dataset=c.dataset, jobs=c.path("jobs")))
        os.chmod(script, 0o755)
        r = c.run("srun", "-N1", "-w", "tfs-node2", f"--chdir={c.path('jobs')}",
                  f"--tierfs={c.dataset}", "--tierfs-mount=val",
                  "--tierfs-options=prefetch=stage-in,promote_threads=2", script, user=c.user,
                  timeout=120)
        self.assertEqual(r.returncode, 0, f"{r.stdout}\n{r.stderr}\n{c.logs()}")
        self.assertIn(f"READ {len(c.files)} FILES", r.stdout)
        job = int(r.stdout.split("JOB ", 1)[1].split()[0])
        self.jobs_made(job)
        info = c.wait_done(job)
        self.assertEqual(info["JobState"], "COMPLETED", info)
        with open(c.path("jobs", f"{job}.stats")) as f:
            stats = json.load(f)
        self.assertEqual(stats["prefetch"]["mode"], "stage-in")
        self.assertEqual(stats["promotions"]["threads"], 2)
        with open(c.path("tfs-node2.log")) as f:
            self.assertIn(f"mounted {c.dataset} at {c.mnt('tfs-node2', job, 'val')}", f.read())
        self.assertEqual(c.nothing_left(job), "")

    def test_salloc_mounts_the_dataset_before_its_command_runs(self):
        c = self.c
        rel = sorted(c.files)[0]
        # The command runs here, on the host that allocated (one host here:
        # the nodes' mounts are visible). An srun inside the allocation makes
        # a step, not a job: its --tierfs is ignored, and said to be.
        command = f"""
mnt={c.path("tfs-node1", "mnt")}/$SLURM_JOB_ID/train
echo "JOB $SLURM_JOB_ID"
cat "$mnt/.tierfs/stats" >{c.path("jobs")}/$SLURM_JOB_ID.stats
cmp -- "$mnt/{rel}" "{c.dataset}/{rel}" && echo SAME
srun --tierfs=/elsewhere --tierfs-mount=other true && echo STEP RAN
test ! -e "{c.path("tfs-node1", "mnt")}/$SLURM_JOB_ID/other" && echo NO OTHER MOUNT
"""
        r = c.run("salloc", "-N1", "-w", "tfs-node1", f"--chdir={c.path('jobs')}",
                  f"--tierfs={c.dataset}", "--tierfs-mount=train",
                  "--tierfs-options=prefetch=order,lookahead=8", "bash", "-c", command,
                  user=c.user, timeout=120)
        self.assertEqual(r.returncode, 0, f"{r.stdout}\n{r.stderr}\n{c.logs()}")
        job = int(r.stdout.split("JOB ", 1)[1].split()[0])
        self.jobs_made(job)
        for line in ("SAME", "STEP RAN", "NO OTHER MOUNT"):
            self.assertIn(line, r.stdout.splitlines(), f"{r.stdout}\n{r.stderr}")
        self.assertIn(f"the --tierfs options of an srun inside job {job} are ignored", r.stderr)
        info = c.wait_done(job)
        self.assertEqual(info["JobState"], "COMPLETED", info)
        with open(c.path("jobs", f"{job}.stats")) as f:
            stats = json.load(f)
        self.assertEqual(stats["prefetch"]["mode"], "order")
        self.assertEqual(stats["prefetch"]["order"]["lookahead"], 8)
        self.assertEqual(c.nothing_left(job), "")

    def jobs_made(self, job):
        """A job made by srun or salloc: cancelled at the end if still there."""
        self.c.jobs.append(job)

    def test_an_option_the_site_does_not_allow_cancels_the_job_and_says_why(self):
        c = self.c
        r = c.sbatch("-N1", f"--tierfs={c.dataset}", "--tierfs-options=prefetch=order,metrics=9100",
                     script="#!/bin/sh\necho RAN\n")
        self.assertEqual(r.returncode, 0, r.stderr)  # the plugin checks shapes, the prolog the list
        info = c.wait_done(r.job)
        self.assertEqual(info["JobState"], "CANCELLED", f"{info}\n{c.logs()}")
        self.assertIn("a job may not set 'metrics'", info.get("AdminComment", ""), info)
        # Its user reads why in the job's output file (written as that user); the script
        # never ran; the node was not drained (tearDown: both idle).
        out = c.path("jobs", f"{r.job}.out")
        with open(out) as f:
            text = f.read()
        self.assertIn(f"job {r.job} is cancelled: TIERFS_OPTIONS: a job may not set 'metrics'", text)
        self.assertNotIn("RAN", text)
        self.assertEqual(os.stat(out).st_uid, c.user[0])
        self.assertEqual(c.nothing_left(r.job), "")
        self.assertEqual(set(c.node_states().values()), {"idle"})

    def test_an_srun_whose_dataset_is_missing_is_cancelled_and_says_why_on_its_stderr(self):
        c = self.c
        missing = c.path("lustre", "no-such-dataset")
        r = c.run("srun", "-N1", "-w", "tfs-node2", f"--chdir={c.path('jobs')}",
                  f"--tierfs={missing}", "echo", "RAN", user=c.user, timeout=120)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertNotIn("RAN", r.stdout)
        self.assertIn(f"is cancelled: dataset '{missing}' does not exist or cannot be reached by "
                      f"uid {c.user[0]}", r.stderr)
        c.wait_idle()  # not drained

    def test_a_ram_capped_at_the_jobs_memory_is_said_on_srun_and_in_the_output_file(self):
        c = self.c
        says = "ram=8G: the RAM tier is 500M, the job's memory on this node (--mem)"
        r = c.run("srun", "-N1", "-w", "tfs-node1", "--mem=500", f"--chdir={c.path('jobs')}",
                  f"--tierfs={c.dataset}", "--tierfs-options=ram=8G", "bash", "-c",
                  'echo "JOB $SLURM_JOB_ID"', user=c.user, timeout=120)
        self.assertEqual(r.returncode, 0, f"{r.stdout}\n{r.stderr}\n{c.logs()}")
        self.jobs_made(int(r.stdout.split("JOB ", 1)[1].split()[0]))
        self.assertIn(f"tierfs on tfs-node1: {says}", r.stderr)
        r = c.sbatch("-N1", "-w", "tfs-node1", "--mem=500", f"--tierfs={c.dataset}",
                     "--tierfs-options=ram=8G", script="#!/bin/sh\necho RAN\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        info = c.wait_done(r.job)
        self.assertEqual(info["JobState"], "COMPLETED", f"{info}\n{c.logs()}")
        with open(c.path("jobs", f"{r.job}.out")) as f:  # the epilog appends it
            self.assertEqual(f.read(), f"RAN\ntierfs on tfs-node1: {says}\n")
        self.assertEqual(c.nothing_left(r.job), "")

    def test_sbatch_refuses_a_malformed_value_before_submitting(self):
        c = self.c
        before = c.run("squeue", "-h", "-o", "%i").stdout
        for args, says in (
                (["--tierfs=lustre/imagenet"], "--tierfs='lustre/imagenet' is not an absolute path"),
                ([f"--tierfs={c.dataset}", "--tierfs-mount=../../etc"],
                 "--tierfs-mount='../../etc' starts with '.'"),
                ([f"--tierfs={c.dataset}", "--tierfs-mount=a/b"], "is not a name"),
                ([f"--tierfs={c.dataset}", "--tierfs-options=ram=1G\ntier_reset"],
                 "--tierfs-options='ram=1G' contains a control character"),
                ([f"--tierfs={c.dataset}", "--tierfs-options=prefetch"], "is not NAME=VALUE"),
                ([f"--tierfs={c.dataset}", "--tierfs-options=ram=1G\\,tier_reset"],
                 "a space or a backslash"),
                ([f"--tierfs=/{'x' * 5000}"], "is longer than 4095 bytes")):
            with self.subTest(refused=says):
                r = c.sbatch("-N1", *args, script="#!/bin/sh\necho RAN\n")
                self.assertNotEqual(r.returncode, 0, r.stdout)
                self.assertIn(says, r.stderr[:1000], r.stderr[:1000])
                self.assertIn("sbatch: error: Invalid --tierfs", r.stderr[:1000])
        self.assertEqual(c.run("squeue", "-h", "-o", "%i").stdout, before, "a job was submitted")

    def test_a_job_cancelled_while_it_reads_is_cleaned_up(self):
        c = self.c
        release = c.path("jobs", "never")
        r = c.sbatch("-N1", "-w", "tfs-node2", f"--tierfs={c.dataset}",
                     script=WAIT_FOR_RELEASE.format(release=release))
        self.assertEqual(r.returncode, 0, r.stderr)
        mnt = c.mnt("tfs-node2", r.job)
        harness.wait_for(lambda: c.job(r.job).get("JobState") == "RUNNING" and
                         harness.is_mounted(mnt), timeout=60, what="the job running on its mount")
        rel, data = next(iter(c.files.items()))
        self.assertEqual(c.read_as_user(os.path.join(mnt, rel)), data)
        # A reader of the job's user holds a file open on the mount.
        holder = subprocess.Popen(harness.user_command(
            c.user, "sh", "-c", 'exec 3<"$1"; sleep 120', "sh", os.path.join(mnt, rel)))
        try:
            self.assertEqual(c.run("scancel", str(r.job), user=c.user).returncode, 0)
            info = c.wait_done(r.job)
            self.assertEqual(info["JobState"], "CANCELLED")
            self.assertEqual(c.nothing_left(r.job), "")
        finally:
            holder.kill()
            holder.wait(timeout=10)

    def test_a_two_node_jobs_daemons_are_peers(self):
        c = self.c
        release = c.path("jobs", f"release-{time.monotonic_ns()}")
        r = c.sbatch("-N2", f"--tierfs={c.dataset}", "--tierfs-options=chunk_size=1M",
                     script=WAIT_FOR_RELEASE.format(release=release))
        self.assertEqual(r.returncode, 0, r.stderr)
        one, two = (c.mnt(n, r.job) for n in NODES)
        try:
            harness.wait_for(lambda: harness.is_mounted(one) and harness.is_mounted(two) and
                             c.job(r.job).get("JobState") == "RUNNING", timeout=60,
                             what="the job running with both mounts")
            names = list(NODES)
            for node, mnt in zip(names, (one, two)):
                pid = next(iter(harness.tierfs_pids(mnt)), None)
                self.assertIsNotNone(pid, f"no daemon for {mnt}")
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    opts = f.read().split(b"\0")
                opts = opts[opts.index(b"-o") + 1].decode().split(",")
                for o in (f"peers={'+'.join(names)}", f"peer_name={node}",
                          f"peer_port={c.peer_port}", f"peer_job=slurm:tierfstest:{r.job}"):
                    self.assertIn(o, opts)

            def peers(mnt):
                return json.loads(c.read_as_user(os.path.join(mnt, ".tierfs", "stats")))["peers"]
            try:
                for mnt in (one, two):  # they connect on first need
                    harness.wait_for(lambda: peers(mnt)["server"]["listening"], timeout=30,
                                     what=f"the peer service of {mnt} listening")
            except AssertionError as e:
                logs = "".join(f"\n--- {n} daemon.log:\n" + pathlib.Path(
                    c.path(n, "state", str(r.job), "daemon.log")).read_text(errors="replace")[-3000:]
                    for n in NODES)
                raise AssertionError(f"{e}{logs}") from None
            # Node 1 reads every file, cold: those homed on node 2 it reads from
            # SOURCE itself (node 2 has none yet) and hands node 2 the copy.
            for rel, data in c.files.items():
                self.assertEqual(c.read_as_user(os.path.join(one, rel)), data, rel)
            p1 = peers(one)
            self.assertGreater(p1["read_here"], 0, p1)
            self.assertLess(p1["read_here"], len(c.files), p1)
            self.assertEqual(p1["offered"], p1["read_here"], p1)
            self.assertEqual(p1["fetched_chunks"], 0, p1)
            harness.wait_for(lambda: peers(two)["server"]["adopted"] == p1["offered"],
                             timeout=30, what="node 2 keeping the chunks node 1 offered")
            # Node 2 reads every file: its share from its tier, the rest from
            # node 1, nothing from SOURCE.
            for rel, data in c.files.items():
                self.assertEqual(c.read_as_user(os.path.join(two, rel)), data, rel)
            p1, p2 = peers(one), peers(two)
            self.assertGreater(p2["fetched_chunks"], 0, p2)
            self.assertLess(p2["fetched_chunks"], len(c.files), p2)
            self.assertEqual(p1["served_chunks"], p2["fetched_chunks"], p1)
            self.assertEqual(p2["source_fallbacks"], 0, p2)
            reads = json.loads(c.read_as_user(os.path.join(two, ".tierfs", "stats")))["reads"]
            self.assertEqual(reads["source_bytes"], 0, reads)
        finally:
            pathlib.Path(release).touch()
        info = c.wait_done(r.job)
        self.assertEqual(info["JobState"], "COMPLETED", f"{info}\n{c.logs()}")
        self.assertEqual(c.nothing_left(r.job), "")


def package_installed():
    r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", "tierfs"], capture_output=True,
                       text=True, timeout=60)
    return "install ok installed" in r.stdout


def package_skip_reason():
    if os.environ.get("TIERFS_PACKAGE_TEST") != "1" and not os.environ.get("TIERFS_DEB"):
        return ("set TIERFS_PACKAGE_TEST=1 (builds the package: a Release build, slow) or "
                "TIERFS_DEB=PATH (a built one) to run it: it installs and removes the package "
                "tierfs on this machine")
    if shutil.which("dpkg") is None:
        return "no dpkg"
    if package_installed():
        return "a package named tierfs is installed already; this test never replaces it"
    return ""


class PackageUnderSlurm(unittest.TestCase):
    """The Debian package on this cluster, set up as tools/slurm/README.md says:
    `apt install` (dpkg -i here), slurm.conf's Prolog=/etc/slurm/prolog.d/*,
    Epilog=/etc/slurm/epilog.d/* and Debian's /etc/slurm/plugstack.conf (which
    includes plugstack.conf.d), /etc/tierfs/slurm.conf a copy of the installed
    example with this cluster's directories added (bound over /etc/tierfs in the
    test's mount namespace only). A job with --tierfs reads its dataset; then
    `dpkg -r tierfs`: sbatch loads no plugin and says nothing about one, a job
    without --tierfs runs, and both nodes stay idle. The package is purged and
    the cluster set back as it was at the end, whatever failed."""

    @classmethod
    def setUpClass(cls):
        reason = package_skip_reason()
        if reason:
            raise unittest.SkipTest(reason)
        c = cls.c = CLUSTER
        cls.tmp = tempfile.mkdtemp(prefix="tierfs-slurm-deb-")
        cls.addClassCleanup(cls.set_back)
        deb = os.environ.get("TIERFS_DEB")
        if not deb:
            r = subprocess.run([os.path.join(REPO, "tools", "package"), "--build-dir",
                                os.path.join(cls.tmp, "build"), "-j",
                                os.environ.get("TIERFS_PACKAGE_JOBS", str(os.cpu_count() or 1))],
                               capture_output=True, text=True, timeout=7200)
            if r.returncode != 0:
                raise AssertionError(f"tools/package failed:\n{r.stderr[-3000:]}")
            deb = r.stdout.strip().splitlines()[-1]
        subprocess.run(["dpkg", "-i", deb], check=True, capture_output=True, timeout=300)
        # /etc/tierfs/slurm.conf: the example as installed, and what this cluster needs.
        cls.made_etc = not os.path.isdir("/etc/tierfs")
        if cls.made_etc:
            os.mkdir("/etc/tierfs", 0o755)
        etc = os.path.join(cls.tmp, "etc-tierfs")
        os.mkdir(etc, 0o755)
        shutil.copy("/usr/lib/tierfs/slurm/slurm.conf.example", os.path.join(etc, "slurm.conf"))
        with open(os.path.join(etc, "slurm.conf"), "a") as f:
            f.write(f"MOUNT_ROOT={c.path('pkg', 'mnt')}\nSTATE_ROOT={c.path('pkg', 'state')}\n"
                    f"LOCAL_SCRATCH={c.path('pkg', 'scratch')}\nRUN_AS_USER={c.run_as_user}\n"
                    "TIER_MIN_MB=1\nRAM_MIN_MB=1\nMOUNT_TIMEOUT=30\nSTEP_TIMEOUT=5\n")
        os.chmod(os.path.join(etc, "slurm.conf"), 0o644)
        os.makedirs(c.path("pkg", "scratch"), mode=0o755)
        subprocess.run(["mount", "--bind", etc, "/etc/tierfs"], check=True, timeout=30)
        cls.bound = True
        c.write_slurm_conf(prolog="/etc/slurm/prolog.d/*", epilog="/etc/slurm/epilog.d/*",
                           plugstack="/etc/slurm/plugstack.conf")
        c.restart_slurm()

    @classmethod
    def set_back(cls):
        c = cls.c
        # Installed, or removed with its configuration files (the hooks) kept.
        subprocess.run(["dpkg", "--purge", "tierfs"], capture_output=True, timeout=300)
        if getattr(cls, "bound", False):
            subprocess.run(["umount", "/etc/tierfs"], capture_output=True, timeout=30)
        if getattr(cls, "made_etc", False):
            try:
                os.rmdir("/etc/tierfs")
            except OSError:
                pass
        shutil.rmtree(cls.tmp, ignore_errors=True)
        c.write_slurm_conf()
        c.restart_slurm()

    def test_a_job_with_the_package_then_without_it(self):
        c = self.c
        for path in ("/etc/slurm/prolog.d/tierfs", "/etc/slurm/epilog.d/tierfs",
                     "/etc/slurm/plugstack.conf.d/tierfs.conf"):
            self.assertTrue(os.path.exists(path), f"the package did not install {path}")
        mount_root = c.path("pkg", "mnt")
        c.read_all(mount_root, "", "-N1", "-w", "tfs-node1", f"--tierfs={c.dataset}",
                   "--tierfs-options=prefetch=stage-in")
        self.assertEqual(os.listdir(mount_root), [], "the epilog left a mount point")

        r = subprocess.run(["dpkg", "-r", "tierfs"], capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertFalse(os.path.lexists("/etc/slurm/plugstack.conf.d/tierfs.conf"))
        r = c.sbatch("-N1", "-w", "tfs-node1", script="#!/bin/sh\necho RAN\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, "", "sbatch complains about a plugin the package took away")
        info = c.wait_done(r.job)
        self.assertEqual(info["JobState"], "COMPLETED", f"{info}\n{c.logs()}")
        with open(c.path("jobs", f"{r.job}.out")) as f:
            self.assertEqual(f.read(), "RAN\n")
        c.wait_idle()
        self.assertEqual(set(c.node_states().values()), {"idle"})


if __name__ == "__main__":
    reason = why_not_here()
    if reason:
        print(f"SKIPPED: {reason}")
        sys.exit(harness.SKIP)
    harness.main()
