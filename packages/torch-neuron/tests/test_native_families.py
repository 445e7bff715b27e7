# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""The op table's generated kernel families through public torch APIs on ``neuron``, in
device-numerics mode (values from the tile kernels in the ISA simulator) against CPU, at a
ragged and a 128-aligned shape, in every float dtype a row claims (and bool where it claims
bool): elementwise expressions with type promotion, comparisons, where/masked_fill, foreach
lists (one launch per list), norms, data movement, losses and backward passes."""

import math
import os

import pytest
import torch
import torch.nn.functional as F
import torch_neuron
from torch_neuron.native.install import executed_as

neuron_kernels = pytest.importorskip("neuron_kernels")

pytestmark = pytest.mark.timeout(600)

DEV = torch.device("neuron", 0)
FLOATS = [torch.float32, torch.bfloat16, torch.float16]
TOL = {torch.float32: {"rtol": 2e-4, "atol": 2e-4}, torch.bfloat16: {"rtol": 3e-2, "atol": 3e-2},
       torch.float16: {"rtol": 4e-3, "atol": 4e-3}}
# make test runs a ragged and an aligned shape; `make test-kernels-full` (NEURON_KERNELS_FULL_MATRIX=1)
# adds 1-element, 3-D, multi-block ragged and long-row shapes to every kernel x dtype case.
SHAPES = [(130, 70), (2, 128)]
if os.environ.get("NEURON_KERNELS_FULL_MATRIX") == "1":
    SHAPES += [(1, 1), (257, 129), (128, 4100), (3, 5, 7, 11)]


def _rand(shape, dtype, seed, kind="f"):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g)
    if kind == "p":
        x = x.abs() + 0.5
    if kind == "b":
        return x > 0
    if kind == "u":       # away from comparison ties after rounding
        x = torch.round(x * 4) / 4
    if kind == "d":       # distinct along every row and column, exact in 16-bit floats (no ties to order)
        idx = torch.zeros(shape)
        for d, n in enumerate(shape):
            idx = idx + torch.arange(n).reshape((n,) + (1,) * (len(shape) - d - 1)) * (71, 13, 5, 3)[d % 4]
        x = (idx % 131 - 65) / 8
    if kind == "n":       # with NaNs
        x = torch.where(x > 1, float("nan"), x)
    if kind == "i":       # with infinities of both signs
        x = torch.where(x > 1, float("inf"), torch.where(x < -1, float("-inf"), x))
    return x.to(dtype)


# op -> (function, input kinds): f normal, p positive, b bool, r row-shaped normal (broadcast)
POINTWISE = {
    "aten::sin": (torch.sin, "f"), "aten::cos": (torch.cos, "f"), "aten::erf": (torch.erf, "f"),
    "aten::sign": (torch.sign, "f"), "aten::tan": (lambda a: torch.tan(a * 0.5), "f"),
    "aten::pow.Tensor_Scalar": (lambda a: a ** 2.5, "p"),
    "aten::pow.Scalar": (lambda a: torch.pow(0.9, a * 4.0), "f"),
    "aten::pow.Tensor_Tensor": (torch.pow, "pp"),
    "aten::clamp": (lambda a: a.clamp(-0.5, 0.7), "f"),
    "aten::clamp.Tensor": (lambda a, lo: a.clamp(min=lo), "fr"),
    "aten::clamp_min": (lambda a: a.clamp_min(0.1), "f"),
    "aten::clamp_max": (lambda a: a.clamp_max(0.1), "f"),
    "aten::eq.Tensor": (torch.eq, "uu"), "aten::ne.Tensor": (torch.ne, "uu"), "aten::lt.Tensor": (torch.lt, "ur"),
    "aten::le.Tensor": (torch.le, "uu"), "aten::gt.Tensor": (torch.gt, "uu"), "aten::ge.Tensor": (torch.ge, "uu"),
    "aten::eq.Scalar": (lambda a: a == 0.25, "u"), "aten::ne.Scalar": (lambda a: a != 0.25, "u"),
    "aten::lt.Scalar": (lambda a: a < 0.25, "u"), "aten::le.Scalar": (lambda a: a <= 0.25, "u"),
    "aten::gt.Scalar": (lambda a: a > 0.25, "u"), "aten::ge.Scalar": (lambda a: a >= 0.25, "u"),
    "aten::logical_and": (torch.logical_and, "bb"), "aten::logical_or": (torch.logical_or, "bb"),
    "aten::logical_not": (torch.logical_not, "b"), "aten::logical_xor": (torch.logical_xor, "bb"),
    "aten::bitwise_and.Tensor": (lambda a, b: a & b, "bb"), "aten::bitwise_or.Tensor": (lambda a, b: a | b, "bb"),
    "aten::where.self": (torch.where, "bff"),
    "aten::masked_fill.Scalar": (lambda a, m: a.masked_fill(m, float("-inf")), "fb"),
    "aten::masked_fill.Tensor": (lambda a, m: a.masked_fill(m, torch.tensor(-2.5)), "fb"),
    "aten::lerp.Scalar": (lambda a, b: torch.lerp(a, b, 0.3), "ff"),
    "aten::lerp.Tensor": (torch.lerp, "fff"),
    "aten::addcmul": (lambda a, b, c: torch.addcmul(a, b, c, value=0.5), "ffr"),
    "aten::addcdiv": (lambda a, b, c: torch.addcdiv(a, b, c, value=-0.5), "ffp"),
    "aten::rsub.Tensor": (lambda a, b: torch.rsub(a, b, alpha=2), "ff"),
    "aten::threshold_backward": (lambda g, x: torch.ops.aten.threshold_backward(g, x, 0.0), "ff"),
    "aten::tanh_backward": (lambda g, y: torch.ops.aten.tanh_backward(g, y), "ff"),
    "aten::sigmoid_backward": (lambda g, y: torch.ops.aten.sigmoid_backward(g, y), "ff"),
    "aten::leaky_relu": (lambda a: F.leaky_relu(a, 0.05), "f"),
    "aten::leaky_relu_backward": (lambda g, x: torch.ops.aten.leaky_relu_backward(g, x, 0.05, False), "ff"),
    "aten::hardtanh": (lambda a: F.hardtanh(a, -0.5, 0.5), "f"),
    "aten::softplus": (lambda a: F.softplus(a, beta=2.0, threshold=1.0), "f"),
    "aten::softplus_backward": (lambda g, x: torch.ops.aten.softplus_backward(g, x, 2.0, 1.0), "ff"),
    "aten::elu": (lambda a: torch.ops.aten.elu(a, 0.7, 1.3, 0.9), "f"),
    "aten::elu_backward": (lambda g, x: torch.ops.aten.elu_backward(g, 0.7, 1.3, 0.9, False, x), "ff"),
    "aten::log2": (torch.log2, "p"), "aten::sgn": (torch.sgn, "f"),
    "aten::isneginf": (torch.isneginf, "i"), "aten::isposinf": (torch.isposinf, "i"),
    "aten::bitwise_not": (lambda a: ~a, "b"), "aten::isnan": (torch.isnan, "n"),
}


def _inputs(kinds, shape, dtype):
    out = []
    for i, k in enumerate(kinds):
        if k == "r":
            out.append(_rand((shape[-1],), dtype, 10 + i))
        elif k == "b":
            out.append(_rand(shape, dtype, 10 + i, "b"))
        else:
            out.append(_rand(shape, dtype, 10 + i, k))
    return out


def _dtypes(op):
    claimed = neuron_kernels.table()[op].dtypes
    return [torch.bool] if claimed == ("bool",) else [d for d in FLOATS if str(d)[6:] in claimed]


def _check_native(op, dt):
    stats = torch_neuron.device_numerics_stats()
    assert stats.get((op, dt), 0) >= 1, (op, dt, stats)
    names = executed_as(neuron_kernels.table()[op])
    counts = torch_neuron.get_executed_ops()
    bad = {o: c for o, c in counts.items() if o in names and c["fallback"]}
    assert not bad, bad


def _close(got, want, dtype):
    assert got.device.type == "neuron" and got.dtype == want.dtype and got.shape == want.shape, (got, want)
    if want.dtype == torch.bool:
        assert torch.equal(got.cpu(), want)
    else:
        torch.testing.assert_close(got.cpu().float(), want.float(), **TOL.get(dtype, TOL[torch.float32]))


POINTWISE_CASES = [(op, d) for op in sorted(POINTWISE) for d in _dtypes(op)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("op,dtype", POINTWISE_CASES, ids=lambda v: str(v).replace("torch.", ""))
def test_pointwise_family(op, dtype, shape, numerics):
    fn, kinds = POINTWISE[op]
    inputs = _inputs(kinds, shape, dtype if dtype != torch.bool else torch.float32)
    want = fn(*inputs)
    if dtype in (torch.bfloat16, torch.float16) and want.dtype == dtype:
        want = fn(*[t.float() if t.dtype == dtype else t for t in inputs]).to(dtype)
    torch_neuron.clear_device_numerics_stats()
    torch_neuron.clear_op_tracking()
    got = fn(*[t.to(DEV) for t in inputs])
    _close(got, want, dtype)
    _check_native(op, str(inputs[0].dtype)[6:])


def test_type_promotion_and_in_place_and_out_forms(numerics):
    a = _rand((130, 70), torch.bfloat16, 1)
    b = _rand((130, 70), torch.float32, 2)
    got = torch.lerp(a.float().to(DEV), b.to(DEV), 0.25)            # fp32 result
    torch.testing.assert_close(got.cpu(), torch.lerp(a.float(), b, 0.25), rtol=1e-5, atol=1e-5)
    got = torch.gt(a.to(DEV), b.to(DEV))                              # bf16 vs fp32 compared in fp32
    assert torch.equal(got.cpu(), torch.gt(a, b))
    x = b.to(DEV)
    x.clamp_(-0.1, 0.1)                                               # in place
    torch.testing.assert_close(x.cpu(), b.clamp(-0.1, 0.1))
    out = torch.empty(130, 70, dtype=torch.bool, device=DEV)
    torch.ge(b.to(DEV), 0.0, out=out)
    assert torch.equal(out.cpu(), b >= 0.0)
    got = 1.5 - b.to(DEV)                                            # rsub.Scalar: sub.Tensor(number, tensor)
    torch.testing.assert_close(got.cpu(), 1.5 - b)
    assert torch_neuron.device_numerics_stats()[("aten::rsub.Scalar", "float32")] == 1
    ops = torch_neuron.get_executed_ops()
    for name in ("aten::lerp.Scalar", "aten::gt.Tensor", "aten::clamp_", "aten::ge.Scalar_out", "aten::sub.Tensor"):
        assert ops[name]["native"] >= 1 and not ops[name]["fallback"], (name, ops)


# -- foreach lists -----------------------------------------------------------------------------
def _lists(shape, dtype, n, kind="f"):
    shapes = [shape, (7,), (shape[-1],)]
    return [[_rand(s, dtype, 30 + 3 * j + i, kind) for i, s in enumerate(shapes)] for j in range(n)]


FOREACH = {
    "aten::_foreach_add.Scalar": (lambda a: torch._foreach_add(a, 0.5), "f"),
    "aten::_foreach_add.List": (lambda a, b: torch._foreach_add(a, b, alpha=-0.5), "ff"),
    "aten::_foreach_add.ScalarList": (lambda a: torch._foreach_add(a, [0.5, -1.0, 2.0]), "f"),
    "aten::_foreach_add.Tensor": (lambda a: torch._foreach_add(a, torch.tensor(0.25, device=a[0].device),
                                                               alpha=2.0), "f"),
    "aten::_foreach_sub.Scalar": (lambda a: torch._foreach_sub(a, 0.5), "f"),
    "aten::_foreach_sub.List": (lambda a, b: torch._foreach_sub(a, b, alpha=0.5), "ff"),
    "aten::_foreach_sub.ScalarList": (lambda a: torch._foreach_sub(a, [0.5, -1.0, 2.0]), "f"),
    "aten::_foreach_mul.Scalar": (lambda a: torch._foreach_mul(a, 0.5), "f"),
    "aten::_foreach_mul.List": (torch._foreach_mul, "ff"),
    "aten::_foreach_mul.ScalarList": (lambda a: torch._foreach_mul(a, [0.5, -1.0, 2.0]), "f"),
    "aten::_foreach_mul.Tensor": (lambda a: torch._foreach_mul(a, torch.tensor(0.3, device=a[0].device)), "f"),
    "aten::_foreach_div.Scalar": (lambda a: torch._foreach_div(a, 0.5), "f"),
    "aten::_foreach_div.List": (torch._foreach_div, "fp"),
    "aten::_foreach_div.ScalarList": (lambda a: torch._foreach_div(a, [0.5, -1.0, 2.0]), "f"),
    "aten::_foreach_div.Tensor": (lambda a: torch._foreach_div(a, torch.tensor(0.3, device=a[0].device)), "f"),
    "aten::_foreach_maximum.Scalar": (lambda a: torch._foreach_maximum(a, 0.1), "f"),
    "aten::_foreach_maximum.List": (torch._foreach_maximum, "ff"),
    "aten::_foreach_minimum.Scalar": (lambda a: torch._foreach_minimum(a, 0.1), "f"),
    "aten::_foreach_minimum.List": (torch._foreach_minimum, "ff"),
    "aten::_foreach_clamp_min.Scalar": (lambda a: torch._foreach_clamp_min(a, 0.1), "f"),
    "aten::_foreach_clamp_min.List": (torch._foreach_clamp_min, "ff"),
    "aten::_foreach_clamp_max.Scalar": (lambda a: torch._foreach_clamp_max(a, 0.1), "f"),
    "aten::_foreach_clamp_max.List": (torch._foreach_clamp_max, "ff"),
    "aten::_foreach_addcmul.Scalar": (lambda a, b, c: torch._foreach_addcmul(a, b, c, value=0.5), "fff"),
    "aten::_foreach_addcmul.ScalarList": (lambda a, b, c: torch._foreach_addcmul(a, b, c, [0.5, 1.0, -2.0]), "fff"),
    "aten::_foreach_addcdiv.Scalar": (lambda a, b, c: torch._foreach_addcdiv(a, b, c, value=0.5), "ffp"),
    "aten::_foreach_addcdiv.ScalarList": (lambda a, b, c: torch._foreach_addcdiv(a, b, c, [0.5, 1.0, -2.0]), "ffp"),
    "aten::_foreach_lerp.Scalar": (lambda a, b: torch._foreach_lerp(a, b, 0.1), "ff"),
    "aten::_foreach_lerp.List": (torch._foreach_lerp, "fff"),
    "aten::_foreach_sqrt": (torch._foreach_sqrt, "p"), "aten::_foreach_exp": (torch._foreach_exp, "f"),
    "aten::_foreach_neg": (torch._foreach_neg, "f"), "aten::_foreach_abs": (torch._foreach_abs, "f"),
    "aten::_foreach_reciprocal": (torch._foreach_reciprocal, "p"),
    "aten::_foreach_sigmoid": (torch._foreach_sigmoid, "f"), "aten::_foreach_tanh": (torch._foreach_tanh, "f"),
    "aten::_foreach_log": (torch._foreach_log, "p"), "aten::_foreach_sign": (torch._foreach_sign, "f"),
    "aten::_foreach_sin": (torch._foreach_sin, "f"), "aten::_foreach_cos": (torch._foreach_cos, "f"),
    "aten::_foreach_rsqrt": (torch._foreach_rsqrt, "p"),
    "aten::_foreach_norm.Scalar": (lambda a: torch._foreach_norm(a, 2), "f"),
    "aten::_foreach_pow.ScalarAndTensor": (lambda a: torch._foreach_pow(0.9, a), "f"),
}
FOREACH_CASES = [(op, d) for op in sorted(FOREACH) for d in _dtypes(op)]


def _foreach_inputs(kinds, shape, dtype):
    return [_lists(shape, dtype, 1, k)[0] for k in kinds]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("op,dtype", FOREACH_CASES, ids=lambda v: str(v).replace("torch.", ""))
def test_foreach_family_is_one_launch_per_list(op, dtype, shape, numerics):
    fn, kinds = FOREACH[op]
    inputs = _foreach_inputs(kinds, shape, dtype)
    want = fn(*[[t.float() for t in ls] for ls in inputs])
    got = fn(*[[t.to(DEV) for t in ls] for ls in inputs])
    for g, w in zip(got, want):
        _close(g, w.to(dtype), dtype)
    assert torch_neuron.device_numerics_stats().get((op, str(dtype)[6:])) == 1   # one launch for the list
    _check_native(op, str(dtype)[6:])


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("src_dtype,dtype", [(torch.float32, torch.float32), (torch.bfloat16, torch.bfloat16),
                                             (torch.float32, torch.bfloat16), (torch.float16, torch.float32)], ids=str)
def test_foreach_copy_is_one_launch_and_converts_to_each_destination(src_dtype, dtype, shape, numerics):
    src = _lists(shape, src_dtype, 1)[0]
    dst = [torch.full(t.shape, 7.0, dtype=dtype) for t in src]
    want = [d.clone().copy_(s) for d, s in zip(dst, src)]
    got = [d.to(DEV) for d in dst]
    # FSDP2's copy-in writes into views of one flat buffer: destinations may be strided views
    flat = torch.zeros(sum(t.numel() for t in src) + 9, dtype=dtype, device=DEV)
    views, at = [], 3
    for t in src:
        views.append(flat[at:at + t.numel()].view(t.shape))
        at += t.numel()
    torch_neuron.clear_device_numerics_stats()
    torch._foreach_copy_(got, [t.to(DEV) for t in src])
    torch._foreach_copy_(views, [t.to(DEV) for t in src])
    for g, v, w in zip(got, views, want):
        assert torch.equal(g.cpu(), w) and torch.equal(v.cpu(), w)
    assert torch.equal(flat[:3].cpu(), torch.zeros(3, dtype=dtype)) and flat[at:].cpu().eq(0).all()
    assert torch_neuron.device_numerics_stats().get(("aten::_foreach_copy_", str(dtype)[6:])) == 2
    _check_native("aten::_foreach_copy_", str(dtype)[6:])


def test_foreach_copy_from_the_host_is_a_transfer_not_a_kernel(numerics):
    src = [torch.randn(5, 3), torch.randn(4)]
    dst = [torch.zeros(5, 3, device=DEV), torch.zeros(4, device=DEV)]
    torch._foreach_copy_(dst, src)
    assert all(torch.equal(d.cpu(), s) for d, s in zip(dst, src))
    assert ("aten::_foreach_copy_", "float32") not in torch_neuron.device_numerics_stats()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_default_adamw_and_clip_grad_norm_run_native(dtype, numerics):
    torch.manual_seed(0)
    cpu = torch.nn.Sequential(torch.nn.Linear(70, 130), torch.nn.Linear(130, 3)).to(dtype)
    dev = torch.nn.Sequential(torch.nn.Linear(70, 130), torch.nn.Linear(130, 3)).to(dtype)
    dev.load_state_dict(cpu.state_dict())
    dev.to(DEV)
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-2, weight_decay=0.1) for m in (cpu, dev)]
    for _ in range(2):
        for m, opt in zip((cpu, dev), opts):
            x = torch.randn(5, 70, generator=torch.Generator().manual_seed(1)).to(dtype)
            loss = m(x.to(next(m.parameters()).device)).float().pow(2).mean()
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(m.parameters(), 0.5)
            opt.step()
    for a, b in zip(cpu.parameters(), dev.parameters()):
        torch.testing.assert_close(b.detach().cpu().float(), a.detach().float(), **TOL[dtype])
    ops = torch_neuron.get_executed_ops()
    foreach = {o: c for o, c in ops.items() if "_foreach_" in o}
    assert foreach and all(c["native"] and not c["fallback"] for c in foreach.values()), foreach


# -- movement, losses, backward passes -----------------------------------------------------------
def _grad(f, *xs):
    xs = [x.detach().requires_grad_() for x in xs]
    f(*xs).backward(torch.ones_like(f(*xs)))
    return tuple(x.grad for x in xs)


def _rows(a):
    return a.reshape(a.shape[0], -1)


def _targets(a):
    return torch.arange(a.shape[0], device=a.device) % a.shape[1]


OTHER = {
    "aten::_foreach_norm.Scalar": None,
    "aten::linalg_vector_norm": (lambda a: torch.stack([torch.linalg.vector_norm(a).reshape(1).expand(2),
                                                        torch.linalg.vector_norm(a, dim=-1)[:2],
                                                        torch.linalg.vector_norm(a, 1, dim=0, keepdim=True)[0, :2],
                                                        torch.linalg.vector_norm(a, float("inf"), dim=(0,))[:2]]),
                                 "f"),
    "aten::cat": (lambda a, b: torch.cat([a, b, a], dim=1), "ff"),
    "aten::fill_.Scalar": (lambda a: a.clone().fill_(2.5), "f"),
    "aten::fill_.Tensor": (lambda a: a.clone().fill_(torch.tensor(-1.5)), "f"),
    "aten::zero_": (lambda a: a.clone().zero_(), "f"),
    "aten::index_select": (lambda a: a.reshape(a.shape[0], -1).index_select(
        0, torch.tensor([1, 0, 1, 1], device=a.device) % a.shape[0]), "f"),
    "aten::nll_loss_forward": (lambda a: F.nll_loss(_rows(a).log_softmax(-1), _targets(_rows(a)), ignore_index=1),
                               "f"),
    "aten::nll_loss_backward": (lambda a: _grad(lambda x: F.nll_loss(_rows(x), _targets(_rows(x)), reduction="sum"),
                                                a)[0], "f"),
    "aten::_softmax_backward_data": (lambda a, g: torch.ops.aten._softmax_backward_data(g, a.softmax(0), 0, a.dtype),
                                     "ff"),
    "aten::_log_softmax_backward_data": (
        lambda a, g: torch.ops.aten._log_softmax_backward_data(g, a.log_softmax(-1), -1, a.dtype), "ff"),
    "aten::embedding_dense_backward": (
        lambda g: torch.ops.aten.embedding_dense_backward(
            g, torch.arange(g[..., 0].numel(), device=g.device).reshape(g.shape[:-1]) % 37, 40, 2, False), "f"),
    "aten::max": (lambda a: a.max(), "f"), "aten::min": (lambda a: a.min(), "f"),
    "aten::max_pool2d_with_indices": (lambda a: torch.cat([
        t.flatten().to(a.dtype) for t in F.max_pool2d(a.reshape(1, *a.shape), 3, 2, 1, return_indices=True)]), "d"),
    "aten::max_pool2d_with_indices_backward": (
        lambda a: _grad(lambda x: F.max_pool2d(x.reshape(1, *x.shape), (2, 3), (1, 2), (1, 0), dilation=(2, 1)) * 3,
                        a)[0], "d"),
    "aten::cumsum": (lambda a: torch.cat([a.cumsum(-1), a.cumsum(0)], 0), "f"),
    "aten::flip": (lambda a: torch.cat([a.flip(-1), a.flip(0, 1)], 0), "f"),
    "aten::avg_pool2d": (lambda a: torch.cat([F.avg_pool2d(a[None], 3, 1, 1, count_include_pad=False).flatten(),
                                              F.avg_pool2d(a[None], (2, 3), (2, 1), (1, 1)).flatten()]), "f"),
    "aten::avg_pool2d_backward": (lambda a: _grad(lambda x: F.avg_pool2d(x[None], 3, 2, 1, count_include_pad=False)
                                                  * 3, a)[0], "f"),
    "aten::upsample_nearest2d": (lambda a: F.interpolate(a[None, None], scale_factor=(2, 3), mode="nearest"), "f"),
    "aten::upsample_nearest2d_backward": (
        lambda a: _grad(lambda x: F.interpolate(x[None, None], size=(x.shape[0] * 3, x.shape[1] * 2)) * 3, a)[0], "f"),
    "aten::upsample_bilinear2d": (lambda a: torch.cat([
        F.interpolate(a[None, None], size=(7, 150), mode="bilinear").flatten(),
        F.interpolate(a[None, None], scale_factor=1.5, mode="bilinear", align_corners=True).flatten()]), "f"),
    "aten::upsample_bilinear2d_backward": (
        lambda a: _grad(lambda x: F.interpolate(x[None, None], size=(9, 33), mode="bilinear") * 3, a)[0], "f"),
    "aten::topk": (lambda a: torch.cat([torch.topk(a, 3, dim=-1)[0].flatten(), torch.topk(a, 3, dim=-1)[1].flatten(),
                                        torch.topk(a, 2, 0, largest=False)[0].flatten(),
                                        torch.topk(a, 2, 0, largest=False)[1].flatten(),
                                        torch.topk(a, 4, -1, sorted=False)[0].sort(-1)[0].flatten()]).to(a.dtype), "d"),
    "aten::max.dim": (lambda a: torch.stack([a.max(-1)[0], a.max(-1)[1].to(a.dtype)]), "d"),
    "aten::min.dim": (lambda a: torch.cat([a.min(0, keepdim=True)[0], a.min(0, keepdim=True)[1].to(a.dtype)]), "d"),
    "aten::index.Tensor": (lambda a: a[torch.tensor([[1, -1, 0], [0, 1, -2]], device=a.device)], "f"),
    "aten::scatter_add": (lambda a: a.scatter_add(-1, torch.arange(a.shape[0] * 6, device=a.device)
                                                  .reshape(a.shape[0], 6) % 3, a[:, :6] * 2), "f"),
    "aten::scatter.src": (lambda a: a.scatter(-1, (torch.arange(6, device=a.device) * 7 % a.shape[-1])
                                              .expand(a.shape[0], 6), a[:, 1:7] * 3), "f"),
    "aten::_index_put_impl": (lambda a: _grad(lambda x: x[torch.tensor([1, -1, 0, 1, 1], device=x.device)] * 3,
                                              a)[0], "f"),
    "aten::glu": (lambda a: F.glu(a, 0), "f"),
    "aten::glu_backward": (lambda a: _grad(lambda x: (F.glu(x, -1) * F.glu(x, -1).detach()).sum(), a)[0], "f"),
    "aten::index_add": (lambda a: a.index_add(0, torch.tensor([1, 0, 1, 1], device=a.device),
                                              a[:2].repeat(2, 1) * 3, alpha=0.5), "f"),
    "aten::gather": (lambda a: torch.gather(a, -1, torch.arange(a.numel(), device=a.device).reshape(a.shape)
                                            .flip(-1)[..., :3] % a.shape[-1]), "f"),
    "aten::tril": (lambda a: torch.tril(a, -1), "f"), "aten::triu": (lambda a: torch.triu(a, 3), "f"),
}


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("op,dtype", [(op, d) for op in sorted(OTHER) if OTHER[op] for d in _dtypes(op)],
                         ids=lambda v: str(v).replace("torch.", ""))
def test_movement_losses_and_backwards(op, dtype, shape, numerics):
    """Values from the kernels; full sums and means run as sum.dim_IntList / mean.dim over all dims."""
    fn, kinds = OTHER[op]
    inputs = _inputs(kinds, shape, dtype)
    want = fn(*[t.float() for t in inputs]).to(dtype)
    torch_neuron.clear_device_numerics_stats()
    torch_neuron.clear_op_tracking()
    got = fn(*[t.to(DEV) for t in inputs])
    _close(got, want, dtype)
    _check_native(op, str(dtype)[6:])


@pytest.mark.parametrize("dtype", [torch.bool, torch.uint8, torch.int16, torch.bfloat16], ids=str)
def test_tril_triu_of_stacked_masks_in_place_and_out(dtype, numerics):
    """Causal masks as models build them (torch.ones(..., dtype=bool).tril()), stacked matrices,
    diagonals past either corner, and the in-place and out= forms."""
    g = torch.Generator().manual_seed(5)
    a = torch.randint(-3, 4, (2, 3, 130, 70), generator=g).to(dtype)
    for k in (0, 1, -2, 80, -200):
        for fn in (torch.tril, torch.triu):
            assert torch.equal(fn(a.to(DEV), k).cpu(), fn(a, k)), (fn.__name__, k)
    m = torch.ones(130, 130, dtype=dtype, device=DEV).tril_()
    assert torch.equal(m.cpu(), torch.ones(130, 130, dtype=dtype).tril())
    out = torch.empty(2, 3, 130, 70, dtype=dtype, device=DEV)
    torch.triu(a.to(DEV), -1, out=out)
    assert torch.equal(out.cpu(), torch.triu(a, -1))
    for op in ("aten::tril", "aten::triu"):
        _check_native(op, str(dtype)[6:])


def _device_ms(fn):
    start, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def test_fill_of_a_ragged_count_uses_every_partition():
    """A fill of n elements, n not a multiple of 128, costs about what the aligned fill next to it
    does (a body over 128 partitions and a short tail), not a store from a single partition."""
    n = 2 ** 20
    aligned = _device_ms(lambda: torch.empty(n, device=DEV).fill_(1.0))
    ragged = _device_ms(lambda: torch.empty(n + 5, device=DEV).fill_(1.0))
    assert ragged < 1.5 * aligned, (ragged, aligned)
    big = torch.ones(2 ** 24 + 3, dtype=torch.int8, device=DEV)
    assert big[-3:].cpu().eq(1).all() and big[:5].cpu().eq(1).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int8], ids=str)
def test_fill_of_a_ragged_count_in_device_numerics(dtype, numerics):
    for shape in ((128 * 128 + 5,), (3, 2 ** 16 + 77)):
        torch_neuron.clear_device_numerics_stats()
        x = torch.empty(shape, dtype=dtype, device=DEV).fill_(-3)
        assert x.cpu().eq(-3).all()
        assert torch_neuron.device_numerics_stats()[("aten::fill_.Scalar", str(dtype)[6:])] == 2  # body, tail


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool, torch.float64, torch.uint8], ids=str)
def test_data_movement_of_every_width_is_bit_exact(dtype, numerics):
    g = torch.Generator().manual_seed(3)
    if dtype == torch.int64:
        a = torch.randint(-2 ** 62, 2 ** 62, (130, 7), generator=g, dtype=dtype)
    elif dtype == torch.float64:
        a = torch.randn(130, 7, generator=g, dtype=dtype)
    else:
        a = torch.randint(0, 2, (130, 7), generator=g).to(dtype)
    b = a.flip(0).contiguous()
    for fn, op in ((lambda x, y: torch.cat([x, y], 0), "aten::cat"), (lambda x, y: torch.cat([x, y], 1), "aten::cat"),
                   (lambda x, y: torch.stack([x, y], 1), "aten::cat"), (lambda x, y: x.clone().zero_(), "aten::zero_"),
                   (lambda x, y: x[torch.tensor([[5, -1], [129, 0]], device=x.device)], "aten::index.Tensor"),
                   (lambda x, y: x[:, 3][torch.tensor([2, -130, 7], device=x.device)], "aten::index.Tensor"),
                   (lambda x, y: torch.cat([x[:0], y, x[:, :0].reshape(0)], 0), "aten::cat")) + (
                      ((lambda x, y: x.flip(0), "aten::flip"),) if dtype in (torch.bool, torch.uint8) else ()):
        torch_neuron.clear_device_numerics_stats()
        got = fn(a.to(DEV), b.to(DEV))
        assert torch.equal(got.cpu(), fn(a, b))
        assert torch_neuron.device_numerics_stats().get((op, str(dtype)[6:])) == 1


@pytest.mark.timeout(60)
def test_a_range_too_large_for_any_tensor_raises_as_on_cpu():
    """torch.arange's size check runs in the kernel the native launch stands for: a range of
    ~3e38 elements raises CPU's error at once instead of being scheduled."""
    for dev in ("cpu", DEV):
        with pytest.raises(RuntimeError, match="invalid size, possible overflow"):
            torch.arange(1.175494351e-38, 3.402823466e+38, device=dev)
    out = torch.empty(3, device=DEV)
    torch.arange(0, 10, out=out)   # out= resized by torch, as on CPU
    assert torch.equal(out.cpu(), torch.arange(0, 10, dtype=torch.float32))


