"""Where upstream PyTorch test files come from.

The wheel ships no test/*.py, so the files come from a PyTorch source tree: PYTORCH_SRC, or
Debian's ``pytorch`` source package fetched into third_party/ (git-ignored). That tree may be
of another torch version than the installed wheel; files.py runs each file on cpu first.
"""

from __future__ import annotations

import pathlib
import subprocess

REPO = pathlib.Path(__file__).resolve().parents[2]
FETCH_DIR = REPO / "third_party" / "pytorch-debian"
# Debian trixie's source package; the newer sid one is listed but not served (facts sheet 5.5).
DEBIAN_SUITE = "trixie"
DEBIAN_VERSION = "2.6.0+dfsg-7"


def locate(pytorch_src=None, fetch=False):
    if pytorch_src:
        tree = pathlib.Path(pytorch_src).expanduser().resolve()
        if not (tree / "test").is_dir():
            raise SystemExit(f"PYTORCH_SRC={tree} has no test/ directory")
        return tree
    existing = sorted(FETCH_DIR.glob("pytorch-*/test"))
    if existing:
        return existing[-1].parent
    if fetch:
        return fetch_debian()
    return None


def fetch_debian():
    """apt-get source with a private apt configuration (the system's sources stay untouched)."""
    apt = FETCH_DIR / "apt"
    (apt / "lists" / "partial").mkdir(parents=True, exist_ok=True)
    (apt / "sources.list").write_text(f"deb-src http://deb.debian.org/debian {DEBIAN_SUITE} main\n")
    opts = ["-o", f"Dir::Etc::SourceList={apt / 'sources.list'}", "-o", "Dir::Etc::SourceParts=-",
            "-o", f"Dir::State::Lists={apt / 'lists'}", "-o", "APT::Get::List-Cleanup=0"]
    subprocess.run(["apt-get", *opts, "update"], check=True, capture_output=True)
    subprocess.run(["apt-get", *opts, "source", "--download-only", f"pytorch={DEBIAN_VERSION}"],
                   check=True, cwd=FETCH_DIR, capture_output=True)
    tarball = sorted(FETCH_DIR.glob("pytorch_*.orig.tar.*"))[-1]
    subprocess.run(["tar", "-xf", str(tarball), "--wildcards", "*/test/*"], check=True, cwd=FETCH_DIR)
    return sorted(p.parent for p in FETCH_DIR.glob("*/test"))[-1]


if __name__ == "__main__":
    import sys

    print(locate(sys.argv[1] if len(sys.argv) > 1 else None, fetch=True))
