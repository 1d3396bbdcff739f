"""tools/slurm's shared index: two nodes of one job start their prologs
together on a dataset behind a slow simulated PFS; one scans it and writes
the shared index (in INDEX_DIR, or without one beside the dataset), the
other waits for it and loads it; both mount the same tree, and the epilogs
leave the index for the next job. Beside a dataset whose parent directory
others may write to, no index is kept (each node scans).

Each simulated node has its own mount root, state and scratch directories
(as separate machines would); INDEX_DIR is shared. Skipped unless root (the
prolog runs as slurmd's user)."""
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import harness

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROLOG = os.path.join(REPO, "tools", "slurm", "tierfs-prolog")
EPILOG = os.path.join(REPO, "tools", "slurm", "tierfs-epilog")
JOB = "4242"


class SlurmSharedIndex(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="tierfs-slurm-index-")
        source = os.path.join(self.root, "lustre-backing", "imagenet")
        for c in range(6):
            harness.make_files(os.path.join(source, f"class{c}"), 40, 100, subdirs=1, seed=c)
        time.sleep(2.2)  # past the index's racy-clean margin
        self.pfs = harness.PfsSim(source, os.path.join(self.root, "lustre"), "meta_ms=3")
        self.dataset = self.pfs.mnt
        self.index_dir = os.path.join(self.root, "index")
        os.mkdir(self.index_dir, 0o700)
        self.write_configs(self.index_dir)

    def write_configs(self, index_dir):
        self.nodes = []
        for n in ("node001", "node002"):
            base = os.path.join(self.root, n)
            for d in ("mnt", "scratch", "state"):
                os.makedirs(os.path.join(base, d), exist_ok=True)
            conf = os.path.join(base, "slurm.conf")
            with open(conf, "w") as f:
                f.write(f"TIERFS_BIN={harness.tierfs_bin()}\nMOUNT_ROOT={base}/mnt\n"
                        f"LOCAL_SCRATCH={base}/scratch\nSTATE_ROOT={base}/state\n"
                        f"TIER_MIN_MB=1\nRAM_MIN_MB=1\nMOUNT_TIMEOUT=60\nSTEP_TIMEOUT=3\n"
                        f"SCANCEL=/bin/true\nINDEX_DIR={index_dir}\n")
            os.chmod(conf, 0o644)
            self.nodes.append({"name": n, "conf": conf, "mnt": os.path.join(base, "mnt", JOB),
                               "log": os.path.join(base, "state", JOB, "daemon.log")})

    def tearDown(self):
        for node in self.nodes:
            harness.force_unmount(node["mnt"])
        for pid in harness.tierfs_pids(self.root + "/"):
            os.kill(pid, 9)
        self.pfs.close()
        shutil.rmtree(self.root, ignore_errors=True)

    def start(self, script, node):
        env = {"SLURM_JOB_ID": JOB, "SLURM_JOBID": JOB, "SLURM_JOB_USER": "root",
               "SLURM_JOB_UID": "0", "SLURM_JOB_GID": "0", "SLURM_JOB_NODELIST": "node[001-002]",
               "SLURMD_NODENAME": node["name"], "TIERFS_SLURM_CONF": node["conf"],
               "TIERFS_DATASET": self.dataset,
               "SLURM_SCRIPT_CONTEXT": "prolog_slurmd" if script == PROLOG else "epilog_slurmd"}
        return subprocess.Popen([script], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def mount_both(self):
        """Both prologs at once; returns the daemons' logs after checking the mounts."""
        procs = [self.start(PROLOG, n) for n in self.nodes]
        for p in procs:
            out, err = p.communicate(timeout=120)
            self.assertEqual(p.returncode, 0, err)
        logs = []
        for n in self.nodes:
            self.assertTrue(harness.is_mounted(n["mnt"]), n["name"])
            self.assertEqual(sorted(os.listdir(n["mnt"])), sorted(os.listdir(self.dataset)))
            with open(n["log"]) as f:
                logs.append(f.read())
        return logs

    def unmount_both(self):
        for p in [self.start(EPILOG, n) for n in self.nodes]:
            _, err = p.communicate(timeout=60)
            self.assertEqual(p.returncode, 0, err)

    def test_two_nodes_scan_once(self):
        logs = self.mount_both()
        for n in self.nodes:
            self.assertEqual(len(os.listdir(n["mnt"])), 6)
            self.assertEqual(len(os.listdir(os.path.join(n["mnt"], "class3", "d0"))), 40)
        scanned = [log for log in logs if "scanned, index written" in log]
        loaded = [log for log in logs if "index loaded" in log]
        self.assertEqual((len(scanned), len(loaded)), (1, 1), logs)
        index = [f for f in os.listdir(self.index_dir)]
        self.assertEqual(len(index), 1, index)
        self.assertRegex(index[0], r"^u0-[0-9a-f]{16}\.index$")
        self.unmount_both()
        self.assertEqual(os.listdir(self.index_dir), index, "the index stays for the next job")

    def test_without_index_dir_the_index_lies_beside_the_dataset(self):
        self.write_configs("")
        beside = os.path.join(self.root, ".lustre.tierfs-index")  # the dataset is ROOT/lustre
        logs = self.mount_both()
        scanned = [log for log in logs if "scanned, index written" in log]
        loaded = [log for log in logs if "index loaded" in log]
        self.assertEqual((len(scanned), len(loaded)), (1, 1), logs)
        st = os.stat(beside)
        self.assertEqual((st.st_uid, st.st_mode & 0o022), (0, 0), "the daemon's own, private")
        self.unmount_both()
        self.assertTrue(os.path.exists(beside), "the index stays for the next job")
        logs = self.mount_both()  # the next job loads it
        self.assertTrue(all("index loaded" in log for log in logs), logs)
        self.unmount_both()

    def test_no_index_beside_a_dataset_whose_directory_others_may_write(self):
        self.write_configs("")
        # The dataset's parent is group-writable: an index there could be anyone's.
        group = os.path.join(self.root, "group")
        self.dataset = os.path.join(group, "data")
        harness.make_files(self.dataset, 5, 100)
        os.chmod(group, 0o770)
        logs = self.mount_both()
        self.assertTrue(all("scanned (no index)" in log for log in logs), logs)
        self.assertEqual(os.listdir(group), ["data"])
        self.unmount_both()


if __name__ == "__main__":
    if os.geteuid() != 0:
        print("SKIPPED: the Slurm prolog runs as root (slurmd's user); this is not root")
        sys.exit(77)
    harness.main()
