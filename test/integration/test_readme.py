"""README.md's two quickstarts, followed as a user would.

The single box: the fenced blocks marked `sh single-box` are run command by
command, as written, by an unprivileged user (README: not as root) whose
home is `~`, with the README's placeholders replaced the way it tells a user
to (the dataset, the NVMe directory, the sizes), against a generated dataset
only that user may read; every mount is checked by reading the whole
dataset back through it as that user. The block marked `python single-box`
runs under Debian's python3 with PyTorch (skipped without it).

The Slurm job: every path, option and slurm.conf line the quickstart names
is checked against what the package installs, what the SPANK plugin
registers and what the prolog lets a job set. The real Slurm run is
test_slurm_real.py's.

A renamed option, a moved file or a command that stops working fails here.
"""
import hashlib
import json
import os
import random
import re
import shlex
import shutil
import subprocess
import tempfile
import unittest

import harness

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
README = os.path.join(REPO, "README.md")
SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's, where python3-torch installs


def blocks(info):
    """The bodies of README's fenced blocks whose info string is `info`, in order."""
    out, body = [], None
    with open(README) as f:
        for line in f:
            line = line.rstrip("\n")
            if body is None:
                if line.startswith("```") and line[3:].strip() == info:
                    body = []
            elif line.startswith("```"):
                out.append("\n".join(body) + "\n")
                body = None
            else:
                body.append(line)
    return out


def commands(block):
    """The commands of a shell block: continuation lines joined, comments and
    blank lines left out (a trailing comment stays: the shell ignores it)."""
    out, pending = [], ""
    for line in block.splitlines():
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        if line.strip() and not line.lstrip().startswith("#"):
            out.append(line.strip())
    return out


