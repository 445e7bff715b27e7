"""Hugging Face transformers / accelerate / peft on device "neuron", as their users run them.

Every test records the distinct ops that ran on the host instead of the device
(`torch_neuron.get_fallback_ops()`, workers report theirs); the record is printed at the end
of the run and written to build/ecosystem/fallback_ops.json.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

try:
    import accelerate  # noqa: F401
    import peft  # noqa: F401
    import transformers  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(f"{e}: tests/ecosystem needs its clients; run `make install` "
                      "(it installs tests/ecosystem/requirements.txt into .venv)") from e

import torch_neuron

REPORT = Path(__file__).resolve().parents[2] / "build" / "ecosystem" / "fallback_ops.json"
_fallbacks: dict[str, list[str]] = {}


@pytest.fixture(autouse=True)
def fallback_ops(request):
    """Ops that fell back during the test; extend it with what subprocesses report."""
    torch_neuron.clear_op_tracking()
    extra: set[str] = set()
    yield extra
    _fallbacks[request.node.nodeid] = sorted(set(torch_neuron.get_fallback_ops()) | extra)


def pytest_terminal_summary(terminalreporter):
    if not _fallbacks:
        return
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps(_fallbacks, indent=1, sort_keys=True) + "\n")
    terminalreporter.section("ops that fell back to host execution, per ecosystem test")
    for nodeid, ops in sorted(_fallbacks.items()):
        terminalreporter.write_line(f"{nodeid.split('::', 1)[-1]}: {', '.join(ops) or '(none)'}")
    terminalreporter.write_line(f"(written to {REPORT})")
