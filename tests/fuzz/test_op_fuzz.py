"""The bounded op-fuzzing run (fixed seed): every oracle of tests/fuzz/oracle.py holds for each
example, or the finding is recorded with its reason in known_findings.yaml, and every op
reaches its native kernel in at least as many examples as native_floors.yaml says. It runs
in a subprocess so that a crash or a hang (the per-example watchdog) fails this test with
the run's output instead of ending pytest."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.timeout(240)
def test_bounded_fuzz_run_holds_every_oracle_and_native_floor():
    env = dict(os.environ, TORCH_NEURON_FALLBACK_WARN="0")
    env.pop("TORCH_NEURON_SANITIZE", None)
    proc = subprocess.run([sys.executable, "-m", "tests.fuzz.run"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=230)
    assert proc.returncode == 0, f"fuzz run failed ({proc.returncode}):\n{proc.stdout[-8000:]}\n{proc.stderr[-4000:]}"
    assert "fuzz: " in proc.stdout and " examples in " in proc.stdout, proc.stdout