class SingleBoxQuickstart(unittest.TestCase):
    """Run as README says: by the user who trains (an unprivileged account
    when the tests run as root), `~` being that user's home, the dataset
    readable by that user only."""

    def setUp(self):
        self.user = harness.unprivileged_user() if os.geteuid() == 0 else None
        if os.geteuid() == 0 and self.user is None:
            self.skipTest("no unprivileged account can be made here (useradd, setpriv)")
        if self.user and os.stat("/dev/fuse").st_mode & 0o006 != 0o006:
            # A user's daemon needs /dev/fuse (0666 on Debian; some containers
            # make it root's only): opened up for this test, and restored.
            mode = os.stat("/dev/fuse").st_mode & 0o777
            os.chmod("/dev/fuse", 0o666)
            self.addCleanup(os.chmod, "/dev/fuse", mode)
        self.base = tempfile.mkdtemp(prefix="tierfs-readme-")
        os.chmod(self.base, 0o755)
        self.addCleanup(shutil.rmtree, self.base, ignore_errors=True)
        self.src = os.path.join(self.base, "dataset")
        self.home = os.path.join(self.base, "home")
        self.mnt = os.path.join(self.home, "imagenet")  # README's ~/imagenet
        if self.user:  # after the unmount below: its daemon ends, then the account may go
            self.addCleanup(harness.wait_for, lambda: subprocess.run(
                ["pgrep", "-u", str(self.user[0])], capture_output=True).returncode == 1,
                what="the user's daemons to exit")
        self.addCleanup(harness.force_unmount, self.mnt)
        scratch = os.path.join(self.base, "nvme")  # the user's directory on the NVMe
        self.tier = os.path.join(scratch, "tierfs")
        # An ImageNet-like tree: train/CLASS/IMAGE.JPEG and a val/ beside it.
        rnd = random.Random(25)
        self.files = {}
        for split, n in (("train", 48), ("val", 8)):
            for i in range(n):
                rel = f"{split}/n{i % 4:08d}/img_{i:04d}.JPEG"
                os.makedirs(os.path.join(self.src, os.path.dirname(rel)), exist_ok=True)
                data = rnd.randbytes(20_000 + 997 * i)
                with open(os.path.join(self.src, rel), "wb") as f:
                    f.write(data)
                self.files[rel] = data
        for d in (self.home, scratch):
            os.mkdir(d)
        if self.user:
            uid, gid = self.user
            for d in (self.src, self.home, scratch):
                subprocess.run(["chown", "-R", f"{uid}:{gid}", d], check=True, timeout=30)
            subprocess.run(["chmod", "-R", "go-rwx", self.src], check=True, timeout=30)
        self.env = dict(os.environ, PATH=harness.BIN_DIR + ":" + os.environ["PATH"],
                        HOME=self.home)
        self.env.pop("PYTHONPATH", None)

    # What README tells a user to replace: its placeholder, and ours (sizes
    # this shared test machine has: tierfs refuses a ram= above its memory).
    # ~/imagenet stays: `~` is the user's home.
    def substitutions(self):
        return [("/nfs/datasets/imagenet", self.src), ("/local/nvme/tierfs", self.tier),
                ("ram=16G", "ram=64M"), (":400G", ":256M")]

    def substitute(self, text):
        for placeholder, ours in self.substitutions():
            text = text.replace(placeholder, ours)
        return text

    def as_user(self, *cmd, timeout=120):
        """cmd run as the user who trains; text output captured."""
        argv = harness.user_command(self.user, *cmd) if self.user else list(cmd)
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              env=self.env)

    def run_shell(self, command):
        return self.as_user("bash", "-o", "pipefail", "-c", self.substitute(command))

    def stats(self):
        r = self.as_user("cat", os.path.join(self.mnt, ".tierfs", "stats"))
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout)

    def is_mount_command(self, command):
        words = shlex.split(command, comments=True)
        return words[:1] == ["tierfs"] and len(words) > 2 and words[1] not in (
            "stat", "hint", "stage", "index")

    def mount(self, command):
        """A mount line: unmount the previous one (as README says), mount,
        and read the whole dataset back through it, as the user."""
        harness.force_unmount(self.mnt)
        r = self.run_shell(command)
        self.assertEqual(r.returncode, 0, (command, r.stdout, r.stderr))
        self.assertTrue(harness.is_mounted(self.mnt), command)
        digest = ("import hashlib, os, sys\n"
                  "for d, _, names in sorted(os.walk(sys.argv[1])):\n"
                  "    for n in sorted(names):\n"
                  "        p = os.path.join(d, n)\n"
                  "        with open(p, 'rb') as f:\n"
                  "            print(os.path.relpath(p, sys.argv[1]),"
                  " hashlib.sha256(f.read()).hexdigest())\n")
        r = self.as_user(SYSTEM_PYTHON, "-c", digest, self.mnt)
        self.assertEqual(r.returncode, 0, (command, r.stderr))
        want = sorted(f"{rel} {hashlib.sha256(data).hexdigest()}"
                      for rel, data in self.files.items())
        self.assertEqual(sorted(r.stdout.splitlines()), want, command)
        return self.stats()

    def shell_blocks(self):
        found = blocks("sh single-box")
        self.assertGreaterEqual(len(found), 3, "README: the single-box quickstart's sh blocks")
        text = "".join(found) + "".join(blocks("python single-box"))
        for placeholder in [p for p, _ in self.substitutions()] + ["~/imagenet"]:
            # Else what a user must replace would be ours to guess.
            self.assertIn(placeholder, text, "README no longer names this placeholder")
        return found

    def test_single_box_as_written(self):
        first, modes, *rest = self.shell_blocks()
        # The first block: make the directories, mount, look, unmount.
        mounted = False
        for command in commands(first):
            if self.is_mount_command(command):
                stats = self.mount(command)
                self.assertEqual([t["name"] for t in stats["tiers"]], ["ram"], command)
                mounted = True
                continue
            r = self.run_shell(command)
            self.assertEqual(r.returncode, 0, (command, r.stdout, r.stderr))
            if command.startswith("ls "):
                self.assertEqual(r.stdout.split(), ["train", "val"])
            if command.startswith("tierfs stat"):
                self.assertIn("promotions", r.stdout)
        self.assertTrue(mounted, "the first block mounts")
        self.assertFalse(harness.is_mounted(self.mnt), "the first block unmounts at its end")

        # Each mode, one after the other.
        seen = []
        for command in commands(modes):
            self.assertTrue(self.is_mount_command(command), command)
            stats = self.mount(command)
            opts = re.search(r"-o (\S+)", command)
            opts = dict(o.partition("=")[::2] for o in opts.group(1).split(",")) if opts else {}
            self.assertEqual(stats["prefetch"]["mode"], opts.get("prefetch", "on-access"), command)
            self.assertEqual([t["name"] for t in stats["tiers"]],
                             (["ram"] if "ram" in opts else []) +
                             (["dir0"] if "tier" in opts else []), command)
            seen.append(opts.get("prefetch", "ram" in opts and "ram" or "mirror"))
        self.assertEqual(set(seen), {"mirror", "ram", "stage-in", "order"}, seen)
        self.assertEqual(seen[-1], "order", "the order hints below need the last mount")

        # The order declared from a shell, and a directory staged now.
        for block in rest:
            for command in commands(block):
                r = self.run_shell(command)
                self.assertEqual(r.returncode, 0, (command, r.stdout, r.stderr))
        stats = self.stats()
        train = [r for r in self.files if r.startswith("train/")]
        order = stats["prefetch"]["order"]
        self.assertGreaterEqual(order["valid_lines"], len(train))
        self.assertEqual(order["rejected_lines"], 0, order)
        self.assertGreaterEqual(stats["prefetch"]["stage"]["done_files"], len(train))

    def test_pytorch_snippet(self):
        probe = subprocess.run([SYSTEM_PYTHON, "-c", "import torch"], capture_output=True)
        if probe.returncode != 0:
            self.skipTest(f"{SYSTEM_PYTHON} has no torch (Debian: python3-torch)")
        snippet = blocks("python single-box")
        self.assertEqual(len(snippet), 1, "README: the PyTorch snippet")
        first, modes, *_ = self.shell_blocks()
        for command in commands(first):  # the directories, as README makes them
            if command.startswith("mkdir "):
                self.assertEqual(self.run_shell(command).returncode, 0, command)
        order_mount = [c for c in commands(modes) if "prefetch=order" in c]
        self.assertTrue(order_mount)
        self.mount(order_mount[-1])
        # `dataset` is the user's: here one of (path, class) samples, as ImageFolder's.
        prelude = (
            "import os, sys, torch\n"
            f"sys.path.insert(0, {os.path.join(REPO, 'tools', 'python')!r})\n"
            "class Files(torch.utils.data.Dataset):\n"
            "    def __init__(self, root):\n"
            "        self.samples = sorted((os.path.join(d, n), 0) for d, _, ns in os.walk(root)\n"
            "                              for n in ns)\n"
            "    def __len__(self):\n"
            "        return len(self.samples)\n"
            "    def __getitem__(self, i):\n"
            "        with open(self.samples[i][0], 'rb') as f:\n"
            "            return len(f.read())\n"
            f"dataset = Files({os.path.join(self.mnt, 'train')!r})\n")
        epilogue = ("seen = sum(int(b.sum()) for b in loader)\n"
                    "print(json.dumps({'bytes': seen, 'hinted': sampler.epochs_hinted}))\n")
        script = prelude + "import json\n" + self.substitute(snippet[0]) + epilogue
        r = self.as_user(SYSTEM_PYTHON, "-c", script, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr)
        result = json.loads(r.stdout.strip().splitlines()[-1])
        train = {k: v for k, v in self.files.items() if k.startswith("train/")}
        self.assertEqual(result, {"bytes": sum(map(len, train.values())), "hinted": 1})
        order = self.stats()["prefetch"]["order"]
        self.assertEqual((order["valid_lines"], order["rejected_lines"]), (len(train) + 1, 0))


