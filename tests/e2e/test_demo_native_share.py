# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""The share of op executions that run on native kernels in the main job (``make demo``'s
character-level GPT: forward, backward, clip_grad_norm_, the default foreach AdamW), measured
on a short run of the demo script itself."""

import os
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(600)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DEMO = os.path.join(ROOT, "tools", "demo", "train_char_gpt.py")
TARGET = 0.95


def test_demo_native_share_is_at_least_95_percent():
    env = dict(os.environ, TORCH_NEURON_FALLBACK_WARN="0")
    p = subprocess.run([sys.executable, DEMO, "--steps", "3"], capture_output=True, text=True, timeout=540, env=env)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    m = re.search(r"ops executed: (\d+)\s+native: (\d+)\s+host fallback: (\d+)", p.stdout)
    assert m, p.stdout[-3000:]
    total, native, fallback = map(int, m.groups())
    assert total == native + fallback and total > 300, m.group(0)
    share = native / total
    assert share >= TARGET, f"native share {share:.3f} < {TARGET}:\n" + p.stdout[p.stdout.index("ops executed"):]
