# Copyright 2026 The neuron-kernels Authors. Licensed under the Apache License, Version 2.0.
"""The generated families (pointwise expressions, foreach lists, data movement, losses) against
numpy references, at 128-aligned and ragged shapes, in every float dtype a row claims."""

import math
import os

import ml_dtypes
import numpy as np
import pytest

import neuron_kernels
from neuron_kernels import lookup

r = np.random.default_rng(11)
SHAPES = [(130, 70), (2, 128)]
if os.environ.get("NEURON_KERNELS_FULL_MATRIX") == "1":      # make test-kernels-full
    SHAPES += [(1, 1), (257, 129), (128, 4100), (3, 5, 7, 11)]
ERF = np.vectorize(math.erf)
ROWS_COLS = [s for s in SHAPES if len(s) == 2 and s[0] > 1]     # (rows, classes) cases

# numpy semantics of the expression language's operators (independent of the kernels)
NP = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
    "maximum": np.maximum, "minimum": np.minimum, "power": np.power,
    "greater": np.greater, "greater_equal": np.greater_equal, "less": np.less, "less_equal": np.less_equal,
    "equal": np.equal, "not_equal": np.not_equal,
    "logical_and": lambda a, b: (a != 0) & (b != 0), "logical_or": lambda a, b: (a != 0) | (b != 0),
    "where": lambda p, a, b: np.where(p != 0, a, b),
    "sin": np.sin, "cos": np.cos, "erf": ERF, "sign": np.sign, "sqrt": np.sqrt, "exp": np.exp, "tanh": np.tanh,
    "negative": np.negative, "abs": np.abs, "reciprocal": lambda x: 1 / x, "log": np.log, "square": np.square,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "rsqrt": lambda x: 1 / np.sqrt(x),
    "softplus": lambda x: np.logaddexp(0.0, x),
}


def ref_eval(node, xs, t=(), s=0.0):
    k = node[0]
    if k == "x":
        return xs[node[1]]
    if k == "t":
        return t[node[1]]
    if k == "s":
        return s
    if k == "c":
        return node[1]
    return NP[k](*(ref_eval(a, xs, t, s) for a in node[1:]))


def positive(shape):
    return r.uniform(0.5, 2.0, shape).astype(np.float32)


def tensor_expr(entry):
    """The row's expression with every argument name an operand, numbers filled in."""
    names = []

    def conv(n):
        if isinstance(n, (int, float)):
            return ("c", float(n))
        if isinstance(n, str):
            numbers = {"alpha": 0.5, "value": 0.75, "exponent": 2.0, "threshold": 0.1, "negative_slope": 0.02,
                       "scalar": 0.3, "min_val": -0.5, "max_val": 0.5, "min": -0.5, "max": 0.5, "beta": 1.5,
                       "scale": 1.2, "input_scale": 0.8}
            if n in numbers and entry.adapter == "pointwise":
                return ("c", numbers[n])
            if n not in names:
                names.append(n)
            return ("x", names.index(n))
        if n[0] == "if":        # a bool argument's choice: the false branch here
            return conv(n[3])
        return (n[0], *(conv(k) for k in n[1:]))
    e = entry.columns["expression"]
    if e[0] == "clamp":
        e = ["minimum", ["maximum", e[1], e[2]], e[3]]
    return conv(e), names


# rows whose expression the table states (glu's halves are built by its binder)
POINTWISE = [e for e in neuron_kernels.table().values() if e.adapter == "pointwise" and "expression" in e.columns]