def test_foreach_pointwise_with_a_host_tensor_of_scalars():
    """_foreach_addcmul/_addcdiv take their scalars as a CPU tensor, as CUDA allows."""
    xs = [torch.randn(5, 3), torch.randn(4)]
    ys, zs = [torch.randn_like(x) for x in xs], [torch.rand_like(x) + 0.5 for x in xs]
    scalars = torch.tensor([0.5, -2.0])
    for fn in (torch._foreach_addcmul, torch._foreach_addcdiv):
        got = fn([x.to(DEV) for x in xs], [y.to(DEV) for y in ys], [z.to(DEV) for z in zs], scalars)
        for g, w in zip(got, fn(xs, ys, zs, scalars)):
            torch.testing.assert_close(g.cpu(), w)


def test_int64_arange_and_its_host_policy(numerics):
    got = torch.arange(3, 300, 2, device=DEV)
    assert got.dtype == torch.int64 and torch.equal(got.cpu(), torch.arange(3, 300, 2))
    assert torch_neuron.device_numerics_stats().get(("aten::arange.start_out", "int64")) == 1
    torch_neuron.clear_op_tracking()
    big = torch.arange(2 ** 31 - 2, 2 ** 31 + 2, device=DEV)          # past int32: the host computes it
    assert torch.equal(big.cpu(), torch.arange(2 ** 31 - 2, 2 ** 31 + 2))
    assert torch_neuron.get_executed_ops()["aten::arange.start_out"] == {"native": 0, "fallback": 1}
    x = torch.arange(5, device=DEV)
    torch_neuron.clear_op_tracking()
    (x + x).cpu()                                                    # int64 arithmetic stays on the host
    assert torch_neuron.get_executed_ops()["aten::add.Tensor"]["fallback"] == 1


