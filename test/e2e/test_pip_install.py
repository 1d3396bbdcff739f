"""The order-hint helper as a Python package: plain `pip install
./tools/python` into a fresh venv of Debian's python3 with no package index
reachable (an index URL nobody answers, no local wheels: the helper's own
build backend needs neither setuptools nor wheel), then the helper's own
tests (test_hint_helper.py --installed) against the installed module. Also:
the package's version is tierfs's (CMakeLists.txt), a wheel builds offline,
and an editable install imports from the source tree. Skipped (77) without
/usr/bin/python3's venv module."""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
PYTHON = "/usr/bin/python3"


def cmake_version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        return re.search(r"project\(tierfs VERSION ([0-9.]+)", f.read()).group(1)


def pip_env():
    """A package index nobody answers (port 9, discard, refused at once), no
    local wheels, no user or site pip configuration."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_INDEX_URL="http://127.0.0.1:9/simple", PIP_CONFIG_FILE=os.devnull,
               PIP_RETRIES="0", PIP_TIMEOUT="5", PIP_DISABLE_PIP_VERSION_CHECK="1",
               PYTHONDONTWRITEBYTECODE="1")
    return env


def run(*cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=pip_env(), **kw)
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r


class PipInstall(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tierfs-pip-")
        # A copy: pip builds in the source directory (build/, *.egg-info).
        cls.src = os.path.join(cls.tmp, "python")
        shutil.copytree(os.path.join(ROOT, "tools", "python"), cls.src)
        cls.venv = os.path.join(cls.tmp, "venv")
        run(PYTHON, "-m", "venv", cls.venv)
        cls.py = os.path.join(cls.venv, "bin", "python")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_1_pip_install_then_the_helpers_tests_pass_against_it(self):
        run(self.py, "-m", "pip", "install", self.src)
        where = run(self.py, "-c", "import tierfs_hint; print(tierfs_hint.__file__)").stdout
        self.assertTrue(where.startswith(self.venv), where)
        r = subprocess.run([self.py, os.path.join(HERE, "test_hint_helper.py"), "--installed"],
                           capture_output=True, text=True, timeout=300, cwd=self.tmp)
        sys.stderr.write(r.stdout + r.stderr)
        self.assertEqual(r.returncode, 0)
        self.assertIn(f"from {self.venv}", r.stdout)

    def test_2_versioned_with_tierfs(self):
        r = run(self.py, "-m", "pip", "show", "tierfs-hint")
        self.assertIn(f"Version: {cmake_version()}\n", r.stdout)

    def test_3_a_wheel_builds_offline(self):
        out = os.path.join(self.tmp, "dist")
        run(self.py, "-m", "pip", "wheel", "--no-deps", "-w", out, self.src)
        wheels = glob.glob(os.path.join(out, "tierfs_hint-*-py3-none-any.whl"))
        self.assertEqual(len(wheels), 1, os.listdir(out))
        self.assertIn(f"-{cmake_version()}-", wheels[0])

    def test_4_an_editable_install_imports_from_the_source(self):
        venv = os.path.join(self.tmp, "venv-editable")
        run(PYTHON, "-m", "venv", venv)
        py = os.path.join(venv, "bin", "python")
        run(py, "-m", "pip", "install", "--editable", self.src)
        where = run(py, "-c", "import tierfs_hint; print(tierfs_hint.__file__)").stdout.strip()
        self.assertEqual(where, os.path.join(self.src, "tierfs_hint.py"))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir")  # accepted for ctest's uniform command line
    _, rest = parser.parse_known_args()
    if subprocess.run([PYTHON, "-c", "import ensurepip, venv"], capture_output=True).returncode:
        print("SKIP: /usr/bin/python3 cannot make venvs (Debian package python3-venv)")
        sys.exit(77)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