def _inputs(names, shape, dtype):
    out = []
    for n in names:
        if n in ("condition", "mask"):
            out.append((r.standard_normal(shape) > 0).astype(np.uint8))
        elif n in ("tensor2", "exponent"):
            out.append(positive(shape).astype(dtype))
        else:
            out.append(r.standard_normal(shape).astype(np.float32).astype(dtype))
    return out


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("entry", POINTWISE, ids=lambda e: e.aten)
def test_pointwise_rows_match_numpy(entry, shape):
    expr, names = tensor_expr(entry)
    for dt in [d for d in entry.dtypes if d != "bool"] or ["float32"]:
        npdt = np.float32 if dt == "float32" else np.dtype(ml_dtypes.bfloat16) if dt == "bfloat16" else np.float16
        xs = _inputs(names, shape, npdt)
        if entry.aten.startswith("aten::pow"):
            xs[0] = positive(shape).astype(npdt)
        got = entry.run(*xs, expr=expr, out_dtype="float32")
        want = ref_eval(expr, [x.astype(np.float64) for x in xs])
        np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=2e-5, atol=2e-5,
                                   err_msg=f"{entry.aten} {dt}")


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_foreach_list_is_one_launch_with_shared_and_scalar_list_operands(shape):
    e = lookup("aten::_foreach_addcdiv.ScalarList", "float32")
    xs = [r.standard_normal(s).astype(np.float32) for s in (shape, (7,), shape)]
    ds = [positive(x.shape) for x in xs]
    args = [a for x, d in zip(xs, ds) for a in (x, x * 0.5, d)]
    expr = ("add", ("x", 0), ("multiply", ("s",), ("divide", ("x", 1), ("x", 2))))
    got = e.run(*args, expr=expr, arity=3, scalars=(0.1, -2.0, 3.0), out_dtype="float32")
    for g, x, d, s in zip(got, xs, ds, (0.1, -2.0, 3.0)):
        np.testing.assert_allclose(g, x + s * (x * 0.5) / d, rtol=1e-5, atol=1e-5)
    one = e.estimate_ns([tuple(a.shape) for a in args[:3]], "float32", expr=expr, arity=3, scalars=(0.5,),
                        out_dtype="float32")
    three = e.estimate_ns([tuple(a.shape) for a in args], "float32", expr=expr, arity=3, scalars=(0.5,) * 3,
                          out_dtype="float32")
    assert one < three < 3 * one       # one launch's fixed cost, not three
    m = lookup("aten::_foreach_mul.Tensor", "float32")
    got = m.run(np.array([[2.5]], np.float32), *xs, expr=("multiply", ("x", 0), ("t", 0)), arity=1, shared=1,
                out_dtype="float32")
    for g, x in zip(got, xs):
        np.testing.assert_allclose(g, 2.5 * x, rtol=1e-6)


@pytest.mark.parametrize("order", [1.0, 2.0, math.inf])
def test_norms(order):
    xs = [r.standard_normal(s).astype(np.float32) for s in ((130, 70), (2, 128), (5,))]
    got = lookup("aten::_foreach_norm.Scalar", "float32").run(*xs, ord=order)
    for g, x in zip(got, xs):
        np.testing.assert_allclose(g, np.linalg.norm(x.ravel().astype(np.float64), order), rtol=1e-5)


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_cat_any_dim_and_64_bit_words(dim):
    a, b = r.standard_normal((3, 5, 7)).astype(np.float32), r.standard_normal((3, 5, 7)).astype(np.float32)
    sh = list(a.shape)
    sh[dim] = 2
    c = r.standard_normal(sh).astype(np.float32)
    np.testing.assert_array_equal(lookup("aten::cat", "float32").run(a, c, b, dim=dim), np.concatenate([a, c, b], dim))
    i = r.integers(-2 ** 62, 2 ** 62, (3, 5, 7))
    words = lambda x: x.reshape(-1).view(np.int32).reshape(x.shape[:-1] + (2 * x.shape[-1],))  # noqa: E731
    got = lookup("aten::cat", "int64").run(words(i), words(i[:, :2] if dim in (1,) else i), dim=dim)
    want = np.concatenate([i, i[:, :2] if dim in (1,) else i], dim)
    np.testing.assert_array_equal(got.reshape(-1).view(np.int64).reshape(want.shape), want)


@pytest.mark.parametrize("shape", [(130, 70), (3, 200, 150), (2, 5, 2100), (1, 1)], ids=str)
def test_triangle_keeps_copies_zeroes_and_selects_blocks(shape):
    """Blocks wholly kept (DMA), wholly dropped (zero stores) and crossed by the diagonal (select)."""
    x = r.standard_normal(shape).astype(np.float32)
    mats = x.reshape(-1, *shape[-2:])
    for k in (-3, 0, 2, 2050, -2050):
        for op, ref in (("aten::tril", np.tril), ("aten::triu", np.triu)):
            got = lookup(op, "float32").run(x, diagonal=k, upper=op.endswith("triu"))
            np.testing.assert_array_equal(got, np.stack([ref(m, k) for m in mats]).reshape(shape))


