# Copyright 2026 The neuron-kernels Authors. Licensed under the Apache License, Version 2.0.
"""The op table: lookup, and every native op run through its entry against a numpy reference."""

import math
import time

import numpy as np
import pytest

import neuron_kernels
from neuron_kernels import lookup

r = np.random.default_rng(7)


def f32(*shape, lo=None, hi=None):
    x = r.uniform(lo, hi, shape) if lo is not None else r.standard_normal(shape)
    return x.astype(np.float32)


def _sm(x, d):
    e = np.exp(x - x.max(d, keepdims=True))
    return e / e.sum(d, keepdims=True)


def _erf(x):
    return np.vectorize(math.erf)(x)


def _ln(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    rs = 1 / np.sqrt(x.var(-1, keepdims=True) + eps)
    return (x - mu) * rs * w + b, mu, rs


def _sdpa_bwd_ref(do, q, k, v, o, lse):
    """Gradients given out/lse as passed in (not necessarily consistent with q, k, v): the kernel's formula."""
    p = np.exp(np.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1]) - lse[..., None])
    ds = p * (np.einsum("bhqd,bhkd->bhqk", do, v) - (do * o).sum(-1, keepdims=True)) / math.sqrt(q.shape[-1])
    return ds @ k, np.einsum("bhqk,bhqd->bhkd", ds, q), np.einsum("bhqk,bhqd->bhkd", p, do)


# op -> (args, attrs, reference(args) -> result or tuple of results)
X, Y = f32(4, 30, 50), f32(4, 30, 50)
W, B = f32(70, 50), f32(70)
POS = f32(64, 33, lo=0.1, hi=3)
LNX, LNW, LNB = f32(6, 20, 96), f32(96), f32(96)
G = f32(6, 20, 96)
Q, KK, V = f32(2, 3, 40, 32), f32(2, 3, 40, 32), f32(2, 3, 40, 32)
IDX = r.integers(0, 50, (5, 7)).astype(np.int64)
TGT = r.integers(0, 50, (30,)).astype(np.int64)
SIG = lambda x: 1 / (1 + np.exp(-x))  # noqa: E731

def _scatter_add(x, i, v):
    out = x.copy()
    for a in range(i.shape[0]):
        for b in range(i.shape[1]):
            for c in range(i.shape[2]):
                out[a, i[a, b, c], c] += v[a, b, c]
    return out


def _scatter_set(x, i, v):
    out = x.copy()
    np.put_along_axis(out, i, v, 2)
    return out


