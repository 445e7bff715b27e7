"""(long) Every sdist in ``dist/`` built into a wheel the way pip builds one for a user: with
build isolation, the build requirements resolved from ``dist/`` (the workspace packages) and
pip's configured sources (scikit-build-core, pybind11, torch==2.13.0), and each wheel audited
like the build's (``audit.py``). Each build compiles from scratch in a temporary directory,
torch-neuron for about 6 minutes on 2 cores.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .audit import audit
from .workspace import DIST, packages


def main(jobs: int = 2) -> int:
    failed = []
    env = dict(os.environ, CMAKE_BUILD_PARALLEL_LEVEL=str(jobs))
    with tempfile.TemporaryDirectory(prefix="sdist-wheels-") as out:
        for pkg in packages():
            sdist = pkg.sdist(DIST)
            if not sdist.is_file():
                print(f"== {sdist.name}: missing, run 'make wheels'")
                failed.append(pkg.name)
                continue
            start = time.monotonic()
            p = subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", "wheel", "--no-deps",
                                "--find-links", str(DIST), "--wheel-dir", out, str(sdist)],
                               env=env, capture_output=True, text=True, check=False)
            took = time.monotonic() - start
            wheel = pkg.wheel(Path(out))
            found = audit(wheel) if p.returncode == 0 and wheel else []
            if p.returncode != 0 or found:
                failed.append(pkg.name)
                print("\n".join([f"== {sdist.name}: FAILED after {took:.0f} s", (p.stdout + p.stderr).strip(), *found]))
            else:
                print(f"== {sdist.name}: built {wheel.name} with build isolation in {took:.0f} s")
    if failed:
        print(f"sdists: {len(failed)} failed: {', '.join(failed)}")
    return 1 if failed else 0
