"""systemd readiness (Type=notify): the daemon sends READY=1 once the kernel
shows the mount (not before), STATUS= lines on the way, and STOPPING=1 when
SIGTERM (systemctl stop) begins the shutdown; it then unmounts and exits 0.
The unit file's own command line is what runs (tools/systemd/tierfs@.service).
No systemd needed: the test is the service manager (systemd_unit.py)."""
import os
import signal
import tempfile
import unittest

import harness
import systemd_unit

UNIT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "systemd",
                    "tierfs@.service")


class SystemdNotify(unittest.TestCase):
    def setUp(self):
        self.work = harness.workdir()
        self.src, self.mnt = self.work.__enter__()
        self.addCleanup(self.work.__exit__, None, None, None)
        self.files = harness.make_files(self.src, 20, 4096)
        self.notify = systemd_unit.NotifySocket()
        self.addCleanup(self.notify.close)
        self.log = tempfile.TemporaryFile(mode="w+")
        self.addCleanup(self.log.close)

    def run_unit(self, source, options="ram=16M"):
        env = {"SOURCE": source, "MOUNTPOINT": self.mnt, "OPTIONS": options}
        argv = systemd_unit.exec_start(UNIT, env, binary=harness.tierfs_bin())
        proc = systemd_unit.start(argv, self.notify, self.log)
        self.addCleanup(lambda: proc.poll() is None and (proc.kill(), proc.wait()))
        return proc

    def output(self):
        self.log.seek(0)
        return self.log.read()

    def test_the_unit_is_type_notify_and_does_not_poll(self):
        fields = systemd_unit.unit_fields(UNIT)
        self.assertEqual(fields["Type"], ["notify"])
        self.assertNotIn("ExecStartPost", fields)
        self.assertNotIn("ExecReload", fields)  # nothing to reload: `systemctl reload` is refused
        self.assertIn(" -f ", fields["ExecStart"][0])

    def test_ready_once_mounted_then_stopping_on_sigterm_and_a_clean_exit(self):
        proc = self.run_unit(self.src)
        ready = self.notify.wait_for("READY")
        self.assertIsNotNone(ready, self.output())
        # READY=1 means the kernel shows the mount: no polling needed after it.
        self.assertTrue(harness.is_mounted(self.mnt))
        self.assertIn("20 files", ready.get("STATUS", ""))
        self.assertTrue(any(m.get("STATUS", "").startswith("scanning ")
                            for m in self.notify.messages))
        rel, data = next(iter(self.files.items()))
        with open(os.path.join(self.mnt, rel), "rb") as f:
            self.assertEqual(f.read(), data)
        proc.send_signal(signal.SIGTERM)  # systemctl stop
        self.assertEqual(proc.wait(timeout=30), 0, self.output())
        self.assertIsNotNone(self.notify.wait_for("STOPPING", timeout=1))
        self.assertFalse(harness.is_mounted(self.mnt))

    def test_a_failed_start_is_never_reported_ready(self):
        proc = self.run_unit(os.path.join(self.src, "missing"))
        self.assertNotEqual(proc.wait(timeout=30), 0)
        self.assertIsNone(self.notify.wait_for("READY", timeout=0.5))
        self.assertFalse(harness.is_mounted(self.mnt))


if __name__ == "__main__":
    harness.main()
