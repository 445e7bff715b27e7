# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""A user's own tile kernel trains a model on `neuron`: an MLP whose hidden activation is a
fused bias + GELU written in the tile language (forward and backward kernels, registered with
torch_neuron.nki_op) tracks the same model built from PyTorch's reference ops on CPU, in
eager mode and under torch.compile."""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

import neuron_kernels.language as nl
import torch_neuron
from torch_neuron import nki_op, wrap_nki

pytestmark = pytest.mark.timeout(180)

DEV = torch.device("neuron", 0)


# --------------------------------------------------------------------------- the user's kernels
def _row_blocks(n):
    return [slice(r, min(r + 128, n)) for r in range(0, n, 128)]


@nl.jit
def fused_bias_gelu(x, bias):
    """gelu(x + bias): x [N, D] in HBM, bias [1, D] broadcast to every partition."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    for rows in _row_blocks(x.shape[0]):
        b = nl.load(bias.broadcast_partitions(rows.stop - rows.start))
        nl.store(out[rows], nl.gelu(nl.add(nl.load(x[rows]), b)))
    return out


@nl.jit
def fused_bias_gelu_backward(grad, x, bias):
    """grad * gelu'(x + bias), with gelu' on ScalarE (gelu_dx)."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    for rows in _row_blocks(x.shape[0]):
        b = nl.load(bias.broadcast_partitions(rows.stop - rows.start))
        nl.store(out[rows], nl.multiply(nl.load(grad[rows]), nl.gelu_dx(nl.add(nl.load(x[rows]), b))))
    return out


_fwd, _bwd = wrap_nki(fused_bias_gelu), wrap_nki(fused_bias_gelu_backward)


@nki_op("e2e_custom_kernel::bias_gelu")
def bias_gelu(x: Tensor, bias: Tensor) -> Tensor:
    return _fwd(x, bias.reshape(1, -1))


@nki_op("e2e_custom_kernel::bias_gelu_backward")
def bias_gelu_backward(grad: Tensor, x: Tensor, bias: Tensor) -> Tensor:
    return _bwd(grad, x, bias.reshape(1, -1))


def _setup_context(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _backward(ctx, grad):
    x, bias = ctx.saved_tensors
    gx = bias_gelu_backward(grad, x, bias)
    return gx, gx.sum(0)


bias_gelu.register_autograd(_backward, setup_context=_setup_context)


# --------------------------------------------------------------------------- the model
class MLP(nn.Module):
    """Linear (no bias) -> bias + GELU -> Linear; ``fused`` picks the custom op or PyTorch's ops."""

    def __init__(self, d_in=12, hidden=64, d_out=3, fused=True):
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden, bias=False)
        self.bias1 = nn.Parameter(torch.randn(hidden) * 0.1)
        self.fc2 = nn.Linear(hidden, d_out)
        self.fused = fused

    def forward(self, x):
        h = self.fc1(x)
        h = bias_gelu(h, self.bias1) if self.fused else F.gelu(h + self.bias1)
        return self.fc2(h)


def _data(n=160, d_in=12, d_out=3):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, d_in, generator=g)
    w = torch.randn(d_in, d_out, generator=g)
    return x, torch.tanh(x @ w) + 0.05 * torch.randn(n, d_out, generator=g)


def _train(model, x, y, steps, step_fn=None):
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def step(xb, yb):
        loss = F.mse_loss(model(xb), yb)
        loss.backward()
        return loss

    step_fn = step_fn(step) if step_fn else step
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        losses.append(step_fn(x, y).item())
        opt.step()
    return losses


@pytest.mark.parametrize("mode", ["eager", "compile"])
def test_custom_kernel_trains_like_the_reference_on_cpu(mode):
    torch.manual_seed(0)
    ref = MLP(fused=False)
    model = copy.deepcopy(ref)
    model.fused = True
    model.to(DEV)
    x, y = _data()
    steps = 12

    torch_neuron.synchronize()
    t0 = torch_neuron.device_time_ns(0)
    compile_step = (lambda f: torch.compile(f, backend="aot_eager")) if mode == "compile" else None
    losses = _train(model, x.to(DEV), y.to(DEV), steps, compile_step)
    device_ns = torch_neuron.device_time_ns(0) - t0
    ref_losses = _train(ref.double(), x.double(), y.double(), steps)

    assert losses[-1] < 0.6 * losses[0], losses
    assert losses == pytest.approx(ref_losses, rel=1e-4, abs=1e-6)
    for (name, p), (_, q) in zip(model.named_parameters(), ref.named_parameters()):
        torch.testing.assert_close(p.detach().cpu().double(), q.detach(), rtol=1e-4, atol=1e-5, msg=name)

    # Both kernels ran once per step, each for at least its simulated latency on the device clock.
    h = torch.empty(x.shape[0], 64, device=DEV)
    b = torch.empty(1, 64, device=DEV)
    kernels_ns = _fwd.schedule(h, b).latency_ns + _bwd.schedule(h, h, b).latency_ns
    assert device_ns > steps * kernels_ns > 0
