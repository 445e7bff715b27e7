# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""Inference graphs fold parameter-only work (autocast's weight casts): computed once, recomputed
when a parameter changes, and the compiled values stay equal to eager's."""
from __future__ import annotations

import neuron_sim
import pytest
import torch
from compile_helpers import DEV
from torch import nn

pytestmark = pytest.mark.timeout(300)


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 32)).to(DEV)


def _launches(fn):
    torch.neuron.synchronize()
    n0 = len(neuron_sim.timeline(DEV.index or 0))
    out = fn()
    torch.neuron.synchronize()
    return out, [r.name for r in neuron_sim.timeline(DEV.index or 0)[n0:]]


@pytest.mark.parametrize("freeze", [True, False])
def test_autocast_weight_casts_run_once_per_parameter_version(freeze):
    m = _model()
    x = torch.randn(16, 64, device=DEV)
    torch._dynamo.reset()
    c = torch.compile(m, backend="neuron", options={"freeze_parameters": freeze})
    with torch.inference_mode(), torch.autocast("neuron", dtype=torch.bfloat16):
        ref = m(x)
        c(x)
        out, names = _launches(lambda: c(x))
        # Only the input's cast is left per call when folding (two weights, two biases otherwise).
        assert names.count("aten::copy_") == (1 if freeze else 5), names
        torch.testing.assert_close(out, ref)
        # In-place updates (a fine-tuning step, load_state_dict) and replaced parameters are seen.
        with torch.no_grad():
            m[0].weight.mul_(2)
        torch.testing.assert_close(c(x), m(x))
        m[2].weight = nn.Parameter(torch.randn(32, 128, device=DEV))
        torch.testing.assert_close(c(x), m(x))


def test_training_graphs_are_not_folded():
    """With autograd on, the forward keeps the casts: their gradients flow to the fp32 weights."""
    m = _model()
    ref = _model()
    x = torch.randn(16, 64, device=DEV)
    torch._dynamo.reset()
    c = torch.compile(m, backend="neuron")
    for model in (c, ref):
        with torch.autocast("neuron", dtype=torch.bfloat16):
            model(x).float().square().mean().backward()
    for p, q in zip(m.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=2e-2, atol=2e-3)