def test_every_family_row_is_checked():
    # convolutions and batch / group / weight norm are checked in test_native_convolution.py and
    # test_native_norms.py
    from torch_neuron.native.families import FAMILY_BINDERS
    elsewhere = {"convolution", "convolution_backward", "batch_norm", "batch_norm_backward", "group_norm",
                 "group_norm_backward", "weight_norm", "weight_norm_backward"}
    rows = {op for op, e in neuron_kernels.table().items()
            if e.columns.get("binder") in set(FAMILY_BINDERS) - elsewhere
            or op in ("aten::max", "aten::min", "aten::any", "aten::any.dim", "aten::any.dims", "aten::all",
                      "aten::all.dim", "aten::all.dims")}
    checked = set(POINTWISE) | set(FOREACH) | set(OTHER) | {"aten::arange.start_out", "aten::rsub.Scalar",
                                                                "aten::_foreach_copy_"} | set(ANY_ALL)
    assert rows == checked, rows ^ checked


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_reductions_over_several_and_all_dims(dtype, numerics):
    x = _rand((6, 130, 5), dtype, 7)
    cases = [(lambda t: t.sum(), "aten::sum.dim_IntList"), (lambda t: t.sum((0, 2), keepdim=True), "aten::sum.dim_IntList"),
             (lambda t: t.mean(), "aten::mean.dim"), (lambda t: t.mean((0, 1)), "aten::mean.dim"),
             (lambda t: t.amax((0, 2)), "aten::amax"), (lambda t: t.amin(), "aten::amin"),
             (lambda t: t.max(), "aten::max"), (lambda t: t.min(), "aten::min")]
    for fn, op in cases:
        torch_neuron.clear_device_numerics_stats()
        torch_neuron.clear_op_tracking()
        got = fn(x.to(DEV))
        _close(got, fn(x.float()).to(dtype), dtype)
        _check_native(op, str(dtype)[6:])


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_gelu_tanh_backward_is_a_generated_expression(dtype, shape, numerics):
    x, g = _rand(shape, dtype, 1), _rand(shape, dtype, 2)

    def grad(x, g):
        x = x.detach().requires_grad_()
        F.gelu(x, approximate="tanh").backward(g)
        return x.grad
    want = grad(x.float(), g.float()).to(dtype)
    torch_neuron.clear_device_numerics_stats()
    torch_neuron.clear_op_tracking()
    _close(grad(x.to(DEV), g.to(DEV)), want, dtype)
    _check_native("aten::gelu_backward", str(dtype)[6:])


