# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""mm/addmm start fused chains (bias, GELU, residual add and layer norm as the matmul's epilogue),
and layer norm forward and backward join chains as whole nodes expanded into steps: values
against eager and float64."""
from __future__ import annotations

import copy

import pytest
import torch
import torch_neuron
from compile_helpers import DEV
from torch import nn

pytestmark = pytest.mark.timeout(300)


class MLPBlock(nn.Module):
    def __init__(self, d=48, approximate="tanh"):
        super().__init__()
        self.fc = nn.Linear(d, 4 * d)
        self.act = nn.GELU(approximate=approximate)
        self.out = nn.Linear(4 * d, d)
        self.ln = nn.LayerNorm(d)

    def forward(self, x):
        return self.ln(x + self.out(self.act(self.fc(x))))


def _step(model, x, compile_=False):
    y = (torch.compile(model, backend="neuron") if compile_ else model)(x)
    # A fixed random projection as the loss (sum(y * y) of a normalized y has a ~zero input gradient).
    r = torch.randn(y.shape, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    (y * r.to(y.device, y.dtype)).sum().backward()
    return y, {n: p.grad for n, p in model.named_parameters()}


def _ops():
    return [k["ops"] for k in torch_neuron.compile_stats()["fused_kernels"]]


def test_matmul_epilogues_and_layer_norm_fuse_and_match_eager():
    torch.manual_seed(0)
    base = MLPBlock()
    x = torch.randn(2, 96, 48)
    eager, comp = copy.deepcopy(base).to(DEV), copy.deepcopy(base).to(DEV)
    torch_neuron.clear_compile_stats()
    y_e, g_e = _step(eager, x.to(DEV))
    y_c, g_c = _step(comp, x.to(DEV), True)
    torch.testing.assert_close(y_c.cpu(), y_e.cpu(), rtol=1e-4, atol=1e-5)
    for n in g_e:
        torch.testing.assert_close(g_c[n].cpu(), g_e[n].cpu(), rtol=1e-4, atol=1e-5, msg=lambda m, n=n: f"{n}: {m}")
    ops = _ops()
    # fc: the product, its bias and GELU in one kernel; out: product, bias, residual and the
    # whole layer norm (two row passes) in one kernel.
    assert "matmul > add > gelu_apprx_tanh" in ops, ops
    assert any(o.startswith("matmul > add > add > mean > subtract > multiply > mean > add > rsqrt") for o in ops), ops
    # The backward's input-gradient matmuls carry the norm's and GELU's backward as epilogues.
    bw = [k["ops"] for k in torch_neuron.compile_stats()["fused_kernels"] if "backward" in k["graph"]]
    assert any(o.startswith("matmul > ") for o in bw), bw
    # Bias and norm-weight gradients (sums over every row) of values a kernel computes are stored
    # by that kernel (the others sum a graph input: one eager op).
    assert sum(o.count("sum_rows") for o in bw) >= 2, bw
    assert not torch_neuron.compile_stats()["unfused_chains"]
    # The host reference runs each norm as the one ATen op eager runs, not its decomposition.
    aten_ops = [a for k in torch_neuron.compile_stats()["fused_kernels"] for a in k["aten"]]
    assert "aten.native_layer_norm.default" in aten_ops, aten_ops
    assert "aten.native_layer_norm_backward.default" in aten_ops, aten_ops
    assert "aten.rsqrt.default" not in aten_ops and "aten.mean.dim" not in aten_ops, aten_ops


@pytest.mark.parametrize("dtype,approximate", [(torch.float32, "tanh"), (torch.bfloat16, "tanh"),
                                               (torch.float32, "none")])
def test_device_numerics_compute_matmul_chains(dtype, approximate):
    """With device numerics on, the generated programs (matmul on TensorE, epilogue, norm, GELU's
    backward in both forms) compute forward and gradients; compared with float64 on the CPU."""
    torch.manual_seed(1)
    base = MLPBlock(32, approximate)
    x = torch.randn(160, 32)
    ref = copy.deepcopy(base).double()
    y_r, g_r = _step(ref, x.double())
    comp = copy.deepcopy(base).to(DEV, dtype)
    torch_neuron.clear_compile_stats()
    torch_neuron.set_device_numerics(True)
    try:
        y_c, g_c = _step(comp, x.to(DEV, dtype), True)
    finally:
        torch_neuron.set_device_numerics(False)
    s = torch_neuron.compile_stats()
    assert any(o.startswith("matmul > ") for o in _ops())
    assert any("gelu_backward" in " ".join(k["aten"]) for k in s["fused_kernels"])
    assert s["numerics_launches"] == s["fused_launches"] > 0
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=5e-2, atol=1e-1)
    torch.testing.assert_close(y_c.cpu().double(), y_r, **tol)
    for n in g_r:
        scale = g_r[n].abs().max().item()
        torch.testing.assert_close(g_c[n].cpu().double() / scale, g_r[n] / scale, **tol,
                                   msg=lambda m, n=n: f"{n}: {m}")


class ResidualNorm(nn.Module):
    def __init__(self, k, n):
        super().__init__()
        self.lin, self.ln = nn.Linear(k, n), nn.LayerNorm(n)

    def forward(self, h, res):
        return self.ln(self.lin(h) + res)


def _device_ms(fn, *args):
    start, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
    start.record()
    out = fn(*args)
    end.record()
    end.synchronize()
    return start.elapsed_time(end), out


def test_a_matmul_too_large_to_fuse_keeps_its_epilogue_fused():
    """BERT's FFN output (3072 -> 768, residual, layer norm): the matmul's weights do not stay
    resident in SBUF, so the chain cannot be one kernel. The matmul runs as its library kernel
    and the residual add and the layer norm stay one fused epilogue, never one launch per
    step; the compiled graph is faster than eager."""
    torch.manual_seed(0)
    m = ResidualNorm(3072, 768).to(DEV).eval()
    h, res = torch.randn(2048, 3072, device=DEV), torch.randn(2048, 768, device=DEV)
    torch_neuron.clear_compile_stats()
    with torch.inference_mode():
        c = torch.compile(m, backend="neuron")
        c(h, res)
        eager_ms, want = _device_ms(m, h, res)
        compiled_ms, got = _device_ms(c, h, res)
    torch.testing.assert_close(got.cpu(), want.cpu(), rtol=1e-4, atol=1e-4)
    s = torch_neuron.compile_stats()
    assert [k["ops"].split(" > ")[:3] for k in s["fused_kernels"]] == [["add", "mean", "subtract"]], s["fused_kernels"]
    (u,) = s["unfused_chains"]
    assert "the matmul's kernel and a fused epilogue take" in u["reason"], u
    assert compiled_ms < eager_ms, (compiled_ms, eager_ms)


def _two_wide_row_sums(x, y):
    p = torch.tanh(x * y) + x
    return p.sum(0), (p * y).sum(0), p * 2


def test_row_sums_that_overflow_psum_leave_the_chain_and_the_rest_stays_fused():
    """Two sums over the rows of 2048 columns need 8 PSUM banks, more than a kernel keeps for
    them: they run as eager reductions and the pointwise chain is still one kernel."""
    x, y = torch.randn(256, 2048, device=DEV), torch.randn(256, 2048, device=DEV)
    torch_neuron.clear_compile_stats()
    got = torch.compile(_two_wide_row_sums, backend="neuron")(x, y)
    for g, w in zip(got, _two_wide_row_sums(x, y)):
        torch.testing.assert_close(g.cpu(), w.cpu(), rtol=1e-4, atol=1e-3)
    (k,) = torch_neuron.compile_stats()["fused_kernels"]
    assert "sum_rows" not in k["ops"] and "tanh" in k["ops"], k["ops"]
    one = torch.compile(lambda x, y: (torch.tanh(x * y) + x).sum(0), backend="neuron")(x[:, :512], y[:, :512])
    torch.testing.assert_close(one.cpu(), (torch.tanh(x * y) + x)[:, :512].sum(0).cpu(), rtol=1e-4, atol=1e-3)
    assert "sum_rows" in torch_neuron.compile_stats()["fused_kernels"][-1]["ops"]