class SlurmQuickstart(unittest.TestCase):
    """What the admin installs and the user types, against the repository."""

    def setUp(self):
        self.admin = blocks("sh slurm-admin")
        self.conf = blocks("ini slurm.conf")
        self.user = blocks("sh slurm-user")
        for name, found in (("admin", self.admin), ("slurm.conf", self.conf),
                            ("user", self.user)):
            self.assertEqual(len(found), 1, f"README: the Slurm quickstart's {name} block")

    def read(self, *rel):
        with open(os.path.join(REPO, *rel)) as f:
            return f.read()

    def installed_in_slurm_dir(self):
        """Names the build installs into lib/tierfs/slurm (CMake install rules)."""
        names = set()
        for rel in (("tools", "CMakeLists.txt"), ("tools", "slurm", "CMakeLists.txt")):
            for rule in re.findall(r"install\(([^)]*)\)", self.read(*rel)):
                if "DESTINATION lib/tierfs/slurm" not in rule:
                    continue
                words = rule.split()
                if words[0] == "TARGETS":
                    names.update(w + ".so" for w in words[1:] if w.isidentifier())
                else:
                    names.update(os.path.basename(w) for w in words[1:]
                                 if w not in ("DESTINATION", "lib/tierfs/slurm"))
        return names

    def test_admin_paths_are_what_the_package_installs(self):
        installed = self.installed_in_slurm_dir()
        named = re.findall(r"/usr/lib/tierfs/slurm/([\w.@-]+)", self.admin[0] + self.conf[0])
        for name in named:
            self.assertIn(name, installed, f"README names /usr/lib/tierfs/slurm/{name}")
        self.assertIn("-DCMAKE_INSTALL_PREFIX=/usr", self.read("tools", "package"))
        version = re.search(r"project\(tierfs VERSION (\S+)", self.read("CMakeLists.txt")).group(1)
        deb = re.search(r"apt install (\S+)", self.admin[0]).group(1)
        self.assertEqual(deb, f"./build-package/tierfs_{version}_amd64.deb")
        self.assertIn("build=build-package", self.read("tools", "package"))
        # The package itself puts the plugstack line where Debian's plugstack.conf
        # includes it, and the hooks where slurm.conf's patterns look.
        self.assertEqual(len(commands(self.admin[0])), 1, "the admin only installs the package")
        rules = self.read("tools", "slurm", "CMakeLists.txt")
        self.assertIn("DESTINATION /etc/slurm/plugstack.conf.d RENAME tierfs.conf", rules)
        plugstack = self.read("tools", "slurm", "spank", "plugstack-tierfs.conf.in")
        self.assertRegex(plugstack, r"(?m)^optional @TIERFS_SPANK_INSTALLED@$")
        rules = self.read("tools", "CMakeLists.txt")
        self.assertIn("DESTINATION /etc/slurm/${script}.d RENAME tierfs", rules)
        self.assertIn("/etc/slurm/prolog.d/tierfs", self.read("tools", "packaging", "conffiles"))

    def test_slurm_conf_lines_are_what_a_real_slurm_ran(self):
        real = self.read("test", "integration", "test_slurm_real.py")
        lib = self.read("tools", "slurm", "tierfs-slurm-lib.bash")
        lines = [l for l in self.conf[0].splitlines() if l.strip()]
        keys = {l.partition("=")[0]: l.partition("=")[2] for l in lines}
        self.assertEqual(set(keys), {"Prolog", "Epilog", "PrologFlags", "PrologEpilogTimeout"})
        for key in keys:  # the keys the real slurmctld of test_slurm_real.py was given
            self.assertIn(f'{key}=', real)
        self.assertIn('"PrologFlags=Alloc"', real)
        self.assertEqual(keys["PrologFlags"], "Alloc")
        mount_timeout = int(re.search(r"MOUNT_TIMEOUT=(\d+)", lib).group(1))
        self.assertGreater(int(keys["PrologEpilogTimeout"]), mount_timeout)
        # The patterns the package's hooks are found by, as the real Slurm ran them.
        self.assertEqual(keys["Prolog"], "/etc/slurm/prolog.d/*")
        self.assertEqual(keys["Epilog"], "/etc/slurm/epilog.d/*")
        self.assertIn(f'prolog="{keys["Prolog"]}", epilog="{keys["Epilog"]}"', real)
        self.assertIn(f"Prolog={keys['Prolog']}\nEpilog={keys['Epilog']}\n",
                      self.read("tools", "slurm", "README.md"))

    def test_user_options_are_the_plugins(self):
        spank = self.read("tools", "slurm", "spank", "tierfs_spank.c")
        lib = self.read("tools", "slurm", "tierfs-slurm-lib.bash")
        registered = set(re.findall(r'\{"(tierfs[a-z-]*)",', spank))
        self.assertIn("tierfs", registered)
        words = shlex.split(commands(self.user[0])[0], comments=True)
        self.assertEqual(words[0], "sbatch")
        given = dict(w[2:].partition("=")[::2] for w in words if w.startswith("--tierfs"))
        self.assertTrue(given)
        for option in given:
            self.assertIn(option, registered, f"README: --{option}")
        self.assertTrue(os.path.isabs(given["tierfs"]))
        # Each of --tierfs-options is one a job may set, with a value of its shape.
        allowed = re.search(r'JOB_OPTIONS="([^"]*)"', lib).group(1).split()
        syntax = dict(re.findall(r"\[(\w+)\]='([^']*)'", lib))
        for item in given.get("tierfs-options", "").split(","):
            name, _, value = item.partition("=")
            self.assertIn(name, allowed, f"README: --tierfs-options={item}")
            self.assertRegex(value, f"^({syntax[name]})$", f"README: --tierfs-options={item}")
        # Where the job finds its data: the prolog's default mount root.
        with open(README) as f:
            text = f.read()
        root = re.search(r"(?m)^\s*MOUNT_ROOT=(\S+)", lib).group(1)
        self.assertIn(f"`{root}/$SLURM_JOB_ID`", text)


def tearDownModule():
    harness.remove_made_users()


if __name__ == "__main__":
    harness.main()
