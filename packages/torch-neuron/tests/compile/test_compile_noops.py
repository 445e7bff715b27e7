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


def test_decomposed_softmax_family_runs_whole_on_the_host_with_eager_values():
    """The decompositions split (log-)softmax and their backwards for the tile kernel; the host
    computes each as the one ATen op eager runs, with eager's values."""
    def f(x, w):
        h = x @ w
        return torch.log_softmax(h, -1).sum() + (torch.softmax(h * 0.5, -1) * h).sum()

    torch.manual_seed(0)
    x0, w0 = torch.randn(64, 32), torch.randn(32, 40)
    grads = []
    for fn in (f, torch.compile(f, backend="neuron")):
        x, w = x0.to(DEV).requires_grad_(), w0.to(DEV).requires_grad_()
        y = fn(x, w)
        y.backward()
        grads.append((y.detach().cpu(), x.grad.cpu(), w.grad.cpu()))
    for a, b in zip(*grads):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)
    assert torch_neuron.compile_stats()["host_recomposed"] >= 4   # and forwards the backward recomputes


def test_unfused_decomposed_log_softmax_runs_as_the_one_op_eager_runs():
    """A language-model head's rows (here 9000 classes) are wider than a fused kernel's row
    tile, so its log-softmax chain gets no kernel: the graph runs ``_log_softmax`` and its
    backward as eager does (one native kernel each), not the six ops the decomposition made."""
    torch.manual_seed(0)
    h0, w0, y0 = torch.randn(64, 16), torch.randn(16, 9000), torch.randint(0, 9000, (64,))

    def f(h, w, y):
        return F.cross_entropy(h @ w, y)

    results = []
    for fn in (f, torch.compile(f, backend="neuron")):
        h, w, y = h0.to(DEV).requires_grad_(), w0.to(DEV).requires_grad_(), y0.to(DEV)
        fn(h, w, y).backward()               # a first (compiling) call
        h.grad = w.grad = None
        before = torch_neuron.get_executed_ops()
        loss = fn(h, w, y)
        loss.backward()
        ran = {k for k, v in torch_neuron.get_executed_ops().items() if before.get(k) != v}
        results.append((loss.detach().cpu(), h.grad.cpu(), w.grad.cpu()))
    assert torch_neuron.compile_stats()["recomposed_nodes"] == 2
    assert {"aten::_log_softmax", "aten::_log_softmax_backward_data"} <= ran, ran
    assert not ran & {"aten::amax", "aten::exp", "aten::log"}, ran
    for a, b in zip(*results):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-6)
