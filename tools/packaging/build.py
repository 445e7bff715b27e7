"""One package's wheel and sdist into ``dist/``, then the wheel into the running environment.

The wheel is built without build isolation, against this environment (the workspace venv,
where the packages it needs are installed), so scikit-build-core reuses the package's build
tree ``packages/<name>/build/<wheel tag>/`` and recompiles only what changed. Files of other
versions of the same distribution are removed from ``dist/``, so ``--find-links dist`` sees
one version of each package.
"""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

from .workspace import DIST, Package

PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]


def build(pkg: Package, dist: Path = DIST, jobs: int = 2) -> tuple[Path, Path]:
    """Builds pkg's wheel and sdist into dist; returns their paths."""
    dist.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, CMAKE_BUILD_PARALLEL_LEVEL=str(jobs))
    subprocess.run(PIP + ["wheel", "--no-build-isolation", "--no-deps", "--wheel-dir", str(dist), str(pkg.path)],
                   check=True, env=env)
    wheel = pkg.wheel(dist)
    if wheel is None:
        raise SystemExit(f"build: pip wheel wrote no {pkg.file_stem}-*.whl into {dist}")
    # The PEP 517 sdist hook, as a build frontend calls it: in the package directory.
    hook = subprocess.run([sys.executable, "-c", "import importlib, sys; importlib.import_module(sys.argv[1]).build_sdist(sys.argv[2])",
                           pkg.build_backend, str(dist.resolve())], cwd=pkg.path, env=env, capture_output=True, text=True,
                           check=False)
    sdist = pkg.sdist(dist)
    if hook.returncode != 0 or not sdist.is_file():
        raise SystemExit(f"build: the sdist hook of {pkg.build_backend} wrote no {sdist.name} into {dist}:\n"
                         f"{(hook.stdout + hook.stderr).strip()}")
    prefix = pkg.file_stem.split("-")[0] + "-"
    for old in dist.iterdir():
        if old.name.startswith(prefix) and old not in (wheel, sdist) and old.name.endswith((".whl", ".tar.gz")):
            old.unlink()
    return wheel, sdist


def _installed_as_built(wheel: Path) -> bool:
    """Whether this environment holds the wheel's files, byte for byte (same hashes)."""
    name, version = wheel.name.split("-")[:2]
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return False
    if dist.version != version:
        return False
    # pip adds the console scripts (../../../bin/...), byte code and a few dist-info files.
    added = ("INSTALLER", "REQUESTED", "direct_url.json", "RECORD")
    installed = {(str(f), f.hash.value) for f in dist.files or () if f.hash and not str(f).startswith("../")
                 and "__pycache__/" not in str(f) and not (".dist-info/" in str(f) and f.name in added)}
    if not all(f.locate().is_file() for f in dist.files or ()):
        return False
    with zipfile.ZipFile(wheel) as z:
        record = next(n for n in z.namelist() if n.endswith(".dist-info/RECORD"))
        rows = csv.reader(io.StringIO(z.read(record).decode()))
        built = {(path, digest.split("=", 1)[1]) for path, digest, *_ in rows if digest}
    return installed == built


def install(wheel: Path) -> None:
    """Installs the wheel into this environment in place of the installed version (its
    dependencies are the workspace's, installed before it). A wheel whose files are already
    installed is left alone: rewriting them would make every package compiled against its
    headers recompile."""
    if _installed_as_built(wheel):
        return
    subprocess.run(PIP + ["install", "--no-deps", "--force-reinstall", str(wheel)], check=True)


def size(path: Path) -> str:
    return f"{path.stat().st_size / 2**20:.1f} MiB"
