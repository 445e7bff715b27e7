# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""Mixed precision on `neuron`: the autocast cast policy follows CUDA's (matmul-like ops
in the low precision dtype, numerically sensitive ops in fp32) and GradScaler works."""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

pytestmark = pytest.mark.timeout(120)


def _inputs(*shapes, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=g) for s in shapes]


def test_amp_supported_dtypes():
    supported = torch.neuron.get_amp_supported_dtype()
    assert torch.bfloat16 in supported and torch.float16 in supported
    assert torch.neuron.is_bf16_supported()
    assert torch.amp.is_autocast_available("neuron")


LOW_PRECISION_OPS = {
    "matmul": lambda a, b: a @ b,
    "mm": lambda a, b: torch.mm(a, b),
    "bmm": lambda a, b: torch.bmm(a.unsqueeze(0), b.unsqueeze(0)),
    "linear": lambda a, b: F.linear(a, b.t()),
    "addmm": lambda a, b: torch.addmm(torch.ones(8, device=a.device), a, b),
    "baddbmm": lambda a, b: torch.baddbmm(torch.zeros(1, 8, 8, device=a.device), a.unsqueeze(0), b.unsqueeze(0)),
}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("name", sorted(LOW_PRECISION_OPS))
def test_autocast_runs_matmul_family_in_low_precision(name, dtype):
    a, b = _inputs((8, 8), (8, 8))
    fn = LOW_PRECISION_OPS[name]
    with torch.autocast("neuron", dtype=dtype):
        out = fn(a.to("neuron"), b.to("neuron"))
    assert out.dtype == dtype
    ref = fn(a.to(dtype).float(), b.to(dtype).float())  # same rounded inputs, fp32 math
    torch.testing.assert_close(out.float().cpu(), ref, rtol=2e-2, atol=2e-2)
    # outside the region the same op stays in fp32
    assert fn(a.to("neuron"), b.to("neuron")).dtype == torch.float32


def test_autocast_conv_in_low_precision():
    conv = nn.Conv2d(3, 4, 3).to("neuron")
    with torch.autocast("neuron", dtype=torch.bfloat16):
        assert conv(torch.randn(1, 3, 6, 6, device="neuron")).dtype == torch.bfloat16


FP32_OPS = {
    "softmax": lambda h: torch.softmax(h, -1),
    "log_softmax": lambda h: F.log_softmax(h, -1),
    "layer_norm": lambda h: F.layer_norm(h, h.shape[-1:]),
    "exp": lambda h: torch.exp(h),
    "mse_loss": lambda h: F.mse_loss(h, torch.zeros_like(h)),
    "logsumexp": lambda h: torch.logsumexp(h, -1),
    "sum": lambda h: h.sum(-1),
    "cumsum": lambda h: h.cumsum(-1),
}


@pytest.mark.parametrize("name", sorted(FP32_OPS))
def test_autocast_runs_sensitive_ops_in_fp32(name):
    a, b = _inputs((8, 8), (8, 8), seed=1)
    fn = FP32_OPS[name]
    with torch.autocast("neuron", dtype=torch.bfloat16):
        h = a.to("neuron") @ b.to("neuron")  # a bf16 activation, as in a real model
        assert h.dtype == torch.bfloat16
        out = fn(h)
    assert out.dtype == torch.float32
    ref = fn(h.cpu().float())
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-5, atol=1e-5)


def test_autocast_state_and_nesting():
    assert not torch.is_autocast_enabled("neuron")
    with torch.autocast("neuron", dtype=torch.bfloat16):
        assert torch.is_autocast_enabled("neuron")
        assert torch.get_autocast_dtype("neuron") == torch.bfloat16
        with torch.autocast("neuron", enabled=False):
            x = torch.randn(4, 4, device="neuron")
            assert (x @ x).dtype == torch.float32
    assert not torch.is_autocast_enabled("neuron")


def test_autocast_rejects_binary_cross_entropy_like_cuda():
    # CUDA's autocast bans binary_cross_entropy (unsafe in fp16) and points to the
    # with-logits variant; code tested on CUDA relies on that error.
    p, t = torch.rand(4, device="neuron"), torch.rand(4, device="neuron")
    with torch.autocast("neuron", dtype=torch.float16):
        with pytest.raises(RuntimeError, match="binary_cross_entropy_with_logits"):
            F.binary_cross_entropy(p, t)
        assert F.binary_cross_entropy_with_logits(p, t).dtype == torch.float32


def _scaler_train(model, opt, scaler, x, y, steps, device_type, autocast):
    for _ in range(steps):
        opt.zero_grad()
        with torch.autocast(device_type, dtype=torch.bfloat16, enabled=autocast):
            loss = F.mse_loss(model(x).float(), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()


def test_grad_scaler_matches_unscaled_cpu_training():
    # With fp32 grads, scaling by a power of two and unscaling is exact, so a scaled run on
    # neuron must track a plain CPU run.
    x, y = _inputs((16, 5), (16, 2), seed=2)
    torch.manual_seed(0)
    cpu_model = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 2))
    dev_model = copy.deepcopy(cpu_model).to("neuron")
    cpu_opt = torch.optim.SGD(cpu_model.parameters(), lr=0.1)
    dev_opt = torch.optim.SGD(dev_model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("neuron", init_scale=2.0**12)
    assert scaler.is_enabled()
    plain = torch.amp.GradScaler("cpu", enabled=False)
    _scaler_train(cpu_model, cpu_opt, plain, x, y, 4, "cpu", autocast=False)
    _scaler_train(dev_model, dev_opt, scaler, x.to("neuron"), y.to("neuron"), 4, "neuron", autocast=False)
    assert scaler.get_scale() == 2.0**12
    for p_dev, p_cpu in zip(dev_model.parameters(), cpu_model.parameters()):
        torch.testing.assert_close(p_dev.detach().cpu(), p_cpu.detach(), rtol=1e-5, atol=1e-6)


def test_grad_scaler_skips_step_on_inf_and_backs_off():
    model = nn.Linear(3, 1).to("neuron")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("neuron", init_scale=1024.0, backoff_factor=0.5, growth_interval=1)
    before = [p.detach().clone() for p in model.parameters()]
    loss = model(torch.ones(2, 3, device="neuron")).sum()
    scaler.scale(loss).backward()
    model.weight.grad[0, 1] = float("inf")
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 512.0
    for p, b in zip(model.parameters(), before):
        assert torch.equal(p.detach(), b)  # the step was skipped
    # a finite step afterwards is taken and, with growth_interval=1, grows the scale
    opt.zero_grad()
    scaler.scale(model(torch.ones(2, 3, device="neuron")).sum()).backward()
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 1024.0
    assert not torch.equal(model.weight.detach(), before[0])


def test_grad_scaler_with_bf16_autocast_tracks_cpu_autocast():
    x, y = _inputs((16, 5), (16, 2), seed=3)
    torch.manual_seed(1)
    cpu_model = nn.Sequential(nn.Linear(5, 8), nn.GELU(), nn.Linear(8, 2))
    dev_model = copy.deepcopy(cpu_model).to("neuron")
    cpu_opt = torch.optim.Adam(cpu_model.parameters(), lr=1e-2)
    dev_opt = torch.optim.Adam(dev_model.parameters(), lr=1e-2)
    _scaler_train(cpu_model, cpu_opt, torch.amp.GradScaler("cpu", init_scale=256.0), x, y, 3, "cpu", True)
    _scaler_train(dev_model, dev_opt, torch.amp.GradScaler("neuron", init_scale=256.0),
                  x.to("neuron"), y.to("neuron"), 3, "neuron", True)
    for p_dev, p_cpu in zip(dev_model.parameters(), cpu_model.parameters()):
        assert p_dev.dtype == torch.float32
        torch.testing.assert_close(p_dev.detach().cpu(), p_cpu.detach(), rtol=2e-2, atol=2e-3)