@pytest.mark.parametrize("inplace", [False, True], ids=["from_input", "from_result"])
def test_elu_backward_from_the_input_or_the_result(inplace, numerics):
    # F.elu(inplace=True) saves its result and calls elu_backward with is_result=True
    x, g = _rand((130, 70), torch.float32, 1), _rand((130, 70), torch.float32, 2)

    def grad(x, g):
        x = x.detach().requires_grad_()
        F.elu(x.clone(), alpha=0.6, inplace=inplace).backward(g)
        return x.grad
    want = grad(x, g)
    torch_neuron.clear_device_numerics_stats()
    torch_neuron.clear_op_tracking()
    _close(grad(x.to(DEV), g.to(DEV)), want, torch.float32)
    _check_native("aten::elu_backward", "float32")


ANY_ALL = {"aten::any": lambda m: m.any(), "aten::any.dim": lambda m: m.any(1, keepdim=True),
           "aten::any.dims": lambda m: m.any((0, 1)), "aten::all": lambda m: m.all(),
           "aten::all.dim": lambda m: m.all(0), "aten::all.dims": lambda m: m.all((0, 1), keepdim=True)}


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("op", sorted(ANY_ALL))
def test_any_and_all_of_bool_tensors(op, shape, numerics):
    for m in (_rand(shape, torch.float32, 5, "b"), torch.ones(shape, dtype=torch.bool),
              torch.zeros(shape, dtype=torch.bool)):
        torch_neuron.clear_device_numerics_stats()
        torch_neuron.clear_op_tracking()
        got = ANY_ALL[op](m.to(DEV))
        _close(got, ANY_ALL[op](m), torch.bool)
        _check_native(op, "bool")


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_mixed_dtype_and_alpha_binary_ops_run_the_generated_kernel(shape, numerics):
    """AMP's fp32 residual + bf16 branch, and add/sub with alpha: torch's promotion, values from the kernel."""
    a, b = _rand(shape, torch.float32, 1), _rand(shape, torch.bfloat16, 2)
    for fn, op in ((lambda x, y: x + y, "aten::add.Tensor"), (lambda x, y: y * x, "aten::mul.Tensor"),
                   (lambda x, y: torch.sub(x, y, alpha=0.25), "aten::sub.Tensor"),
                   (lambda x, y: torch.add(x, x, alpha=-3), "aten::add.Tensor"),
                   (lambda x, y: torch.div(y, x.abs() + 1), "aten::div.Tensor"),
                   (lambda x, y: torch.maximum(y, x), "aten::maximum")):
        torch_neuron.clear_device_numerics_stats()
        torch_neuron.clear_op_tracking()
        got = fn(a.to(DEV), b.to(DEV))
        _close(got, fn(a, b), torch.float32)
        stats = torch_neuron.device_numerics_stats()
        assert any(k[0] == op for k in stats), stats
        c = torch_neuron.get_executed_ops()[op]
        assert c["native"] >= 1 and not c["fallback"], (op, c)


