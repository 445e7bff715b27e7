# Copyright 2026 The neuron-kernels Authors. Licensed under the Apache License, Version 2.0.
"""LayerNorm and RMSNorm over the last dimension, forward and backward.

Rows sit on partitions, the normalised dimension on the free axis (whole row per tile, so
the kernels take rows of up to 8192 elements). Row statistics use ScalarE's fused
activation + reduction; weight gradients sum over rows with a ones-vector matmul on
TensorE, accumulating across row tiles in PSUM.
"""

from __future__ import annotations

from .. import language as nl
from ._tiling import P, row_blocks

MAX_ROW = 8192
NT = 512


def _check_row(C):
    if C > MAX_ROW:
        raise ValueError(f"normalised dimension {C} exceeds the kernel's {MAX_ROW}-element row tile")


def _stats(t, C, eps, center):
    """(mean or None, rstd) of the row tile t [rs, C] in fp32."""
    rs = t.shape[0]
    mean = None
    if center:
        mean = nl.multiply(nl.sum(t, axis=1), 1.0 / C)
        xc = nl.subtract(t, mean)
    else:
        xc = t
    ss = nl.ndarray((rs, 1), "float32")
    nl.activation("square", xc, reduce_op="add", reduce_res=ss)
    rstd = nl.activation("rsqrt", ss, scale=1.0 / C, bias=eps)
    return mean, xc, rstd


@nl.jit
def layer_norm(x, weight=None, bias=None, eps=1e-5):
    """Returns (y, mean, rstd) like aten::native_layer_norm over the last dimension of 2-D x."""
    R, C = x.shape
    _check_row(C)
    y = nl.ndarray((R, C), x.dtype, buffer=nl.shared_hbm)
    mean_o = nl.ndarray((R, 1), "float32", buffer=nl.shared_hbm)
    rstd_o = nl.ndarray((R, 1), "float32", buffer=nl.shared_hbm)
    for r0, rs in row_blocks(R):
        w = nl.load(weight.broadcast_partitions(rs), dtype="float32") if weight is not None else None
        b = nl.load(bias.broadcast_partitions(rs), dtype="float32") if bias is not None else None
        t = nl.load(x[r0:r0 + rs, :], dtype="float32")
        mean, xc, rstd = _stats(t, C, eps, True)
        out = nl.multiply(xc, rstd)
        if w is not None:
            out = nl.multiply(out, w)
        if b is not None:
            out = nl.add(out, b)
        nl.store(y[r0:r0 + rs, :], nl.copy(out, dtype=y.dtype))
        nl.store(mean_o[r0:r0 + rs, :], mean)
        nl.store(rstd_o[r0:r0 + rs, :], rstd)
    return y, mean_o, rstd_o


@nl.jit
def rms_norm(x, weight=None, eps=1e-6):
    """Returns (y, rstd) with y = x * rsqrt(mean(x^2) + eps) * weight over the last dimension."""
    R, C = x.shape
    _check_row(C)
    y = nl.ndarray((R, C), x.dtype, buffer=nl.shared_hbm)
    rstd_o = nl.ndarray((R, 1), "float32", buffer=nl.shared_hbm)
    for r0, rs in row_blocks(R):
        w = nl.load(weight.broadcast_partitions(rs), dtype="float32") if weight is not None else None
        t = nl.load(x[r0:r0 + rs, :], dtype="float32")
        _, _, rstd = _stats(t, C, eps, False)
        out = nl.multiply(t, rstd)
        if w is not None:
            out = nl.multiply(out, w)
        nl.store(y[r0:r0 + rs, :], nl.copy(out, dtype=y.dtype))
        nl.store(rstd_o[r0:r0 + rs, :], rstd)
    return y, rstd_o


@nl.jit
def norm_backward(grad, x, rstd, weight=None, mean=None):
    """Gradients of layer_norm (mean given) or rms_norm (mean None) over the last dimension.

    Returns (grad_x, grad_weight, grad_bias); the parameter gradients have shape (1, C).
    """
    R, C = x.shape
    _check_row(C)
    centered = mean is not None
    gx = nl.ndarray((R, C), x.dtype, buffer=nl.shared_hbm)
    gw = nl.ndarray((1, C), "float32", buffer=nl.shared_hbm)
    gb = nl.ndarray((1, C), "float32", buffer=nl.shared_hbm)
    ones = nl.full((P, 1), 1.0, "float32")
    gw_acc = nl.zeros((1, C), "float32")
    gb_acc = nl.zeros((1, C), "float32")
    for r0, rs in row_blocks(R):
        t = nl.load(x[r0:r0 + rs, :], dtype="float32")
        g = nl.load(grad[r0:r0 + rs, :], dtype="float32")
        r = nl.load(rstd[r0:r0 + rs, :])
        if centered:
            t = nl.subtract(t, nl.load(mean[r0:r0 + rs, :]))
        xhat = nl.multiply(t, r)
        gxhat = nl.multiply(g, xhat)
        for c0, cs in row_blocks(C, NT):      # column sums over rows: ones[rs, 1].T @ gxhat on TensorE
            part = nl.matmul(ones[:rs, :], gxhat[:, c0:c0 + cs], transpose_x=True)
            gw_acc[:, c0:c0 + cs] = nl.add(gw_acc[:, c0:c0 + cs], part)
            part_b = nl.matmul(ones[:rs, :], g[:, c0:c0 + cs], transpose_x=True)
            gb_acc[:, c0:c0 + cs] = nl.add(gb_acc[:, c0:c0 + cs], part_b)
        if weight is not None:
            g = nl.multiply(g, nl.load(weight.broadcast_partitions(rs), dtype="float32"))
        # dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) for layer norm;
        # dx = rstd * (g - xhat * mean(g * xhat)) for rms norm.
        m2 = nl.multiply(nl.sum(nl.multiply(g, xhat), axis=1), 1.0 / C)
        d = nl.subtract(g, nl.multiply(xhat, m2))
        if centered:
            d = nl.subtract(d, nl.multiply(nl.sum(g, axis=1), 1.0 / C))
        nl.store(gx[r0:r0 + rs, :], nl.multiply(d, r, dtype=gx.dtype))
    nl.store(gw, gw_acc)
    nl.store(gb, gb_acc)
    return gx, gw, gb
