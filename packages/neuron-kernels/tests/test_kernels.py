# Copyright 2026 The neuron-kernels Authors. Licensed under the Apache License, Version 2.0.
"""Every library kernel against a float64 numpy reference, at several shapes (ragged edges) and dtypes."""

import math

import ml_dtypes
import numpy as np
import pytest

from neuron_kernels import kernels as K

BF16 = ml_dtypes.bfloat16
DTYPES = [np.float32, BF16]


def rnd(shape, dtype, seed=0, lo=None, hi=None):
    r = np.random.default_rng(seed)
    x = r.uniform(lo, hi, shape) if lo is not None else r.standard_normal(shape)
    return x.astype(dtype)


def f64(x):
    return np.asarray(x).astype(np.float64)


def close(out, ref, dtype, scale=1.0):
    """fp32: 1e-4 relative; bf16: the output's 8-bit mantissa (plus a term for bf16 intermediates)."""
    out = f64(out)
    if dtype == np.float32:
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * scale)
    else:
        np.testing.assert_allclose(out, ref, rtol=2e-2, atol=2e-2 * scale)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("M,Kd,N", [(128, 128, 512), (200, 300, 700), (1, 5, 3), (257, 129, 513)])
def test_matmul(dtype, M, Kd, N):
    a, b = rnd((M, Kd), dtype, 1), rnd((Kd, N), dtype, 2)
    close(K.matmul(a, b), f64(a) @ f64(b), dtype, scale=math.sqrt(Kd))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ta,tb", [(True, False), (False, True), (True, True)])
def test_matmul_transposed_operands(dtype, ta, tb):
    a, b = rnd((130, 70), dtype, 3), rnd((70, 600), dtype, 4)
    out = K.matmul(a.T.copy() if ta else a, b.T.copy() if tb else b, transpose_a=ta, transpose_b=tb)
    close(out, f64(a) @ f64(b), dtype, scale=math.sqrt(70))


@pytest.mark.parametrize("dtype", DTYPES)
def test_bmm(dtype):
    a, b = rnd((3, 70, 40), dtype, 5), rnd((3, 40, 90), dtype, 6)
    close(K.bmm(a, b), np.einsum("bmk,bkn->bmn", f64(a), f64(b)), dtype, scale=math.sqrt(40))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("with_bias", [True, False])
def test_linear(dtype, with_bias):
    x, w = rnd((150, 96), dtype, 7), rnd((200, 96), dtype, 8)
    bias = rnd((200,), dtype, 9) if with_bias else None
    ref = f64(x) @ f64(w).T + (f64(bias) if with_bias else 0)
    close(K.linear(x, w, bias) if with_bias else K.linear(x, w), ref, dtype, scale=math.sqrt(96))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op,ref", [("add", np.add), ("subtract", np.subtract), ("multiply", np.multiply),
                                    ("divide", np.divide), ("maximum", np.maximum), ("minimum", np.minimum)])
@pytest.mark.parametrize("shape", [(37, 129), (128, 4096), (300, 2500)])
def test_binary(dtype, op, ref, shape):
    a, b = rnd(shape, dtype, 10), rnd(shape, dtype, 11)
    if op == "divide":
        b = (np.abs(f64(b)) + 0.5).astype(dtype)
    close(K.binary(a, b, op=op), ref(f64(a), f64(b)), dtype)


