"""``build``: repack the installed torch wheel with the series and install it into .venv-patched.

Only the Python files change, so no compiler is needed for torch itself: the installed
files are read back through the wheel's RECORD (hashes verified), the patched Python files
replace theirs, and a new dist-info (version ``2.13.0+pu1``, fresh RECORD) is written.
C++ patches are skipped here: a repacked wheel cannot carry them (``check`` verifies them).
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

from .series import REPO, SERIES_FILE, TORCH_VERSION, SeriesError, load_series
from .tree import installed_torch, patch_contents

LOCAL_TAG = "pu1"
PATCHED_VERSION = f"{TORCH_VERSION}+{LOCAL_TAG}"
VENV = REPO / ".venv-patched"
DIST_DIR = REPO / "build" / "patches" / "dist"
STAMP = VENV / ".patched-torch.stamp"
# Dependency order and dependencies, as the Makefile installs them into .venv.
PACKAGES = ("neuron-sim", "neuron-kernels", "neuron-ccl", "torch-neuron")
DEPENDS = {
    "neuron-kernels": ("neuron-sim",),
    "neuron-ccl": ("neuron-sim",),
    "torch-neuron": ("neuron-sim", "neuron-kernels", "neuron-ccl"),
}
_SKIP_PARTS = {"build", "__pycache__", ".pytest_cache"}
# Bumped when the build recipe changes, so existing environments are rebuilt.
_RECIPE = "2"


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def _package_dirs() -> list[Path]:
    return [REPO / "packages" / p for p in PACKAGES if (REPO / "packages" / p / "pyproject.toml").is_file()]


def _package_files(pkg: Path):
    for path in sorted(pkg.rglob("*")):
        rel = path.relative_to(pkg)
        if path.is_file() and not (_SKIP_PARTS & set(rel.parts)) and path.suffix != ".so" and ".egg-info" not in str(rel):
            yield path


def _torch_key(dist) -> str:
    h = hashlib.sha256(_RECIPE.encode())
    h.update(dist.version.encode())
    h.update(dist.read_text("RECORD").encode())
    h.update(SERIES_FILE.read_bytes())
    for patch in load_series():
        h.update(patch.file.read_bytes())
    return h.hexdigest()


def _package_key(pkg: Path) -> str:
    h = hashlib.sha256()
    for path in _package_files(pkg):
        h.update(str(path.relative_to(REPO)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def _platlib(python: Path) -> Path:
    out = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])"],
                         check=True, capture_output=True, text=True).stdout
    return Path(out.strip())


def _keep_header_mtimes(site: Path, patched_site: Path) -> None:
    """Give the reinstalled torch's headers the vanilla headers' mtimes.

    They are byte-identical (only Python files are patched), but pip writes them with a
    new mtime, which would make ninja recompile every extension built against them.
    """
    vanilla_include = site / "torch" / "include"
    for header in (patched_site / "torch" / "include").rglob("*"):
        original = vanilla_include / header.relative_to(patched_site / "torch" / "include")
        if header.is_file() and original.is_file():
            stat = original.stat()
            os.utime(header, ns=(stat.st_atime_ns, stat.st_mtime_ns))


_HEADER_SUFFIXES = {".h", ".hpp", ".hh", ".inl", ".cuh"}


def _package_headers(patched_site: Path) -> dict[Path, tuple[bytes, int]]:
    """Installed workspace-package headers: path -> (content hash, mtime)."""
    headers = {}
    for path in patched_site.rglob("*"):
        if path.suffix in _HEADER_SUFFIXES and path.parts[len(patched_site.parts)] != "torch" and path.is_file():
            headers[path] = (hashlib.sha256(path.read_bytes()).digest(), path.stat().st_mtime_ns)
    return headers


def _restore_unchanged_mtimes(before: dict[Path, tuple[bytes, int]]) -> None:
    # A reinstalled package rewrites its headers; unchanged ones keep their old mtime
    # so the packages built against them stay incremental.
    for path, (digest, mtime) in before.items():
        if path.is_file() and hashlib.sha256(path.read_bytes()).digest() == digest:
            os.utime(path, ns=(mtime, mtime))


def _wheel_tag(dist) -> str:
    tags = [line.split(":", 1)[1].strip() for line in dist.read_text("WHEEL").splitlines() if line.startswith("Tag:")]
    if len(tags) != 1:
        raise SeriesError(f"expected one Tag in torch's WHEEL file, found {tags}")
    return tags[0]


def _metadata(dist) -> str:
    lines = dist.read_text("METADATA").split("\n")
    for i, line in enumerate(lines):
        if line.startswith("Version: "):
            lines[i] = f"Version: {PATCHED_VERSION}"
            break
    else:
        raise SeriesError("torch METADATA has no Version field")
    return "\n".join(lines)


def repack_wheel(out_dir: Path = DIST_DIR) -> Path:
    """Write torch-<version>+pu1 with the Python patches applied; returns the wheel path."""
    site, dist = installed_torch()
    patches = load_series()
    patched = {k: v.encode() for k, v in patch_contents(patches, site, "wheel", include_cpp=False).items()}
    old_info = f"torch-{dist.version}.dist-info"
    new_info = f"torch-{PATCHED_VERSION}.dist-info"
    tag = _wheel_tag(dist)
    out_dir.mkdir(parents=True, exist_ok=True)
    wheel = out_dir / f"torch-{PATCHED_VERSION}-{tag}.whl"
    tmp = wheel.with_suffix(".tmp")
    record: list[tuple[str, str, int]] = []
    used = set()

    def add(zf: zipfile.ZipFile, name: str, data: bytes, mode: int = 0o644) -> None:
        info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
        info.external_attr = (0o100000 | mode) << 16
        # Stored, not deflated: torch's shared libraries do not shrink much and
        # compressing 750 MB would dominate the build on two cores.
        zf.writestr(info, data, compress_type=zipfile.ZIP_STORED)
        record.append((name, _record_hash(data), len(data)))

    with zipfile.ZipFile(tmp, "w", allowZip64=True) as zf:
        for row in csv.reader(io.StringIO(dist.read_text("RECORD"))):
            name, digest = row[0], row[1]
            if name.startswith(("../", old_info + "/")) or "__pycache__" in name:
                continue  # scripts are regenerated by pip from entry_points; dist-info is rewritten
            src = site / name
            data = src.read_bytes()
            if digest and _record_hash(data) != digest:
                raise SeriesError(f"{src} differs from torch's RECORD: the installed torch was modified; reinstall torch=={TORCH_VERSION}")
            if name in patched:
                data = patched[name]
                used.add(name)
            add(zf, name, data, 0o755 if os.access(src, os.X_OK) else 0o644)
        missing = set(patched) - used
        if missing:
            raise SeriesError(f"patched files not listed in torch's RECORD: {sorted(missing)}")
        info_dir = site / old_info
        for path in sorted(info_dir.rglob("*")):
            rel = path.relative_to(info_dir).as_posix()
            if path.is_file() and rel not in {"RECORD", "INSTALLER", "REQUESTED", "direct_url.json", "METADATA"}:
                add(zf, f"{new_info}/{rel}", path.read_bytes())
        add(zf, f"{new_info}/METADATA", _metadata(dist).encode())
        series = "".join(f"{p.file.name}\n" for p in patches if not p.needs_rebuild)
        add(zf, f"{new_info}/PATCHES", series.encode())
        lines = io.StringIO()
        writer = csv.writer(lines, lineterminator="\n")
        writer.writerows(record)
        writer.writerow((f"{new_info}/RECORD", "", ""))
        zf.writestr(zipfile.ZipInfo(f"{new_info}/RECORD", date_time=(2026, 1, 1, 0, 0, 0)), lines.getvalue())
    tmp.replace(wheel)
    return wheel


def _pip(python: Path, *args: str, env: dict | None = None) -> None:
    cmd = [str(python), "-m", "pip", "--disable-pip-version-check", "-q", *args]
    start = time.monotonic()
    print("  $ pip " + " ".join(args), flush=True)
    subprocess.run(cmd, check=True, cwd=REPO, env=env)
    print(f"    ({time.monotonic() - start:.0f} s)", flush=True)


def _scikit_build(pkg: Path) -> bool:
    return "[tool.scikit-build]" in (pkg / "pyproject.toml").read_text()


def build(force: bool = False) -> Path:
    """Bring .venv-patched up to date; returns its Python interpreter."""
    site, dist = installed_torch()
    if "+" + LOCAL_TAG in dist.version:
        raise SeriesError("run `build` with the vanilla interpreter (.venv/bin/python), not the patched one")
    python = VENV / "bin" / "python"
    packages = _package_dirs()
    keys = {
        "torch": _torch_key(dist),
        "requirements": hashlib.sha256((REPO / "ci" / "requirements-dev.txt").read_bytes()).hexdigest(),
        "packages": {pkg.name: _package_key(pkg) for pkg in packages},
    }
    old = json.loads(STAMP.read_text()) if STAMP.is_file() and python.exists() and not force else {}
    if old == keys:
        print(f"build: {VENV.name} is up to date (torch {PATCHED_VERSION}, series and packages unchanged)")
        return python
    start = time.monotonic()
    if not python.exists():
        print(f"build: creating {VENV}")
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    # Pin torch to the repacked build in every pip call so nothing pulls another torch.
    constraints = VENV / "constraints.txt"
    constraints.write_text(f"torch=={PATCHED_VERSION}\n")
    env = dict(os.environ, PIP_CONSTRAINT=str(constraints))
    if old.get("torch") != keys["torch"]:
        wheel = repack_wheel()
        print(f"build: repacked {wheel.relative_to(REPO)} ({wheel.stat().st_size >> 20} MiB)")
        _pip(python, "install", "--no-compile", "--force-reinstall", "--no-deps", str(wheel), env=env)
        if "torch" not in old:  # first build: torch's own dependencies too
            _pip(python, "install", "--no-compile", str(wheel), env=env)
        _keep_header_mtimes(site, _platlib(python))
        # Stamp each step as it completes, so a failed package build does not redo torch.
        old = {**old, "torch": keys["torch"]}
        STAMP.write_text(json.dumps(old))
    if old.get("requirements") != keys["requirements"]:
        _pip(python, "install", "-r", "ci/requirements-dev.txt", env=env)
        old = {**old, "requirements": keys["requirements"]}
        STAMP.write_text(json.dumps(old))
    # As the Makefile does: a package is reinstalled when its files changed or a package
    # it depends on was reinstalled. torch's binaries never change here, so a new series
    # alone rebuilds nothing.
    installed = dict(old["packages"]) if isinstance(old.get("packages"), dict) else {}
    patched_site = _platlib(python)
    rebuilt: set[str] = set()
    for pkg in packages:
        changed = installed.get(pkg.name) != keys["packages"][pkg.name]
        if not changed and not rebuilt & set(DEPENDS.get(pkg.name, ())):
            continue
        extra = []
        if _scikit_build(pkg):
            # A build directory of its own: sharing .venv's would make each
            # environment reconfigure and rebuild the other's objects.
            extra = ["-C", "build-dir=build/patched-{wheel_tag}"]
        headers = _package_headers(patched_site)
        _pip(python, "install", "--no-build-isolation", "--no-deps", *extra, f"./{pkg.relative_to(REPO)}", env=env)
        _restore_unchanged_mtimes(headers)
        rebuilt.add(pkg.name)
        installed[pkg.name] = keys["packages"][pkg.name]
        STAMP.write_text(json.dumps({**old, "packages": installed}))
    STAMP.write_text(json.dumps(keys))
    print(f"build: {VENV.name} ready in {time.monotonic() - start:.0f} s (torch {PATCHED_VERSION})")
    return python


def run(force: bool = False) -> int:
    try:
        build(force=force)
    except (SeriesError, subprocess.CalledProcessError) as e:
        print(f"build: {e}")
        return 1
    return 0
