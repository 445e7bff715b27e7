"""Shape-only execution against executed runs of the same programs, and its CLI."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
FAST = ["char_gpt", "llama_generate"]
# make test-projection runs every workload (TORCH_NEURON_PROJECTION_FULL=1).
ALL = ["char_gpt", "llama_generate", "llama_train", "bert_train"]
WORKLOADS = ALL if os.environ.get("TORCH_NEURON_PROJECTION_FULL") == "1" else FAST


def _run(workload: str, mode: str) -> dict:
    env = dict(os.environ, TORCH_NEURON_FALLBACK_WARN="0")
    r = subprocess.run([sys.executable, os.path.join(HERE, "workloads.py"), workload, mode], env=env,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("workload", WORKLOADS)
def test_shape_only_matches_executed_run(workload):
    executed, shape_only = _run(workload, "executed"), _run(workload, "shape-only")
    assert shape_only["launches"] == executed["launches"]  # same ops, decisions and cost models, in order
    assert shape_only["ops"] == executed["ops"]  # native/host counts per op
    assert shape_only["durations"] == executed["durations"]  # device time of each launch, to the picosecond
    assert shape_only["tensor_peak_bytes"] == executed["tensor_peak_bytes"]
    assert shape_only["scratch_peak_bytes"] <= executed["scratch_peak_bytes"]


def test_compiled_shape_only_runs_the_same_launches():
    executed, shape_only = _run("char_gpt_compiled", "executed"), _run("char_gpt_compiled", "shape-only")
    assert shape_only["launches"] == executed["launches"]
    assert shape_only["ops"] == executed["ops"]
    assert shape_only["tensor_peak_bytes"] == executed["tensor_peak_bytes"]


def test_cli_bad_input_is_one_line(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("print('hi')\n")
    r = subprocess.run([sys.executable, "-m", "torch_neuron.projection", "--shape-only", "--profiles", "trn9",
                        str(script)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "trn9" in r.stderr
    r = subprocess.run([sys.executable, "-m", "torch_neuron.projection", "--shape-only", "--seq-arg=--seq",
                        str(script)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "--seq" in r.stderr and r.stderr.strip().count("\n") == 0