UNARY = [
    ("exp", np.exp, None), ("log", np.log, (0.1, 5.0)), ("tanh", np.tanh, None),
    ("sigmoid", lambda x: 1 / (1 + np.exp(-x)), None), ("relu", lambda x: np.maximum(x, 0), None),
    ("gelu", lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2))), None),
    ("gelu_apprx_tanh", lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))), None),
    ("silu", lambda x: x / (1 + np.exp(-x)), None), ("sqrt", np.sqrt, (0.0, 9.0)),
    ("rsqrt", lambda x: 1 / np.sqrt(x), (0.1, 9.0)), ("negative", np.negative, None), ("abs", np.abs, None),
    ("reciprocal", lambda x: 1 / x, (0.5, 4.0)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("func,ref,rng_", UNARY, ids=[u[0] for u in UNARY])
def test_unary(dtype, func, ref, rng_):
    x = rnd((130, 257), dtype, 12, *(rng_ or (None, None)))
    close(K.unary(x, func=func), ref(f64(x)), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("func,ref", [
    ("gelu_dx", lambda x: 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2))) + x * np.exp(-x * x / 2) / math.sqrt(2 * math.pi)),
    ("silu_dx", lambda x: (1 / (1 + np.exp(-x))) * (1 + x * (1 - 1 / (1 + np.exp(-x))))),
])
def test_activation_backward(dtype, func, ref):
    g, x = rnd((100, 300), dtype, 13), rnd((100, 300), dtype, 14)
    close(K.activation_backward(g, x, func=func), f64(g) * ref(f64(x)), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op,ref", [("add", np.sum), ("max", np.max), ("min", np.min)])
@pytest.mark.parametrize("shape,dim", [((7, 300, 5), 1), ((130, 70), 0), ((130, 4100), 1), ((3, 200, 130), 2)])
def test_reduce_any_dim(dtype, op, ref, shape, dim):
    x = rnd(shape, dtype, 15)
    O = int(np.prod(shape[:dim]))
    I = int(np.prod(shape[dim + 1:]))
    out = K.reduce(x.reshape(O, shape[dim], I), op=op)
    expect = ref(f64(x), axis=dim).reshape(O, I)
    close(out, expect, dtype, scale=math.sqrt(shape[dim]) if op == "add" else 1.0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_column_sums_accumulate_on_tensor_engine(dtype):
    """Sums over a leading dimension (bias gradients: [1024, 288] -> [288]) multiply each
    128-row block by a ones column on TensorE, accumulating in PSUM: no transposes, and about
    4x faster than transposing every block for a VectorE row reduction."""
    from neuron_kernels.language import TensorSpec
    x = rnd((1, 1030, 600), dtype, 16)
    close(K.reduce(x, op="add", scale=0.5), 0.5 * f64(x).sum(1), dtype, scale=math.sqrt(1030))
    sched = K.reduce.schedule(TensorSpec((1, 1024, 288), dtype), op="add", profile="trn2")
    ops = [i.op for i in sched.program.instrs]
    assert "nc_transpose" not in ops and ops.count("nc_matmul") == 8, ops
    rows = K.reduce.schedule(TensorSpec((1, 1024, 288), dtype), op="max", profile="trn2")   # the transpose path
    assert sched.latency_ns < 0.5 * rows.latency_ns, (sched.latency_ns, rows.latency_ns)


def _softmax64(x):
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 10), (130, 1000), (64, 5000)])
def test_softmax_and_log_softmax(dtype, shape):
    x = rnd(shape, dtype, 16) * np.asarray(3, dtype)
    close(K.softmax(x), _softmax64(f64(x)), dtype)
    close(K.log_softmax(x), np.log(_softmax64(f64(x))), dtype, scale=10)


@pytest.mark.parametrize("dtype", DTYPES)
def test_log_softmax_of_rows_masked_with_the_dtypes_minimum(dtype):
    # A fully masked row (every element finfo.min, as attention masks write) is uniform:
    # log(1/C) per element, not 0.
    x = rnd((5, 18), dtype, 17)
    x[2] = np.finfo(np.float32).min if dtype == np.float32 else ml_dtypes.finfo(dtype).min
    ref = np.log(_softmax64(f64(x) - f64(x).max(1, keepdims=True)))
    close(K.log_softmax(x), ref, dtype)
    np.testing.assert_allclose(np.asarray(K.log_softmax(x), np.float64)[2], -math.log(18), rtol=1e-2)


