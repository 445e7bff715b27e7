# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""Batch norm and group norm on neuron run their tile kernels and match CPU, forward and
backward, under device numerics: training with running statistics (updated in place),
evaluation, no affine parameters, several channel blocks, rows longer than one SBUF chunk."""

import copy

import pytest
import torch
import torch.nn.functional as F

import torch_neuron

pytestmark = [pytest.mark.timeout(600), pytest.mark.usefixtures("numerics")]

DEV = torch.device("neuron", 0)
TOL = {torch.float32: {"rtol": 1e-4, "atol": 1e-4}, torch.bfloat16: {"rtol": 3e-2, "atol": 3e-2}}
BN, BN_BWD = "aten::native_batch_norm", "aten::native_batch_norm_backward"
GN, GN_BWD = "aten::native_group_norm", "aten::native_group_norm_backward"

MODULES = {
    "batch_norm_2d": (lambda: torch.nn.BatchNorm2d(6), (4, 6, 5, 7)),
    "batch_norm_1d_no_affine": (lambda: torch.nn.BatchNorm1d(130, affine=False), (3, 130, 9)),
    "batch_norm_long_rows": (lambda: torch.nn.BatchNorm1d(3), (2, 3, 2500)),
    "group_norm": (lambda: torch.nn.GroupNorm(3, 12), (2, 12, 4, 5)),
    "group_norm_one_group": (lambda: torch.nn.GroupNorm(1, 8), (3, 8, 11)),
    "group_norm_long_rows": (lambda: torch.nn.GroupNorm(2, 4), (2, 4, 2100)),
}


def _randomised(module, dtype):
    torch.manual_seed(0)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn_like(p))
        for name in ("running_mean", "running_var"):
            buf = getattr(module, name, None)
            if buf is not None:
                buf.copy_(torch.rand_like(buf) + 0.5)
    return module.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("case", sorted(MODULES))
def test_norm_forward_backward_and_running_statistics_match_cpu(case, dtype):
    make, shape = MODULES[case]
    cpu = _randomised(make(), dtype)
    dev = copy.deepcopy(cpu).to(DEV)
    x = (torch.randn(shape, generator=torch.Generator().manual_seed(1)) * 2 + 0.5).to(dtype)
    gy = torch.randn(shape, generator=torch.Generator().manual_seed(2)).to(dtype)
    xc, xd = x.clone().requires_grad_(), x.to(DEV).requires_grad_()
    torch_neuron.clear_op_tracking()
    torch_neuron.clear_device_numerics_stats()
    yc, yd = cpu(xc), dev(xd)
    yc.backward(gy)
    yd.backward(gy.to(DEV))
    tol = TOL[dtype]
    torch.testing.assert_close(yd.cpu().float(), yc.float(), **tol)
    torch.testing.assert_close(xd.grad.cpu().float(), xc.grad.float(), **tol)
    for (name, p), q in zip(cpu.named_parameters(), dev.parameters()):
        torch.testing.assert_close(q.grad.cpu().float(), p.grad.float(), **tol, msg=name)
    for name, b in cpu.named_buffers():
        if b.is_floating_point():
            torch.testing.assert_close(getattr(dev, name).cpu().float(), b.float(), **tol, msg=name)
    fwd, bwd = (BN, BN_BWD) if case.startswith("batch") else (GN, GN_BWD)
    ops, stats = torch_neuron.get_executed_ops(), torch_neuron.device_numerics_stats()
    for op in (fwd, bwd):
        assert ops[op] == {"native": 1, "fallback": 0}, (op, ops.get(op))
        assert stats.get((op, str(dtype)[6:]), 0) == 1, (op, stats)


def test_batch_norm_in_evaluation_uses_the_running_statistics():
    cpu = _randomised(torch.nn.BatchNorm2d(5), torch.float32).eval()
    dev = copy.deepcopy(cpu).to(DEV)
    x = torch.randn(3, 5, 4, 4)
    torch_neuron.clear_op_tracking()
    torch.testing.assert_close(dev(x.to(DEV)).cpu(), cpu(x), rtol=1e-5, atol=1e-5)
    assert torch_neuron.get_executed_ops()[BN] == {"native": 1, "fallback": 0}
    torch.testing.assert_close(dev.running_mean.cpu(), cpu.running_mean)


def test_batch_norm_without_running_statistics_and_weight_standardisation():
    # F.batch_norm(training=True) with no running stats: the (1, C, L) weight standardisation of BiT
    w = torch.randn(8, 3, 3, 3)
    want = F.batch_norm(w.reshape(1, 8, -1), None, None, training=True, momentum=0.0, eps=1e-8).reshape_as(w)
    torch_neuron.clear_op_tracking()
    got = F.batch_norm(w.to(DEV).reshape(1, 8, -1), None, None, training=True, momentum=0.0,
                       eps=1e-8).reshape_as(w)
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
    assert torch_neuron.get_executed_ops()[BN] == {"native": 1, "fallback": 0}


@pytest.mark.parametrize("dim", [0, 2])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_weight_norm_forward_and_backward(dim, dtype):
    # nn.utils.weight_norm over dim 0 (a linear layer's rows) and dim 2 (a positional convolution's taps)
    torch.manual_seed(0)
    v = torch.randn(6, 5, 7).to(dtype)
    g = torch.rand([6, 5, 7][dim]).reshape([-1 if k == dim else 1 for k in range(3)]).to(dtype) + 0.5
    gw = torch.randn(6, 5, 7).to(dtype)

    def run(dev):
        vv, gg = v.to(dev).requires_grad_(), g.to(dev).requires_grad_()
        w = torch._weight_norm(vv, gg, dim)
        w.backward(gw.to(dev))
        return w, vv.grad, gg.grad
    torch_neuron.clear_op_tracking()
    torch_neuron.clear_device_numerics_stats()
    for a, e in zip(run(DEV), run("cpu")):
        torch.testing.assert_close(a.cpu().float(), e.float(), **TOL[dtype])
    ops = torch_neuron.get_executed_ops()
    for op in ("aten::_weight_norm_interface", "aten::_weight_norm_interface_backward"):
        assert ops[op] == {"native": 1, "fallback": 0}, (op, ops.get(op))
