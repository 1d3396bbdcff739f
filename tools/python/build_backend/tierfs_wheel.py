"""The helper's own PEP 517 build backend: it builds the one-module wheel (and
an sdist) with the standard library alone, so `pip install ./tools/python`
needs no package index and no setuptools or wheel (pyproject.toml names it
with `backend-path`). Hooks: build_wheel, build_sdist, and the optional
get_requires_for_build_* (nothing) and build_editable (a .pth file)."""
import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

NAME = "tierfs_hint"          # the module, and the distribution's normalized name
DIST = "tierfs-hint"
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUMMARY = "Declare a training job's read order to a tierfs mount (MOUNT/.tierfs/order)"
TAG = "py3-none-any"


def _version():
    with open(os.path.join(HERE, NAME + ".py"), encoding="utf-8") as f:
        return re.search(r'^__version__ = "([^"]+)"', f.read(), re.M).group(1)


def _metadata():
    with open(os.path.join(HERE, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    return (f"Metadata-Version: 2.1\nName: {DIST}\nVersion: {_version()}\n"
            f"Summary: {SUMMARY}\nRequires-Python: >=3.8\n"
            "Classifier: Programming Language :: Python :: 3\n"
            "Classifier: Operating System :: POSIX :: Linux\n"
            "Classifier: Topic :: System :: Filesystems\n"
            "Description-Content-Type: text/markdown\n\n" + readme)


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _wheel(directory, files):
    """Writes a wheel of `files` ({name in the wheel: bytes}); its file name."""
    info = f"{NAME}-{_version()}.dist-info"
    files = dict(files)
    files[f"{info}/METADATA"] = _metadata().encode()
    files[f"{info}/WHEEL"] = (f"Wheel-Version: 1.0\nGenerator: {NAME} build_backend\n"
                              f"Root-Is-Purelib: true\nTag: {TAG}\n").encode()
    record = [_record_line(n, d) for n, d in files.items()] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    name = f"{NAME}-{_version()}-{TAG}.whl"
    with zipfile.ZipFile(os.path.join(directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for n, d in files.items():
            z.writestr(zipfile.ZipInfo(n, date_time=(2020, 1, 1, 0, 0, 0)), d)
    return name


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    with open(os.path.join(HERE, NAME + ".py"), "rb") as f:
        return _wheel(wheel_directory, {NAME + ".py": f.read()})


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory, {f"_{NAME}_editable.pth": (HERE + "\n").encode()})


def build_sdist(sdist_directory, config_settings=None):
    base = f"{NAME}-{_version()}"
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        for rel in ("pyproject.toml", "README.md", NAME + ".py", "build_backend/tierfs_wheel.py"):
            t.add(os.path.join(HERE, rel), arcname=f"{base}/{rel}")
        pkg = f"Metadata-Version: 2.1\nName: {DIST}\nVersion: {_version()}\n".encode()
        member = tarfile.TarInfo(f"{base}/PKG-INFO")
        member.size = len(pkg)
        t.addfile(member, io.BytesIO(pkg))
    return name
