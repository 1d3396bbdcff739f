"""tools/bench/evict-reads end to end, tiny, so the read-latency benchmark
with full tiers cannot rot: two mounts of the build alternated (as a before
and an after would be), every read served, a row per build with its
percentiles, evictions counted (the tiers were full), bad arguments refused
with a message, and no mount left behind."""
import os
import re
import subprocess
import tempfile

import mounts


def main():
    args = mounts.parse_args()
    tierfs = os.path.join(args.bin_dir, "tierfs")
    mounts.require_fuse(tierfs)
    checks = mounts.Checks()
    bench = os.path.join(args.source_dir, "tools", "bench", "evict-reads")
    with tempfile.TemporaryDirectory(prefix="evict-reads-smoke-", dir="/var/tmp") as work:
        cmd = ["/usr/bin/python3", bench, "--bin-dir", args.bin_dir, "--bin-dir", args.bin_dir,
               "--work", work, "--files", "48", "--file-kib", "1024", "--tier-mib", "16",
               "--readers", "2", "--reads", "12", "--repeat", "1"]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=100)
        print(proc.stdout[-3000:], proc.stderr[-2000:])
        checks.check(proc.returncode == 0, f"evict-reads exits 0 (got {proc.returncode})")
        rows = [line for line in proc.stdout.splitlines()
                if line.startswith(f"| {os.path.abspath(args.bin_dir)} |")]
        checks.check(len(rows) == 2, f"a row per --bin-dir ({len(rows)})")
        for row in rows:
            cells = [c.strip() for c in row.strip("|").split("|")]
            numbers = [int(c) for c in cells[1:] if re.fullmatch(r"\d+", c)]
            checks.check(len(numbers) == 7, f"reads, p50, p99, p999 and three counters: {cells}")
            if len(numbers) == 7:
                reads, p50, p99, p999, evicted = numbers[:5]
                checks.check(reads == 2 * 12 * 8, f"every read timed ({reads})")
                checks.check(0 < p50 <= p99 <= p999, f"percentiles in order: {p50} {p99} {p999}")
                checks.check(evicted > 0, f"the tier was full: chunks evicted ({evicted})")
        with open("/proc/self/mounts") as f:
            checks.check(work not in f.read(), "no mount left behind")
        bad = subprocess.run(["/usr/bin/python3", bench, "--bin-dir", args.bin_dir, "--work", work,
                              "--files", "4", "--tier-mib", "16"],
                             capture_output=True, text=True, timeout=60)
        checks.check(bad.returncode != 0 and "larger than the tiers" in bad.stderr,
                     f"a dataset that fits is refused with a message: {bad.stderr.strip()!r}")
    checks.exit()


if __name__ == "__main__":
    main()
