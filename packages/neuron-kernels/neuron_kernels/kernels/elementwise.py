# Copyright 2026 The neuron-kernels Authors. Licensed under the Apache License, Version 2.0.
"""Elementwise kernels over 2-D views: binary (VectorE), with a scalar, and unary activations (ScalarE).

Callers pick the 2-D view: a fully contiguous tensor whose size divides by 128 is best
viewed as [128, n/128] so every partition and a long free dimension are used.
"""

from __future__ import annotations

from .. import language as nl
from ._tiling import FCHUNK, row_blocks


@nl.jit
def binary(a, b, op="add", out_dtype=None):
    """out = a <op> b for two 2-D tensors of one shape (op: add, subtract, multiply, divide, maximum, ...)."""
    R, C = a.shape
    out = nl.ndarray((R, C), out_dtype or a.dtype, buffer=nl.shared_hbm)
    f = getattr(nl, op)
    for r0, rs in row_blocks(R):
        for c0, cs in row_blocks(C, FCHUNK):
            ta = nl.load(a[r0:r0 + rs, c0:c0 + cs])
            tb = nl.load(b[r0:r0 + rs, c0:c0 + cs])
            nl.store(out[r0:r0 + rs, c0:c0 + cs], f(ta, tb, dtype=out.dtype))
    return out


@nl.jit
def binary_scalar(a, scalar=0.0, op="add", reverse=False, out_dtype=None):
    """out = a <op> scalar (or scalar <op> a when ``reverse``)."""
    R, C = a.shape
    out = nl.ndarray((R, C), out_dtype or a.dtype, buffer=nl.shared_hbm)
    f = getattr(nl, op)
    for r0, rs in row_blocks(R):
        for c0, cs in row_blocks(C, FCHUNK):
            ta = nl.load(a[r0:r0 + rs, c0:c0 + cs])
            res = f(scalar, ta, dtype=out.dtype) if reverse else f(ta, scalar, dtype=out.dtype)
            nl.store(out[r0:r0 + rs, c0:c0 + cs], res)
    return out


@nl.jit
def unary(a, func="exp", scale=1.0, bias=0.0, out_dtype=None):
    """out = func(a * scale + bias) on ScalarE (func: exp, log, tanh, sigmoid, relu, gelu, silu, ...)."""
    R, C = a.shape
    out = nl.ndarray((R, C), out_dtype or a.dtype, buffer=nl.shared_hbm)
    for r0, rs in row_blocks(R):
        for c0, cs in row_blocks(C, FCHUNK):
            ta = nl.load(a[r0:r0 + rs, c0:c0 + cs])
            nl.store(out[r0:r0 + rs, c0:c0 + cs], nl.activation(func, ta, bias=bias, scale=scale, dtype=out.dtype))
    return out


@nl.jit
def activation_backward(grad, x, func="gelu_dx", out_dtype=None):
    """grad_in = grad * func'(x) (func: gelu_dx, silu_dx, sigmoid_dx)."""
    R, C = x.shape
    out = nl.ndarray((R, C), out_dtype or x.dtype, buffer=nl.shared_hbm)
    for r0, rs in row_blocks(R):
        for c0, cs in row_blocks(C, FCHUNK):
            tg = nl.load(grad[r0:r0 + rs, c0:c0 + cs])
            d = nl.activation(func, nl.load(x[r0:r0 + rs, c0:c0 + cs]), dtype="float32")
            nl.store(out[r0:r0 + rs, c0:c0 + cs], nl.multiply(tg, d, dtype=out.dtype))
    return out
