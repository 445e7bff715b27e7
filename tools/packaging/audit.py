"""A wheel carries no path of the machine that built it.

Copied to another directory or machine of the same platform, a wheel must install and run:
no file in it may name the checkout, the build's Python environments or a temporary build
directory (``__FILE__`` strings, generated files), and every run path of its ELF files must
be relative to the file (``$ORIGIN``).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from .workspace import ROOT


def build_machine_paths() -> list[bytes]:
    """Absolute paths that exist only on the build machine."""
    paths = {str(ROOT), sys.prefix, sys.base_prefix, str(Path.home()) + "/", "/tmp/pip-"}
    return sorted(p.encode() for p in paths if p not in ("/", "//"))


def _run_paths(elf: bytes) -> list[str] | None:
    """The RPATH/RUNPATH entries of an ELF file, None when readelf cannot read it."""
    with tempfile.NamedTemporaryFile(suffix=".so") as f:
        f.write(elf)
        f.flush()
        try:
            out = subprocess.run(["readelf", "-d", f.name], capture_output=True, text=True, check=False)
        except FileNotFoundError:
            return None
    if out.returncode != 0:
        return None
    entries = []
    for line in out.stdout.splitlines():
        if "(RPATH)" in line or "(RUNPATH)" in line:
            entries += line.split("[", 1)[1].rstrip("]").split(":")
    return entries


def audit(wheel: Path) -> list[str]:
    """What in the wheel ties it to the build machine, one line each."""
    found = []
    needles = build_machine_paths()
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            data = z.read(info)
            for needle in needles:
                if needle in data:
                    found.append(f"{wheel.name}: {info.filename} contains the build machine's path "
                                 f"{needle.decode()!r}")
            if data[:4] == b"\x7fELF":
                entries = _run_paths(data)
                if entries is None:
                    found.append(f"{wheel.name}: {info.filename}: readelf -d could not read it")
                    continue
                for entry in entries:
                    if not entry.startswith("$ORIGIN"):  # an empty entry is the working directory
                        found.append(f"{wheel.name}: {info.filename} has the run path {entry!r}, "
                                     "not relative to $ORIGIN")
    return found
