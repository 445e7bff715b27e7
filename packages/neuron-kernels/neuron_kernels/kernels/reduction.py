# Copyright 2026 The neuron-kernels Authors. Licensed under the Apache License, Version 2.0.
"""Reductions (sum, mean, max, min) over one dimension of a tensor viewed as [outer, D, inner].

inner == 1: rows on partitions, VectorE reduces along the free dimension in chunks.
inner > 1, sums of float32/bfloat16: TensorE multiplies each [D block, inner] tile by a ones
column, accumulating the [1, inner] column sums in PSUM (D stays on the partitions: no transpose).
inner > 1 otherwise: [D, inner] blocks are transposed on TensorE so D lands on the free dimension.
"""

from __future__ import annotations

from .. import language as nl
from ._tiling import FCHUNK, FP32_EXACT, P, row_blocks

_COMBINE = {"add": "add", "max": "maximum", "min": "minimum"}


def _reduce_rows(x2, out2, op, scale):
    """out2[r, 0] = reduce_c x2[r, c] for 2-D views."""
    R, C = x2.shape
    red = {"add": nl.sum, "max": nl.max, "min": nl.min}[op]
    comb = getattr(nl, _COMBINE[op])
    for r0, rs in row_blocks(R):
        acc = None
        for c0, cs in row_blocks(C, FCHUNK):
            part = red(nl.load(x2[r0:r0 + rs, c0:c0 + cs]), axis=1, dtype="float32")
            acc = part if acc is None else comb(acc, part)
        nl.store(out2[r0:r0 + rs, :], nl.multiply(acc, scale, dtype=out2.dtype) if scale != 1.0
                 else nl.copy(acc, dtype=out2.dtype))


def _sum_columns(x, out, scale):
    """out[o, i] = scale * sum_d x[o, d, i]: ones[D block, 1]^T @ x[o, D block, inner chunk] on
    TensorE, accumulated over the D blocks in one PSUM bank (512 fp32 columns per chunk)."""
    O, D, I = x.shape
    ones = nl.full((min(D, P), 1), 1.0, x.dtype, bufs=1)
    # Enough load buffers (up to 8) that every block's DMA is in flight while TensorE accumulates.
    nbufs = max(2, min(8, -(-D // P)))
    for o in nl.affine_range(O):
        for i0, is_ in row_blocks(I, 512):
            acc = nl.ndarray((1, is_), "float32", buffer=nl.psum)
            for j, (d0, ds) in enumerate(row_blocks(D, P)):
                t = nl.ndarray((ds, is_), x.dtype, bufs=nbufs)
                nl.isa.dma_copy(t, x[o, d0:d0 + ds, i0:i0 + is_])
                nl.isa.nc_matmul(acc, ones[:ds, :], t, accumulate=j > 0)
            nl.store(out[o:o + 1, i0:i0 + is_], nl.multiply(acc, scale, dtype=out.dtype) if scale != 1.0
                     else nl.copy(acc, dtype=out.dtype))


@nl.jit
def reduce(x, op="add", scale=1.0, out_dtype=None):
    """out[o, i] = scale * reduce_d x[o, d, i] for a 3-D view (outer, D, inner); op: add/max/min."""
    O, D, I = x.shape
    out = nl.ndarray((O, I), out_dtype or x.dtype, buffer=nl.shared_hbm)
    if I == 1:
        _reduce_rows(x.reshape(O, D), out, op, scale)
        return out
    if op == "add" and x.dtype in ("float32", "bfloat16"):
        _sum_columns(x, out, scale)
        return out
    out3 = out.reshape(O, I, 1)
    comb = getattr(nl, _COMBINE[op])
    red = {"add": nl.sum, "max": nl.max, "min": nl.min}[op]
    for o in nl.affine_range(O):
        for i0, is_ in row_blocks(I, P):
            acc = None
            for d0, ds in row_blocks(D, P):
                t = nl.load(x[o, d0:d0 + ds, i0:i0 + is_])
                part = red(nl.transpose(t), axis=1, dtype="float32")
                acc = part if acc is None else comb(acc, part)
            nl.store(out3[o, i0:i0 + is_, :], nl.multiply(acc, scale, dtype=out.dtype) if scale != 1.0
                     else nl.copy(acc, dtype=out.dtype))
    return out


TOPK_ROW = 8192


@nl.jit
def topk_rows(x, k=1, largest=True):
    """The k largest (or smallest) of each row of x (R, C), in order: values (R, k) and indices as
    int32 word pairs (R, 2k) (int64 in memory: low word the position, high word 0). Per pick, on
    VectorE: the row's max, the first position holding it, and that position masked out, so equal
    values come out lowest position first."""
    R, C = x.shape
    if C > TOPK_ROW:
        raise ValueError(f"rows of {C} elements exceed the kernel's {TOPK_ROW}-element row tile")
    vals = nl.ndarray((R, k), x.dtype, buffer=nl.shared_hbm)
    words = nl.ndarray((R, 2 * k), "int32", buffer=nl.shared_hbm)
    for r0, rs in row_blocks(R):
        t = nl.ndarray((rs, C), "float32")
        t[...] = nl.load(x[r0:r0 + rs, :], dtype="float32")
        if not largest:
            t[...] = nl.multiply(t, -1.0)
        pos = nl.iota((rs, C), "float32")
        v = nl.ndarray((rs, k), "float32")
        w = nl.zeros((rs, 2 * k), "float32")
        for j in range(k):
            m = nl.max(t, axis=1)
            first = nl.min(nl.where(nl.equal(t, m), pos, float(FP32_EXACT)), axis=1)
            v[:, j:j + 1] = nl.multiply(m, 1.0 if largest else -1.0)
            w[:, 2 * j:2 * j + 1] = nl.copy(first)
            if j + 1 < k:
                t[...] = nl.where(nl.equal(pos, first), float("-inf"), t)
        nl.store(vals[r0:r0 + rs, :], nl.copy(v, dtype=vals.dtype))
        nl.store(words[r0:r0 + rs, :], nl.copy(w, dtype="int32"))
    return vals, words
