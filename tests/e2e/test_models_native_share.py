# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""The share of op executions that run on native kernels in nine tiny Hugging Face models
(decoders, an encoder, an encoder-decoder, a vision transformer and two mixtures of experts),
each trained through the architecture sweep's own case (`tools.models`: forward with loss,
backward, one AdamW step, a second forward), measured per model."""

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(900)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MODELS = ("gpt2", "llama", "mistral", "qwen2", "bert", "t5", "vit", "mixtral", "qwen2_moe")
TARGET = 0.90


def test_every_model_runs_at_least_90_percent_of_its_ops_natively(tmp_path):
    env = dict(os.environ, TORCH_NEURON_FALLBACK_WARN="0")
    r = subprocess.run([sys.executable, "-m", "tools.models.run", "--archs", ",".join(MODELS), "--workers", "1",
                        "--out", str(tmp_path)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=840)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    records = {rec["arch"]: rec for rec in json.loads((tmp_path / "dashboard.json").read_text())["records"]}
    assert set(records) == set(MODELS)
    rows, low = [], []
    for arch in MODELS:
        rec = records[arch]
        assert rec["status"] == "pass", (arch, rec.get("error"))
        native, fallback = int(rec["ops_native"]), int(rec["ops_fallback"])
        assert native + fallback > 100, (arch, native, fallback)
        share = native / (native + fallback)
        ops = rec.get("fallback_ops") or {}
        rows.append(f"{arch:<10} {share:.3f} ({native} native, {fallback} host: "
                    + ", ".join(f"{op} x{n}" for op, n in sorted(ops.items(), key=lambda x: -x[1])) + ")")
        assert sum(ops.values()) == fallback, (arch, ops, fallback)
        if share < TARGET:
            low.append(arch)
    print("\n".join(rows))
    assert not low, f"native share below {TARGET} for {', '.join(low)}:\n" + "\n".join(rows)