def _ln64(x, w, b, eps):
    mu = x.mean(1, keepdims=True)
    rstd = 1 / np.sqrt(x.var(1, keepdims=True) + eps)
    return (x - mu) * rstd * w + b, mu, rstd


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(130, 1000), (7, 64)])
def test_layer_norm_forward_backward(dtype, shape):
    R, C = shape
    x, w, b, g = rnd(shape, dtype, 17), rnd((C,), dtype, 18), rnd((C,), dtype, 19), rnd(shape, dtype, 20)
    y, mu, rstd = K.layer_norm(x, w, b, eps=1e-5)
    y64, mu64, rstd64 = _ln64(f64(x), f64(w), f64(b), 1e-5)
    close(y, y64, dtype, scale=3)
    np.testing.assert_allclose(mu, mu64, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(rstd, rstd64, rtol=1e-4)
    gx, gw, gb = K.norm_backward(g, x, rstd, w, mu)
    xhat = (f64(x) - mu64) * rstd64
    dxh = f64(g) * f64(w)
    gx64 = rstd64 * (dxh - dxh.mean(1, keepdims=True) - xhat * (dxh * xhat).mean(1, keepdims=True))
    close(gx, gx64, dtype, scale=3)
    np.testing.assert_allclose(gw[0], (f64(g) * xhat).sum(0), rtol=1e-3, atol=1e-3 * math.sqrt(R))
    np.testing.assert_allclose(gb[0], f64(g).sum(0), rtol=1e-3, atol=1e-3 * math.sqrt(R))


@pytest.mark.parametrize("dtype", DTYPES)
def test_rms_norm_forward_backward(dtype):
    x, w, g = rnd((200, 768), dtype, 21), rnd((768,), dtype, 22), rnd((200, 768), dtype, 23)
    y, rstd = K.rms_norm(x, w, eps=1e-6)
    rstd64 = 1 / np.sqrt((f64(x) ** 2).mean(1, keepdims=True) + 1e-6)
    close(y, f64(x) * rstd64 * f64(w), dtype, scale=3)
    np.testing.assert_allclose(rstd, rstd64, rtol=1e-4)
    gx, gw, _ = K.norm_backward(g, x, rstd, w)
    xhat = f64(x) * rstd64
    dxh = f64(g) * f64(w)
    close(gx, rstd64 * (dxh - xhat * (dxh * xhat).mean(1, keepdims=True)), dtype, scale=3)
    np.testing.assert_allclose(gw[0], (f64(g) * xhat).sum(0), rtol=1e-3, atol=1e-3 * math.sqrt(200))


@pytest.mark.parametrize("dtype", DTYPES)
def test_embedding(dtype):
    table = rnd((1000, 3000), dtype, 24)
    idx = np.random.default_rng(25).integers(0, 1000, (300, 1)).astype(np.int32)
    np.testing.assert_array_equal(K.embedding(table, idx), table[idx[:, 0]])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_cross_entropy(dtype, reduction):
    logits = rnd((300, 1000), dtype, 26) * np.asarray(4, dtype)
    tgt = np.random.default_rng(27).integers(0, 1000, (300, 1)).astype(np.int32)
    loss, per_row = K.cross_entropy(logits, tgt, reduction=reduction)
    lp = np.log(_softmax64(f64(logits)))
    rows = -lp[np.arange(300), tgt[:, 0]]
    np.testing.assert_allclose(per_row[:, 0], rows, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(loss[0, 0], rows.mean() if reduction == "mean" else rows.sum(), rtol=1e-4)


def _sdpa64(q, k, v, scale, causal):
    s = np.einsum("bqd,bkd->bqk", q, k) * scale
    if causal:
        s = np.where(np.tril(np.ones(s.shape[1:], bool)), s, -np.inf)
    m = s.max(-1, keepdims=True)
    e = np.exp(s - m)
    lse = (m + np.log(e.sum(-1, keepdims=True)))
    return np.einsum("bqk,bkd->bqd", e / e.sum(-1, keepdims=True), v), lse


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("B,S,d", [(2, 200, 64), (1, 640, 128)])
def test_sdpa_forward(dtype, causal, B, S, d):
    q, k, v = rnd((B, S, d), dtype, 28), rnd((B, S, d), dtype, 29), rnd((B, S, d), dtype, 30)
    out, lse = K.sdpa_fwd(q, k, v, causal=causal)
    ref, lse64 = _sdpa64(f64(q), f64(k), f64(v), d ** -0.5, causal)
    # bf16: P is rounded to bf16 before P @ V, as flash kernels do.
    close(out, ref, dtype, scale=2)
    np.testing.assert_allclose(lse, lse64, rtol=1e-3 if dtype == np.float32 else 2e-2, atol=1e-3)


def test_adamw_step():
    shape = (300, 700)
    p, g, m, v = (rnd(shape, np.float32, s) for s in (31, 32, 33, 34))
    v = np.abs(v)
    lr, b1, b2, eps, wd, step = 1e-2, 0.9, 0.99, 1e-8, 0.1, 3
    p2, m2, v2 = K.adamw(p, g, m, v, lr=lr, beta1=b1, beta2=b2, eps=eps, weight_decay=wd, step=step)
    P, G, M, V = map(f64, (p, g, m, v))
    M = b1 * M + (1 - b1) * G
    V = b2 * V + (1 - b2) * G * G
    P = P * (1 - lr * wd) - lr * (M / (1 - b1 ** step)) / (np.sqrt(V / (1 - b2 ** step)) + eps)
    np.testing.assert_allclose(m2, M, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(v2, V, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(p2, P, rtol=1e-5, atol=1e-6)


def _sdpa_bwd64(q, k, v, do, scale, causal):
    s = np.einsum("bqd,bkd->bqk", q, k) * scale
    if causal:
        s = np.where(np.tril(np.ones(s.shape[1:], bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    o = p @ v
    ds = p * (np.einsum("bqd,bkd->bqk", do, v) - (do * o).sum(-1, keepdims=True)) * scale
    return ds @ k, np.einsum("bqk,bqd->bkd", ds, q), np.einsum("bqk,bqd->bkd", p, do)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_backward(dtype, causal):
    B, S, d = 2, 300, 64
    q, k, v, do = (rnd((B, S, d), dtype, s) for s in (35, 36, 37, 38))
    out, lse = K.sdpa_fwd(q, k, v, causal=causal)
    grads = K.sdpa_bwd(q, k, v, out, do, lse, causal=causal)
    refs = _sdpa_bwd64(f64(q), f64(k), f64(v), f64(do), d ** -0.5, causal)
    for g, r in zip(grads, refs):
        close(g, r, dtype, scale=float(np.abs(r).max()))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("BH,S,d", [(12, 64, 24), (6, 40, 32), (16, 16, 16), (5, 20, 8)])
def test_sdpa_packs_heads_of_short_sequences(dtype, causal, BH, S, d):
    """The adapters pack 128 // S heads (a divisor of B*H) into one problem kept apart by a block
    mask; forward and backward match float64 per head, and packing cuts the schedule."""
    from neuron_kernels import adapters
    from neuron_kernels.language import TensorSpec
    lead = (2, BH // 2) if BH % 2 == 0 else (BH,)      # (batch, heads) or one leading dim
    q, k, v, do = (rnd(lead + (S, d), dtype, s) for s in (41, 42, 43, 44))
    fwd = adapters.sdpa(q, k, v, is_causal=causal)
    assert fwd.kwargs["heads"] == adapters._heads_per_pack(BH, S, S, None, causal, forward=True)
    out, lse = fwd.post(fwd.kernel(*fwd.args, **fwd.kwargs))
    flat = lambda t: f64(t).reshape(BH, S, -1)  # noqa: E731
    ref, lse64 = _sdpa64(flat(q), flat(k), flat(v), d ** -0.5, causal)
    close(out.reshape(BH, S, d), ref, dtype, scale=2)
    np.testing.assert_allclose(lse.reshape(BH, S, 1), lse64, rtol=1e-3 if dtype == np.float32 else 2e-2, atol=1e-3)
    bwd = adapters.sdpa_backward(do, q, k, v, out, lse, is_causal=causal)
    assert bwd.kwargs["heads"] == adapters._heads_per_pack(BH, S, S, None, causal) > 1
    grads = bwd.post(bwd.kernel(*bwd.args, **bwd.kwargs))
    for g, r in zip(grads, _sdpa_bwd64(flat(q), flat(k), flat(v), flat(do), d ** -0.5, causal)):
        close(g.reshape(r.shape), r, dtype, scale=float(np.abs(r).max()))

    def latency(call, heads):
        g = call.kwargs["heads"]
        specs = [TensorSpec(a.shape if heads == g else (BH, S, a.shape[-1]), a.dtype) for a in call.args]
        return call.kernel.schedule(*specs, **{**call.kwargs, "heads": heads}).latency_ns

    # Each adapter's choice is the faster schedule; packing cuts the backward (0.33-0.86 of one
    # head at a time).
    packed, single = latency(bwd, bwd.kwargs["heads"]), latency(bwd, 1)
    assert packed < 0.95 * single, (packed, single)
    g = adapters._heads_per_pack(BH, S, S, None, causal)
    chosen, other = latency(fwd, fwd.kwargs["heads"]), latency(fwd, 1 if fwd.kwargs["heads"] > 1 else g)
    assert chosen <= other, (chosen, other)