@pytest.mark.parametrize("inplace", [False, True])
def test_foreach_list_entries_broadcast_to_their_first_operand(inplace, numerics):
    """Compiled Adam/AdamW divide each moment by a 0-d bias correction (_foreach_div.List with
    0-d ``other`` entries): one launch for the list, as CUDA's slow path broadcasts them."""
    xs = [torch.randn(96), torch.randn(7, 33), torch.randn(130, 5)]
    ds = [torch.tensor(0.5), torch.tensor(3.0), torch.rand(5) + 0.5]
    fn = torch._foreach_div_ if inplace else torch._foreach_div
    got = [x.to(DEV) for x in xs]
    out = fn(got, [d.to(DEV) for d in ds])
    want = [x / d for x, d in zip(xs, ds)]
    for g, w in zip(got if inplace else out, want):
        torch.testing.assert_close(g.cpu(), w)
    op = "aten::_foreach_div_.List" if inplace else "aten::_foreach_div.List"
    assert torch_neuron.get_executed_ops()[op] == {"native": 1, "fallback": 0}
    # A first operand that would grow is not an entry the kernel writes: the host computes it.
    torch_neuron.clear_op_tracking()
    got = torch._foreach_div([torch.tensor(2.0, device=DEV)], [torch.full((3,), 4.0, device=DEV)])
    torch.testing.assert_close(got[0].cpu(), torch.full((3,), 0.5))
    assert torch_neuron.get_executed_ops()["aten::_foreach_div.List"]["fallback"] == 1
