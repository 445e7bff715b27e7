"""The allocator soak (tools/bench/allocator_soak.py) at a bounded size: 50k mixed allocations,
frees, cross-stream copies, record_stream and empty_cache calls on four streams. Every counter
is back to zero after the last free and empty_cache, and reserved memory stays within its
bound; the full 10-million-operation run is the script itself."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "tools", "bench", "allocator_soak.py")


@pytest.mark.timeout(300)
@pytest.mark.parametrize("seed,streams", [(0, 4), (1, 2)])
def test_bounded_allocator_soak_returns_every_counter_to_zero(seed, streams):
    env = dict(os.environ, TORCH_NEURON_FALLBACK_WARN="0")
    proc = subprocess.run([sys.executable, SCRIPT, "--ops", "50000", "--seed", str(seed),
                           "--streams", str(streams), "--json"],
                          env=env, capture_output=True, text=True, timeout=280, check=False)
    assert proc.returncode in (0, 1), proc.stderr
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    assert all(v == 0 for v in r["residual_after_empty_cache"].values()), r
    assert r["peak_reserved_bytes"] <= r["reserved_bound_bytes"], r
    assert r["num_ooms"] == 0
    assert r["num_device_alloc"] == r["num_device_free"] > 0, r
    c = r["counts"]
    assert sum(c.values()) == 50000 and min(c["alloc"], c["free"], c["copy"], c["record_stream"]) > 1000, c
    assert 0.0 <= r["fragmentation_mean"] <= r["fragmentation_max"] < 1.0
    assert proc.returncode == 0, proc.stderr