def test_fill_and_arange():
    f = lookup("aten::fill_.Scalar", "float32").run(shape=(130, 70), value=-3.25, out_dtype="float32")
    assert f.shape == (130, 70) and (f == -3.25).all()
    z = lookup("aten::zero_", "int64").run(shape=(5, 6), value=0.0, out_dtype="int32")
    assert (z == 0).all()
    a = lookup("aten::arange.start_out", "int64").run(n=300, start=5.0, step=3.0, words=True, out_dtype="int32")
    np.testing.assert_array_equal(a.reshape(-1).view(np.int64), np.arange(5, 5 + 3 * 300, 3))
    a = lookup("aten::arange.start_out", "float32").run(n=130, start=-1.0, step=0.25, out_dtype="float32")
    np.testing.assert_allclose(a, np.arange(130) * 0.25 - 1.0)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("shape", ROWS_COLS, ids=str)
def test_nll_loss_forward_backward(reduction, shape):
    N, C = shape
    x = r.standard_normal(shape).astype(np.float32)
    t = r.integers(0, C, N)
    t[::7] = -100
    keep = t != -100
    e = lookup("aten::nll_loss_forward", "float32")
    loss, tw = e.run(x, t, reduction=reduction, ignore_index=-100)
    per = np.where(keep, -x[np.arange(N), np.where(keep, t, 0)], 0.0)
    want = {"mean": per.sum() / keep.sum(), "sum": per.sum(), "none": per}[reduction]
    np.testing.assert_allclose(loss, want, rtol=1e-5, atol=1e-6)
    if reduction != "none":
        assert float(tw) == keep.sum()
    g = np.array(0.7 if reduction != "none" else 0.0, np.float32) if reduction != "none" else \
        r.standard_normal(N).astype(np.float32)
    gi = lookup("aten::nll_loss_backward", "float32").run(g, x, t, np.array(keep.sum(), np.float32),
                                                         reduction=reduction, ignore_index=-100)
    want = np.zeros_like(x)
    scale = {"mean": -0.7 / keep.sum(), "sum": -0.7}.get(reduction)
    for i in np.nonzero(keep)[0]:
        want[i, t[i]] = scale if scale is not None else -g[i]
    np.testing.assert_allclose(gi, want, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("shape", ROWS_COLS, ids=str)
def test_softmax_backwards_and_embedding_backward(shape):
    x = r.standard_normal(shape).astype(np.float32)
    g = r.standard_normal(shape).astype(np.float32)
    y = np.exp(x) / np.exp(x).sum(-1, keepdims=True)
    got = lookup("aten::_softmax_backward_data", "float32").run(g, y, dim=-1)
    np.testing.assert_allclose(got, y * (g - (g * y).sum(-1, keepdims=True)), rtol=1e-5, atol=1e-6)
    got = lookup("aten::_log_softmax_backward_data", "float32").run(g, np.log(y), dim=0)
    np.testing.assert_allclose(got, g - y * g.sum(0, keepdims=True), rtol=1e-4, atol=1e-5)
    idx = r.integers(0, 150, shape[0])
    gw = lookup("aten::embedding_dense_backward", "float32").run(g, idx, num_weights=150, padding_idx=3)
    want = np.zeros((150, shape[1]), np.float32)
    np.add.at(want, idx, g)
    want[3] = 0
    np.testing.assert_allclose(gw, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dims", [(), (0,), (0, 2), (1, 2), (0, 1, 2)])
def test_reductions_over_any_dims(dims):
    x = r.standard_normal((6, 130, 5)).astype(np.float32)
    np.testing.assert_allclose(lookup("aten::sum.dim_IntList", "float32").run(x, dim=dims, keepdim=True),
                               x.sum(dims or None, keepdims=True), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(lookup("aten::amin", "float32").run(x, dim=dims, keepdim=False),
                               x.min(dims or None), rtol=0, atol=0)
