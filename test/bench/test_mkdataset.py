"""mkdataset: deterministic per seed, log-normal sizes with the asked mean,
real JPEGs that PIL decodes, shard sizes in range, clear errors."""
import os
import subprocess
import tempfile

import mounts


def run(bin_dir, *args):
    return subprocess.run(["/usr/bin/python3", os.path.join(bin_dir, "mkdataset"), *args],
                          capture_output=True, text=True)


def tree(root):
    out = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, root)] = f.read()
    return out


def main():
    args = mounts.parse_args()
    checks = mounts.Checks()
    with tempfile.TemporaryDirectory(prefix="mkdataset-test-") as tmp:
        a, b, c = (os.path.join(tmp, x) for x in "abc")
        for out, seed in ((a, "5"), (b, "5"), (c, "6")):
            proc = run(args.bin_dir, "images", out, "--classes", "5", "--files", "400", "--seed", seed)
            checks.check(proc.returncode == 0, f"images seed {seed} generated {proc.stderr.strip()}")
        ta, tb, tc = tree(a), tree(b), tree(c)
        checks.check(ta == tb, "same seed gives the same bytes")
        checks.check(ta != tc, "another seed gives other bytes")
        checks.check(len(ta) == 400 and len(os.listdir(a)) == 5, "400 files in 5 class dirs")
        sizes = sorted(len(v) for v in ta.values())
        mean = sum(sizes) / len(sizes)
        checks.check(95e3 <= mean <= 125e3, f"mean size {mean / 1e3:.0f} KB (110 +-15)")
        checks.check(sizes[len(sizes) // 2] < mean, "median below mean (right-skewed)")

        jpegs = os.path.join(tmp, "jpeg")
        proc = run(args.bin_dir, "images", jpegs, "--classes", "2", "--files", "20", "--jpeg")
        checks.check(proc.returncode == 0, "jpeg images generated")
        try:
            from PIL import Image
            decoded = 0
            for rel in tree(jpegs):
                with Image.open(os.path.join(jpegs, rel)) as im:
                    decoded += im.convert("RGB").size[0] > 0
            checks.check(decoded == 20, f"PIL decodes all JPEGs ({decoded}/20)")
        except ImportError:
            print("note: python3-pil missing, JPEG decode not checked")

        shards = os.path.join(tmp, "shards")
        proc = run(args.bin_dir, "shards", shards, "--shards", "3", "--min-size", "1M",
                   "--max-size", "2M")
        sizes = [os.path.getsize(os.path.join(shards, n)) for n in sorted(os.listdir(shards))]
        checks.check(len(sizes) == 3 and all((1 << 20) <= s <= (2 << 20) for s in sizes),
                     f"shard sizes in [1M, 2M]: {sizes}")

        for bad in (["images", a], ["shards", os.path.join(tmp, "x"), "--min-size", "4X"],
                    ["images", os.path.join(tmp, "y"), "--files", "0"]):
            proc = run(args.bin_dir, *bad)
            checks.check(proc.returncode == 2 and "error" in proc.stderr,
                         f"bad input {bad[1:]} exits 2 with a message")
    checks.exit()


if __name__ == "__main__":
    main()
