# Copyright 2026 The neuron-kernels Authors. Licensed under the Apache License, Version 2.0.
"""Softmax and log-softmax over the last dimension: rows on partitions, online max/sum over chunks.

Per chunk: VectorE takes the chunk max, ScalarE computes exp(x - max) and its row sum in
one activation_reduce (the fused form the NKI performance guide recommends, C §1.7).
"""

from __future__ import annotations

from .. import language as nl
from ._tiling import FCHUNK, row_blocks


def _row_stats(x, r0, rs, chunks):
    """Running (max, sum of exp(x - max)) over the chunks of rows r0:r0+rs; returns (max, sum, tiles)."""
    m = s = None
    tiles = []
    for c0, cs in chunks:
        t = nl.load(x[r0:r0 + rs, c0:c0 + cs], dtype="float32")
        if len(chunks) == 1:
            tiles.append(t)
        cm = nl.max(t, axis=1)
        if m is None:
            m = cm
        else:
            m_new = nl.maximum(m, cm)
            # rescale the running sum to the new max: s *= exp(m_old - m_new)
            corr = nl.exp(nl.subtract(m, m_new))
            s = nl.multiply(s, corr)
            m = m_new
        neg = nl.multiply(m, -1.0)
        cs_sum = nl.ndarray((rs, 1), "float32")
        nl.activation("exp", t, bias=neg, reduce_op="add", reduce_res=cs_sum)
        s = cs_sum if s is None else nl.add(s, cs_sum)
    return m, s, tiles


@nl.jit
def softmax(x, out_dtype=None):
    R, C = x.shape
    out = nl.ndarray((R, C), out_dtype or x.dtype, buffer=nl.shared_hbm)
    chunks = row_blocks(C, FCHUNK)
    for r0, rs in row_blocks(R):
        m, s, tiles = _row_stats(x, r0, rs, chunks)
        neg = nl.multiply(m, -1.0)
        inv = nl.reciprocal(s)
        for j, (c0, cs) in enumerate(chunks):
            t = tiles[0] if tiles else nl.load(x[r0:r0 + rs, c0:c0 + cs], dtype="float32")
            e = nl.activation("exp", t, bias=neg)
            nl.store(out[r0:r0 + rs, c0:c0 + cs], nl.multiply(e, inv, dtype=out.dtype))
    return out


@nl.jit
def log_softmax(x, out_dtype=None):
    R, C = x.shape
    out = nl.ndarray((R, C), out_dtype or x.dtype, buffer=nl.shared_hbm)
    chunks = row_blocks(C, FCHUNK)
    for r0, rs in row_blocks(R):
        m, s, tiles = _row_stats(x, r0, rs, chunks)
        log_s = nl.log(s)
        for j, (c0, cs) in enumerate(chunks):
            t = tiles[0] if tiles else nl.load(x[r0:r0 + rs, c0:c0 + cs], dtype="float32")
            # (x - max) - log(sum), as CPU computes it: max + log(sum) first would round log(sum)
            # away next to a huge max (rows masked with finfo.min) and give 0 for every element.
            nl.store(out[r0:r0 + rs, c0:c0 + cs], nl.subtract(nl.subtract(t, m), log_s, dtype=out.dtype))
    return out


@nl.jit
def softmax_backward(grad, y, log=False, out_dtype=None):
    """Gradient of (log-)softmax over the last dimension from its output ``y``:
    softmax: y * (g - sum(g * y)); log-softmax: g - exp(y) * sum(g). Rows on partitions."""
    R, C = y.shape
    out = nl.ndarray((R, C), out_dtype or y.dtype, buffer=nl.shared_hbm)
    chunks = row_blocks(C, FCHUNK)
    for r0, rs in row_blocks(R):
        s = None
        for c0, cs in chunks:
            g = nl.load(grad[r0:r0 + rs, c0:c0 + cs], dtype="float32")
            part = nl.sum(g if log else nl.multiply(g, nl.load(y[r0:r0 + rs, c0:c0 + cs], dtype="float32")), axis=1)
            s = part if s is None else nl.add(s, part)
        for c0, cs in chunks:
            g = nl.load(grad[r0:r0 + rs, c0:c0 + cs], dtype="float32")
            t = nl.load(y[r0:r0 + rs, c0:c0 + cs], dtype="float32")
            if log:
                res = nl.subtract(g, nl.multiply(nl.exp(t), s))
            else:
                res = nl.multiply(t, nl.subtract(g, s))
            nl.store(out[r0:r0 + rs, c0:c0 + cs], nl.copy(res, dtype=out.dtype))
    return out
