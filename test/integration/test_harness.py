"""harness.main's exit status, which ctest reads: 77 (Skipped) when nothing
ran because a module or class setup skipped it all, with the reason printed
(test_slurm_real.py skipped so and exited 0: ctest said Passed); 0 when a
test ran and passed beside skipped ones; 1 when one failed."""
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

import harness

HERE = os.path.dirname(os.path.abspath(__file__))


class HarnessExitStatus(unittest.TestCase):
    def run_script(self, body):
        """Runs a test script made of `body` as ctest runs one; (status, output)."""
        with tempfile.NamedTemporaryFile("w", suffix=".py", prefix="tierfs-harness-") as f:
            f.write("import unittest\nimport harness\n\n" + textwrap.dedent(body) +
                    "\n\nif __name__ == '__main__':\n    harness.main()\n")
            f.flush()
            env = dict(os.environ, PYTHONPATH=HERE)
            r = subprocess.run([sys.executable, f.name, "--bin-dir", harness.BIN_DIR],
                               capture_output=True, text=True, timeout=60, env=env)
        return r.returncode, r.stdout + r.stderr

    def test_a_module_setup_that_skips_exits_77_saying_why(self):
        status, out = self.run_script("""
            def setUpModule():
                raise unittest.SkipTest("no widget daemon here")

            class T(unittest.TestCase):
                def test_a(self):
                    pass
            """)
        self.assertEqual(status, harness.SKIP, out)
        self.assertIn("SKIPPED: no widget daemon here", out)

    def test_a_class_setup_that_skips_exits_77(self):
        status, out = self.run_script("""
            class T(unittest.TestCase):
                @classmethod
                def setUpClass(cls):
                    raise unittest.SkipTest("no second user")

                def test_a(self):
                    pass
            """)
        self.assertEqual(status, harness.SKIP, out)
        self.assertIn("SKIPPED: no second user", out)

    def test_a_test_that_ran_beside_skipped_ones_exits_0(self):
        status, out = self.run_script("""
            class T(unittest.TestCase):
                def test_a(self):
                    pass

                def test_b(self):
                    self.skipTest("not here")
            """)
        self.assertEqual(status, 0, out)
        self.assertNotIn("SKIPPED", out)

    def test_a_failure_exits_1_even_after_a_skip(self):
        status, out = self.run_script("""
            class T(unittest.TestCase):
                def test_a(self):
                    self.fail("broken")

            class U(unittest.TestCase):
                @classmethod
                def setUpClass(cls):
                    raise unittest.SkipTest("not here")

                def test_b(self):
                    pass
            """)
        self.assertEqual(status, 1, out)


if __name__ == "__main__":
    harness.main()
