# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""The drop_noops pass: copies of computed values go, copies that keep values apart stay."""
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