def _window_argmax(x):
    """Plane positions of the first maximum of each 2x2 window."""
    N, H, W = x.shape
    win = x.reshape(N, H // 2, 2, W // 2, 2).transpose(0, 1, 3, 2, 4).reshape(N, H // 2, W // 2, 4)
    a = win.argmax(-1)
    rows = np.arange(H // 2)[:, None] * 2 + a // 2
    cols = np.arange(W // 2)[None, :] * 2 + a % 2
    return (rows * W + cols).astype(np.int64)


def _unpool(g, idx, shape):
    out = np.zeros(shape)
    for n in range(shape[0]):
        np.add.at(out[n].reshape(-1), idx[n].reshape(-1), g[n].reshape(-1))
    return out


CASES = {
    "aten::mm": ((X[0], f32(50, 20)), {}, lambda a, b: a @ b),
    "aten::matmul": ((X, f32(50, 20)), {}, lambda a, b: a @ b),
    "aten::bmm": ((X, f32(4, 50, 20)), {}, lambda a, b: a @ b),
    "aten::linear": ((X, W, B), {}, lambda x, w, b: x @ w.T + b),
    "aten::addmm": ((B, X[0], W.T.copy()), {}, lambda b, x, w: b + x @ w),
    "aten::add.Tensor": ((X, Y[0, 0]), {}, np.add),
    "aten::sub.Tensor": ((X, Y), {}, np.subtract),
    "aten::mul.Tensor": ((X, Y), {}, np.multiply),
    "aten::div.Tensor": ((X, POS[0, :1] + 1), {}, np.divide),
    "aten::maximum": ((X, Y), {}, np.maximum),
    "aten::minimum": ((X, Y), {}, np.minimum),
    "aten::add.Scalar": ((X, 2.5), {}, lambda x, s: x + s),
    "aten::mul.Scalar": ((X, -0.5), {}, lambda x, s: x * s),
    "aten::exp": ((X,), {}, np.exp),
    "aten::log": ((POS,), {}, np.log),
    "aten::tanh": ((X,), {}, np.tanh),
    "aten::sigmoid": ((X,), {}, SIG),
    "aten::relu": ((X,), {}, lambda x: np.maximum(x, 0)),
    "aten::gelu": ((X,), {"approximate": "none"}, lambda x, approximate: 0.5 * x * (1 + _erf(x / math.sqrt(2)))),
    "aten::silu": ((X,), {}, lambda x: x * SIG(x)),
    "aten::sqrt": ((POS,), {}, np.sqrt),
    "aten::rsqrt": ((POS,), {}, lambda x: 1 / np.sqrt(x)),
    "aten::neg": ((X,), {}, np.negative),
    "aten::abs": ((X,), {}, np.abs),
    "aten::reciprocal": ((POS,), {}, lambda x: 1 / x),
    "aten::gelu_backward": ((Y, X), {}, lambda g, x: g * (0.5 * (1 + _erf(x / math.sqrt(2)))
                                                          + x * np.exp(-x * x / 2) / math.sqrt(2 * math.pi))),
    "aten::silu_backward": ((Y, X), {}, lambda g, x: g * SIG(x) * (1 + x * (1 - SIG(x)))),
    "aten::sum.dim_IntList": ((X,), {"dim": 1}, lambda x, dim: x.sum(dim)),
    "aten::mean.dim": ((X,), {"dim": 2, "keepdim": True}, lambda x, dim, keepdim: x.mean(dim, keepdims=True)),
    "aten::amax": ((X,), {"dim": 0}, lambda x, dim: x.max(dim)),
    "aten::amin": ((X,), {"dim": -1}, lambda x, dim: x.min(dim)),
    "aten::_softmax": ((X,), {"dim": 1}, lambda x, dim: _sm(x, dim)),
    "aten::_log_softmax": ((X,), {"dim": -1}, lambda x, dim: np.log(_sm(x, dim))),
    "aten::native_layer_norm": ((LNX, LNW, LNB), {"eps": 1e-5}, lambda x, w, b, eps: _ln(x, w, b, eps)),
    "aten::native_layer_norm_backward": (
        (G, LNX, _ln(LNX, 1, 0)[1], _ln(LNX, 1, 0)[2], LNW), {},
        lambda g, x, mu, rs, w: (
            rs * (g * w - (g * w).mean(-1, keepdims=True)
                  - (x - mu) * rs * ((g * w) * (x - mu) * rs).mean(-1, keepdims=True)),
            (g * (x - mu) * rs).sum((0, 1)), g.sum((0, 1)))),
    "aten::_fused_rms_norm": ((LNX, LNW), {"eps": 1e-6}, lambda x, w, eps: (
        x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w, 1 / np.sqrt((x * x).mean(-1, keepdims=True) + eps))),
    "aten::embedding": ((W, IDX), {}, lambda w, i: w[i]),
    "aten::index.Tensor": ((X, IDX % 4 - 2), {"rows": 4}, lambda x, i, rows: x[i]),
    "aten::scatter_add": ((X, IDX[:4, :3, None] % 30 * np.ones((1, 1, 50), np.int64), Y[:, :5]), {"dim": 1},
                          lambda x, i, v, dim: _scatter_add(x, i, v[:, :3])),
    "aten::scatter.src": ((X, np.argsort(Y[:, :, :7], axis=2)[:, :, :4], Y), {"dim": 2},
                          lambda x, i, v, dim: _scatter_set(x, i, v[:, :, :4])),
    "aten::index_add": ((X, np.array([2, 0, 2], np.int64), Y[:3]), {"dim": 0, "alpha": 0.5},
                        lambda x, i, v, dim, alpha: x + alpha * np.stack([v[1], np.zeros_like(v[0]), v[0] + v[2],
                                                                          np.zeros_like(v[0])])),
    "aten::max_pool2d_with_indices": ((X,), {"kernel_size": (2, 2), "stride": (2, 2)}, lambda x, kernel_size, stride: (
        x[:, :30, :50].reshape(4, 15, 2, 25, 2).max((2, 4)),
        _window_argmax(x[:, :30, :50]))),
    "aten::max_pool2d_with_indices_backward": (
        (X[:, :15, :25], _window_argmax(X[:, :30, :50]).view(np.int32)), {"input_shape": (4, 30, 50),
                                                                          "kernel_size": (2, 2), "stride": (2, 2)},
        lambda g, w, input_shape, kernel_size, stride: _unpool(g, w.view(np.int64), input_shape)),
    "aten::cumsum": ((X,), {"dim": 1}, lambda x, dim: np.cumsum(x, 1)),
    "aten::flip": ((X,), {"dims": (0, 2)}, lambda x, dims: x[::-1, :, ::-1]),
    "aten::avg_pool2d": ((X,), {"kernel_size": (2, 2), "stride": (2, 2)}, lambda x, kernel_size, stride: (
        x[:, :30, :50].reshape(4, 15, 2, 25, 2).mean((2, 4)))),
    "aten::avg_pool2d_backward": ((X[:, :15, :25],), {"input_shape": (4, 30, 50), "kernel_size": (2, 2),
                                                      "stride": (2, 2)},
                                  lambda g, input_shape, kernel_size, stride: np.repeat(np.repeat(g, 2, 1), 2, 2) / 4),
    "aten::upsample_nearest2d": ((X,), {"factor": (2, 3)}, lambda x, factor: np.repeat(np.repeat(x, 2, 1), 3, 2)),
    "aten::upsample_nearest2d_backward": ((X,), {"factor": (2, 5)}, lambda g, factor: (
        g.reshape(4, 15, 2, 10, 5).sum((2, 4)))),
    "aten::topk": ((X,), {"k": 3, "dim": 1}, lambda x, k, dim: (
        -np.sort(-x, axis=1)[:, :3], np.argsort(-x, axis=1, kind="stable")[:, :3])),
    "aten::max.dim": ((X,), {"dim": 0, "keepdim": True}, lambda x, dim, keepdim: (
        x.max(0, keepdims=True), x.argmax(0)[None])),
    "aten::min.dim": ((X,), {"dim": -1, "largest": False, "keepdim": False}, lambda x, dim, largest, keepdim: (
        x.min(-1), x.argmin(-1))),
    "aten::_index_put_impl": ((X, np.array([2, -1, 2], np.int64), Y[:3]), {"dim": 0, "alpha": 1.0},
                              lambda x, i, v, dim, alpha: x + np.stack([np.zeros_like(v[0]), np.zeros_like(v[0]),
                                                                        v[0] + v[2], v[1]])),
    "aten::gather": ((X, IDX[:4, :3, None] % 30 * np.ones((1, 1, 2), np.int64)), {"dim": 1},
                     lambda x, i, dim: np.take_along_axis(x[:, :, :2], i, dim)),
    "aten::cross_entropy_loss": ((X[0], TGT), {}, lambda x, t: -np.log(_sm(x, 1))[np.arange(30), t].mean()),
    "aten::_scaled_dot_product_flash_attention": (
        (Q, KK, V), {"is_causal": True},
        lambda q, k, v, is_causal: (np.einsum("bhqk,bhkd->bhqd", _sm(np.where(
            np.tril(np.ones((40, 40), bool)), np.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(32), -np.inf), -1), v),
            None)),
    "aten::_scaled_dot_product_flash_attention_backward": (
        (V, Q, KK, V, Q, np.full((2, 3, 40), np.log(40.0), np.float32)), {},
        lambda do, q, k, v, o, lse: _sdpa_bwd_ref(do, q, k, v, o, lse)),
    "aten::_fused_adamw_": (
        (LNX, G, LNX * 0.1, np.abs(G) * 0.01), {"lr": 0.01, "step": 2},
        lambda p, g, m, v, lr, step: (
            p * (1 - lr * 0.01) - lr * ((0.9 * m + 0.1 * g) / (1 - 0.9 ** 2))
            / (np.sqrt((0.999 * v + 0.001 * g * g) / (1 - 0.999 ** 2)) + 1e-8),
            0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g)),
}


def test_every_table_entry_has_a_case_and_the_table_is_consistent():
    names = [op for op, _ in neuron_kernels.native_ops()]
    assert len(names) == len(set(names))
    # the generated families are checked in test_families.py, the convolutions in test_conv.py, batch and
    # group norm in test_channel_norm.py
    families = {e.aten for e in neuron_kernels.table().values()
                if e.adapter in ("pointwise", "foreach", "norms", "cat", "fill", "arange", "triangle", "nll_loss",
                                 "nll_loss_backward", "softmax_backward", "log_softmax_backward",
                                 "embedding_backward", "conv", "conv_grad_weight", "batch_norm",
                                 "batch_norm_backward", "group_norm", "group_norm_backward", "weight_norm",
                                 "weight_norm_backward", "upsample_bilinear", "upsample_bilinear_backward")
                or e.columns.get("binder") in ("index_select", "reduction")}
    assert set(names) == set(CASES) | (families - set(CASES))
    assert not (set(CASES) - set(names))


@pytest.mark.parametrize("op", sorted(CASES))
def test_native_op_matches_reference(op):
    args, attrs, ref = CASES[op]
    entry = lookup(op, "float32")
    assert entry is not None and entry.aten == op
    out = entry.run(*args, **attrs)
    f64 = [a.astype(np.float64) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a for a in args]
    expect = ref(*f64, **attrs)
    outs = out if isinstance(out, tuple) else (out,)
    exps = expect if isinstance(expect, tuple) else (expect,)
    for o, e in zip(outs, exps):
        if e is None:
            continue
        assert np.shape(o) == np.shape(e), (op, np.shape(o), np.shape(e))
        np.testing.assert_allclose(np.asarray(o, np.float64), e, rtol=2e-4, atol=2e-4)


def test_lookup_dtypes_and_unknown_ops():
    assert lookup("aten::mm", "bfloat16") is not None
    assert lookup("aten::mm", "torch.float32") is lookup("aten::mm", "float32")
    assert lookup("aten::mm", "float64") is None                     # not native: the caller falls back
    assert lookup("aten::_fused_adamw_", "bfloat16") is None
    assert lookup("aten::does_not_exist", "float32") is None


def test_estimate_ns_is_cached_and_scales():
    mm = lookup("aten::mm", "bfloat16")
    small = mm.estimate_ns([(256, 256), (256, 256)], ["bfloat16", "bfloat16"])
    t = time.perf_counter()
    again = mm.estimate_ns([(256, 256), (256, 256)], "bfloat16")
    assert time.perf_counter() - t < 0.005 and again == small
    big = mm.estimate_ns([(1024, 1024), (1024, 1024)], "bfloat16")
    # 64x the FLOPs: well above the small kernel (whose time is mostly fixed DMA latency), never 64x more.
    assert 5 * small < big < 64 * small
    # trn1's slower DMA (C §1.1 fit) and TensorE FP32 rate make the FP32 product slower there.
    assert mm.estimate_ns([(512, 512), (512, 512)], "float32", profile="trn1") > \
        mm.estimate_ns([(512, 512), (512, 512)], "float32", profile="trn2")
    add = lookup("aten::add.Tensor", "float32")
    assert add.estimate_ns([(4096, 4096), (4096, 4096)], "float32") > add.estimate_ns([(64, 64), (64, 64)], "float32")
