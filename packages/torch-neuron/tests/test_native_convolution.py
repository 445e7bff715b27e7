# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""Convolutions on neuron run their tile kernels (forward, grad_input, grad_weight and
grad_bias) and match CPU, in fp32 and bf16, under device numerics: plain, padded, strided,
dilated, grouped, depthwise, 1-D, patch embeddings, several channel blocks, without bias, and
transposed."""

import copy

import pytest
import torch
import torch.nn.functional as F

import torch_neuron

pytestmark = [pytest.mark.timeout(600), pytest.mark.usefixtures("numerics")]

DEV = torch.device("neuron", 0)
FWD, BWD = "aten::convolution_overrideable", "aten::convolution_backward_overrideable"
TOL = {torch.float32: {"rtol": 2e-4, "atol": 2e-4}, torch.bfloat16: {"rtol": 3e-2, "atol": 3e-2}}

# (input shape, weight shape, keyword arguments); 1-D cases have 3-D inputs
CASES = {
    "padded": ((2, 3, 9, 11), (5, 3, 3, 3), {"padding": 1}),
    "strided_dilated": ((2, 4, 12, 10), (6, 4, 3, 2), {"stride": (2, 1), "padding": (1, 0), "dilation": (1, 2)}),
    "grouped": ((2, 6, 8, 8), (8, 3, 3, 3), {"groups": 2, "padding": 1}),
    "depthwise": ((2, 8, 9, 7), (8, 1, 3, 3), {"groups": 8, "padding": 1}),
    "patches": ((2, 3, 16, 16), (8, 3, 4, 4), {"stride": 4}),
    "conv1d": ((2, 4, 21), (6, 2, 3), {"groups": 2, "stride": 2, "padding": 1}),
    "channel_blocks": ((1, 130, 6, 5), (140, 130, 3, 3), {"padding": 1}),
}


def _conv(x, w, b, kw):
    return (F.conv1d if x.dim() == 3 else F.conv2d)(x, w, b, **kw)


def _run(xs, ws, kw, dtype, bias=True, grads=(True, True, True)):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(xs, generator=g).to(dtype)
    w = (torch.randn(ws, generator=g) / ws[1] ** 0.5).to(dtype)
    b = torch.randn(ws[0], generator=g).to(dtype) if bias else None

    def grads_of(dev):
        leaves = [t.detach().to(dev).requires_grad_(r) if t is not None else None
                  for t, r in zip((x, w, b), grads)]
        y = _conv(*leaves, kw)
        gy = torch.randn(y.shape, generator=torch.Generator().manual_seed(1)).to(dtype).to(dev)
        y.backward(gy)
        return [y] + [t.grad if t is not None and t.requires_grad else None for t in leaves]

    want = grads_of("cpu")
    torch_neuron.clear_device_numerics_stats()
    torch_neuron.clear_op_tracking()
    got = grads_of(DEV)
    for name, a, e in zip(("output", "grad_input", "grad_weight", "grad_bias"), got, want):
        assert (a is None) == (e is None), name
        if e is not None:
            assert a.device.type == "neuron" and a.dtype == e.dtype and a.shape == e.shape, name
            torch.testing.assert_close(a.cpu().float(), e.float(), **TOL[dtype], msg=name)
    return torch_neuron.get_executed_ops(), torch_neuron.device_numerics_stats()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", sorted(CASES))
def test_convolution_forward_and_backward_run_their_kernels(case, dtype):
    xs, ws, kw = CASES[case]
    ops, stats = _run(xs, ws, kw, dtype)
    dt = str(dtype)[6:]
    for op in (FWD, BWD):
        assert ops[op] == {"native": 1, "fallback": 0}, (op, ops[op])
        assert stats.get((op, dt), 0) >= 1, (op, stats)     # launches that ran a tile kernel


@pytest.mark.parametrize("grads", [(False, True, True), (True, True, False), (True, False, False)],
                         ids=["no_grad_input", "no_bias", "grad_input_only"])
def test_convolution_backward_computes_only_the_gradients_asked_for(grads):
    xs, ws, kw = CASES["padded"]
    ops, _ = _run(xs, ws, kw, torch.float32, bias=grads[2], grads=grads)
    assert ops[BWD] == {"native": 1, "fallback": 0}


TRANSPOSED = {
    "strided": ((2, 4, 5, 5), (4, 3, 3, 3), {"stride": 2}),
    "padded_output_padding": ((2, 4, 6, 5), (4, 6, 3, 2), {"stride": (2, 3), "padding": 1, "output_padding": (1, 2)}),
    "grouped_dilated": ((1, 4, 7, 7), (4, 3, 3, 3), {"groups": 2, "dilation": 2, "padding": 2}),
    "conv1d": ((2, 3, 9), (3, 5, 4), {"stride": 2, "padding": 1}),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", sorted(TRANSPOSED))
def test_transposed_convolution_runs_its_kernels(case, dtype):
    xs, ws, kw = TRANSPOSED[case]
    fn = F.conv_transpose1d if len(xs) == 3 else F.conv_transpose2d
    g = torch.Generator().manual_seed(0)
    x, w, b = torch.randn(xs, generator=g).to(dtype), torch.randn(ws, generator=g).to(dtype), \
        torch.randn(ws[1] * kw.get("groups", 1), generator=g).to(dtype)

    def grads_of(dev):
        leaves = [t.detach().to(dev).requires_grad_() for t in (x, w, b)]
        y = fn(*leaves, **kw)
        y.backward(torch.randn(y.shape, generator=torch.Generator().manual_seed(1)).to(dtype).to(dev))
        return [y] + [t.grad for t in leaves]
    want = grads_of("cpu")
    torch_neuron.clear_op_tracking()
    for name, a, e in zip(("output", "grad_input", "grad_weight", "grad_bias"), grads_of(DEV), want):
        torch.testing.assert_close(a.cpu().float(), e.float(), **TOL[dtype], msg=name)
    ops = torch_neuron.get_executed_ops()
    assert ops[FWD] == {"native": 1, "fallback": 0} and ops[BWD] == {"native": 1, "fallback": 0}, ops


def test_a_three_d_convolution_runs_on_the_host_and_says_why():
    torch_neuron.set_device_numerics(False)
    x = torch.randn(1, 2, 4, 4, 4)
    w = torch.randn(3, 2, 2, 2, 2)
    want = F.conv3d(x, w)
    torch_neuron.clear_op_tracking()
    got = F.conv3d(x.to(DEV), w.to(DEV))
    torch.testing.assert_close(got.cpu(), want)
    assert torch_neuron.get_executed_ops()[FWD] == {"native": 0, "fallback": 1}
    reasons = [r for (op, _, _), r in torch_neuron.native.estimate.native_rejections().items() if op == FWD]
    assert any("5-D" in r for r in reasons), reasons


def test_a_small_conv_net_trains_natively_and_matches_cpu():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                              torch.nn.Conv2d(8, 8, 3, padding=1, groups=8), torch.nn.ReLU(),
                              torch.nn.Conv2d(8, 16, 2, stride=2), torch.nn.Flatten(), torch.nn.Linear(16 * 16, 10))
    dev_net = copy.deepcopy(net).to(DEV)
    x, y = torch.randn(4, 3, 8, 8), torch.randint(0, 10, (4,))
    opt_c = torch.optim.SGD(net.parameters(), lr=0.1)
    opt_d = torch.optim.SGD(dev_net.parameters(), lr=0.1)
    torch_neuron.clear_op_tracking()
    for _ in range(3):
        for m, opt, xx, yy in ((net, opt_c, x, y), (dev_net, opt_d, x.to(DEV), y.to(DEV))):
            opt.zero_grad()
            F.cross_entropy(m(xx), yy).backward()
            opt.step()
    for p, q in zip(net.parameters(), dev_net.parameters()):
        torch.testing.assert_close(q.cpu(), p, rtol=1e-4, atol=1e-4)
    ops = torch_neuron.get_executed_ops()
    assert ops[FWD] == {"native": 9, "fallback": 0} and ops[BWD] == {"native": 9, "fallback": 0}, ops
