# Copyright 2026 The neuron-kernels Authors. Licensed under the Apache License, Version 2.0.
"""Batch norm and group norm kernels against float64 numpy, forward and backward, with rows of
one SBUF chunk and of several."""

import numpy as np
import pytest

from neuron_kernels import lookup

r = np.random.default_rng(5)


def _norm_grads(g, x, axis):
    """(y-normalised grad_x without affine, xhat) for normalisation over ``axis``."""
    mu = x.mean(axis, keepdims=True)
    var = x.var(axis, keepdims=True)
    xhat = (x - mu) / np.sqrt(var + 1e-5)
    return xhat, 1 / np.sqrt(var + 1e-5)


@pytest.mark.parametrize("shape", [(4, 6, 5), (2, 3, 2500)], ids=str)
def test_batch_norm_training_statistics_running_update_and_backward(shape):
    N, C, L = shape
    x = (r.standard_normal(shape) * 2 + 1).astype(np.float32)
    w, b = r.standard_normal(C).astype(np.float32), r.standard_normal(C).astype(np.float32)
    rm, rv = r.standard_normal(C).astype(np.float32), r.uniform(0.5, 2, C).astype(np.float32)
    y, mean, invstd, rm2, rv2 = lookup("aten::native_batch_norm", "float32").run(
        x, w, b, rm, rv, training=True, momentum=0.1, eps=1e-5)
    x64 = x.astype(np.float64)
    xhat, inv = _norm_grads(None, x64, (0, 2))
    np.testing.assert_allclose(y, xhat * w[:, None] + b[:, None], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(invstd, inv.reshape(C), rtol=1e-5)
    np.testing.assert_allclose(rm2, 0.9 * rm + 0.1 * x64.mean((0, 2)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rv2, 0.9 * rv + 0.1 * x64.var((0, 2), ddof=1), rtol=1e-5, atol=1e-6)
    g = r.standard_normal(shape).astype(np.float32)
    gx, gw, gb = lookup("aten::native_batch_norm_backward", "float32").run(g, x, mean, invstd, w)
    h = g * w[:, None]
    want = inv * (h - h.mean((0, 2), keepdims=True) - xhat * (h * xhat).mean((0, 2), keepdims=True))
    np.testing.assert_allclose(gx, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gw, (g * xhat).sum((0, 2)), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(gb, g.sum((0, 2)), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("sizes", [(2, 12, 3, 20), (3, 4, 2, 1100)], ids=str)
def test_group_norm_forward_and_backward(sizes):
    N, C, G, L = sizes
    x = r.standard_normal((N, C, L)).astype(np.float32)
    w, b = r.standard_normal(C).astype(np.float32), r.standard_normal(C).astype(np.float32)
    y, mean, rstd = lookup("aten::native_group_norm", "float32").run(x, w, b, N=N, C=C, HxW=L, group=G, eps=1e-5)
    xg = x.astype(np.float64).reshape(N, G, -1)
    xhat, inv = _norm_grads(None, xg, 2)
    np.testing.assert_allclose(y, xhat.reshape(N, C, L) * w[:, None] + b[:, None], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(rstd, inv.reshape(N, G), rtol=1e-5)
    g = r.standard_normal((N, C, L)).astype(np.float32)
    gx, gw, gb = lookup("aten::native_group_norm_backward", "float32").run(
        g, x, mean, rstd, w, N=N, C=C, HxW=L, group=G)
    h = (g * w[:, None]).reshape(N, G, -1)
    want = inv * (h - h.mean(2, keepdims=True) - xhat * (h * xhat).mean(2, keepdims=True))
    np.testing.assert_allclose(gx, want.reshape(N, C, L), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gw, (g * xhat.reshape(N, C, L)).sum((0, 2)), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(gb, g.sum((0, 2)), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("dim", [0, 2])
def test_weight_norm_forward_and_backward(dim):
    v = r.standard_normal((6, 5, 2100)).astype(np.float32)
    g = (r.uniform(0.5, 1.5, v.shape[dim]).astype(np.float32)).reshape([-1 if k == dim else 1 for k in range(3)])
    axes = tuple(k for k in range(3) if k != dim)
    w, norms = lookup("aten::_weight_norm_interface", "float32").run(v, g, dim=dim)
    v64 = v.astype(np.float64)
    n = np.sqrt((v64 * v64).sum(axes, keepdims=True))
    np.testing.assert_allclose(norms, n.reshape(g.shape), rtol=1e-5)
    np.testing.assert_allclose(w, v64 * g / n, rtol=1e-4, atol=1e-5)
    gw = r.standard_normal(v.shape).astype(np.float32)
    gv, gg = lookup("aten::_weight_norm_interface_backward", "float32").run(gw, v, g, norms, dim=dim)
    dot = (gw * v64).sum(axes, keepdims=True)
    np.testing.assert_allclose(gg, (dot / n).reshape(g.shape), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gv, g / n * (gw - v64 * dot / n ** 2), rtol=1e-4, atol=1e-4)
