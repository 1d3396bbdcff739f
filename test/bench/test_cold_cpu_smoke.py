"""tools/bench/cold-cpu end to end, tiny, so the cold-epoch CPU benchmark
cannot rot: two builds given (here one build twice, as a before and an
after would be), a row per build and run with every epoch's time and the
daemon's CPU, the builds alternated within a run, a missing build refused
with a message, and no mount left behind."""
import os
import re
import subprocess

import mounts


def main():
    args = mounts.parse_args()
    tierfs = os.path.join(args.bin_dir, "tierfs")
    mounts.require_fuse(tierfs)
    checks = mounts.Checks()
    bench = os.path.join(args.source_dir, "tools", "bench", "cold-cpu")
    bin_dir = os.path.abspath(args.bin_dir)
    cmd = ["/usr/bin/python3", bench, "--bin-dir", bin_dir, "--bin-dir", bin_dir, "--files", "40",
           "--mean-kb", "16", "--runs", "2", "--epochs", "2", "--threads", "2",
           "--options", "ram=64M,passthrough=off"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    print(proc.stdout[-3000:], proc.stderr[-2000:])
    checks.check(proc.returncode == 0, f"cold-cpu exits 0 (got {proc.returncode})")
    label = f"{bin_dir} ram=64M,passthrough=off"
    rows = [line.split() for line in proc.stdout.splitlines()
            if re.match(r"\s*\d+\s", line) and label in line]
    checks.check(len(rows) == 4, f"a row per build and run ({len(rows)})")
    checks.check([r[0] for r in rows] == ["1", "1", "2", "2"],
                 f"the builds alternated within each run: {[r[0] for r in rows]}")
    for row in rows:
        numbers = [float(x) for x in row[-6:]]  # 2 epochs, CPU s, ms/file/epoch, waits, inline
        # Printed to 10 ms: a tiny epoch may show 0.00.
        checks.check(all(x >= 0 for x in numbers[:4]), f"epoch times and CPU measured: {row}")
        checks.check(numbers[5] == 40, f"each file copied into the tier once, cold: {row}")
    with open("/proc/self/mounts") as f:
        checks.check("tierfs-cold-cpu-" not in f.read(), "no mount left behind")
    bad = subprocess.run(["/usr/bin/python3", bench, "--bin-dir", bin_dir, "--bin-dir",
                          "/nonexistent/bin"], capture_output=True, text=True, timeout=60)
    checks.check(bad.returncode != 0 and "/nonexistent/bin/tierfs not found" in bad.stderr,
                 f"a missing build is refused with a message: {bad.stderr.strip()!r}")
    checks.exit()


if __name__ == "__main__":
    main()
