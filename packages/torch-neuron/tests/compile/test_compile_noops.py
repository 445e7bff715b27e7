# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""The drop_noops pass (copies of computed values go, copies that keep values apart stay), and how
a fused chain's copies run (values only)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
import torch_neuron
from compile_helpers import DEV, assert_parity


class DropoutMLP(torch.nn.Module):
    """Dropout with p=0 in training: AOTAutograd decomposes each into a clone."""

    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(24, 48), torch.nn.Linear(48, 24)

    def forward(self, x):
        h = F.dropout(x + 1.0, 0.0, training=True)
        return F.dropout(self.b(F.gelu(self.a(h))), 0.0, training=True) + h


def _loss(model, x, y):
    return F.mse_loss(model(x), y)


def test_dropout_clones_of_computed_values_are_dropped_and_training_matches_eager():
    torch.manual_seed(0)
    batches = [(torch.randn(8, 24), torch.randn(8, 24)) for _ in range(3)]
    assert_parity(DropoutMLP(), _loss, batches)
    assert torch_neuron.compile_stats()["noop_copies"] >= 2


def test_clones_that_keep_results_apart_stay():
    def f(x):
        y = x * 2
        return y, y.clone(), x.clone()    # two outputs of one value; a copy of an input

    x = torch.randn(4, 5, device=DEV)
    y, yc, xc = torch.compile(f, backend="neuron")(x)
    assert torch_neuron.compile_stats()["noop_copies"] == 0
    yc.add_(1.0)
    xc.add_(1.0)
    torch.testing.assert_close(y.cpu(), x.cpu() * 2)
    torch.testing.assert_close(yc.cpu(), x.cpu() * 2 + 1)
    torch.testing.assert_close(xc.cpu(), x.cpu() + 1)


def test_a_fused_chain_with_copies_is_one_launch_and_counts_no_ops():
    """A fused kernel computes its chain's values with the chain's own ops (dtype conversions are
    device copies) in values-only mode: the call is one launch, and no op of the chain is counted
    as executed but the kernel."""
    import neuron_sim

    def f(x):
        return (x * 2).to(torch.bfloat16).to(torch.float32) + 1

    x = torch.randn(64, 96).to(DEV)
    cf = torch.compile(f, backend="neuron")
    cf(x)
    torch.neuron.synchronize()
    assert len(torch_neuron.compile_stats()["fused_kernels"]) == 1
    launches, counts = neuron_sim.counters(0)["launches"], torch_neuron.get_executed_ops()
    y = cf(x)
    torch.neuron.synchronize()
    assert neuron_sim.counters(0)["launches"] - launches == 1
    kernel = "neuron::" + torch_neuron.compile_stats()["fused_kernels"][0]["name"]
    assert {k for k, v in torch_neuron.get_executed_ops().items() if counts.get(k) != v} == {kernel}
    torch.testing.assert_close(y.cpu(), f(x.cpu()))
