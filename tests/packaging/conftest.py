"""Tests of tools/packaging (wheels, versions, the alone-install check), which they import from
the repository root."""
import sys
from pathlib import Path

_REPO = str(Path(__file__).resolve().parents[2])
if _REPO not in sys.path:
    sys.path.insert(0, _REPO)
