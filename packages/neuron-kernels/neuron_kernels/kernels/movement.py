# Copyright 2026 The neuron-kernels Authors. Licensed under the Apache License, Version 2.0.
"""Data movement as DMA programs: concatenation, fills and index ranges.

Integer tensors wider than the engines' 32-bit lanes (int64) are moved as pairs of int32
words; a DMA copies their bytes exactly, so cat and copies of them need no engine type.
"""

from __future__ import annotations

from .. import language as nl
from ._tiling import FCHUNK, P, row_blocks


@nl.jit
def cat(*parts, out_dtype=None):
    """out[:, off_i:off_i + w_i] = parts[i] for 2-D views (outer, w_i): one HBM-to-HBM DMA per part."""
    O = parts[0].shape[0]
    W = sum(p.shape[1] for p in parts)
    out = nl.ndarray((O, W), out_dtype or parts[0].dtype, buffer=nl.shared_hbm)
    off = 0
    for i, p in enumerate(parts):
        w = p.shape[1]
        if w:
            # Parts go to different queues so their descriptors are processed in parallel.
            nl.isa.dma_copy(out[:, off:off + w], p, queue=f"part{i % 16}")
        off += w
    return out


@nl.jit
def fill(shape=(1, 1), value=0.0, out_dtype="float32", high=None):
    """A (R, C) tensor of ``value``: one memset tile stored over every block.

    ``high``: a 64-bit fill carried as int32 (low, high) word pairs, C even: the even columns are
    ``value``, the odd ones ``high``."""
    R, C = shape
    out = nl.ndarray((R, C), out_dtype, buffer=nl.shared_hbm)
    rows = min(R, 128)
    if high is None:
        cols = min(C, FCHUNK)
        t = nl.full((rows, cols), value, out_dtype)
        for r0, rs in row_blocks(R):
            for c0, cs in row_blocks(C, FCHUNK):
                nl.store(out[r0:r0 + rs, c0:c0 + cs], t[:rs, :cs])
        return out
    W = C // 2
    t = nl.ndarray((rows, min(W, FCHUNK), 2), out_dtype)
    nl.isa.memset(t[:, :, 0:1], value)
    nl.isa.memset(t[:, :, 1:2], high)
    pairs = out.reshape(R, W, 2)
    for r0, rs in row_blocks(R):
        for c0, cs in row_blocks(W, FCHUNK):
            nl.store(pairs[r0:r0 + rs, c0:c0 + cs, :], t[:rs, :cs, :])
    return out


@nl.jit
def arange(shape=(1, 1), start=0.0, step=1.0, words=False, out_dtype="float32"):
    """out[r, c] = start + step * (r * C + c) for a (R, C) view, generated on GpSimd (iota).

    ``words``: the result is int64 carried as int32 (low, high) pairs, out of shape (R, 2C);
    the caller guarantees every value is in [0, 2**31), so the high words are 0."""
    R, C = shape
    out = nl.ndarray((R, 2 * C) if words else (R, C), out_dtype, buffer=nl.shared_hbm)
    for r0, rs in row_blocks(R):
        for c0, cs in row_blocks(C, FCHUNK):
            base = start + step * (r0 * C + c0)
            if words:
                t = nl.ndarray((rs, cs, 2), out_dtype)
                nl.isa.iota(t[:, :, 0:1], base=base, partition_step=step * C, free_step=step)
                nl.isa.memset(t[:, :, 1:2], 0.0)
                nl.store(out.reshape(R, C, 2)[r0:r0 + rs, c0:c0 + cs, :], t)
            else:
                t = nl.iota((rs, cs), out_dtype, base=base, partition_step=step * C, free_step=step)
                nl.store(out[r0:r0 + rs, c0:c0 + cs], t)
    return out


@nl.jit
def triangle(x, rows=1, diagonal=0, upper=False, out_dtype=None):
    """torch.tril / torch.triu of a stack of (rows, C) matrices viewed as (B * rows, C): element
    (r, c) is kept when c - r <= diagonal (lower) or c - r >= diagonal (upper), else 0.

    Blocks wholly inside the kept triangle are HBM-to-HBM DMAs and blocks wholly outside it are
    stores of a zero tile; only blocks the diagonal crosses are loaded and selected on VectorE
    against a GpSimd iota of c - r."""
    N, C = x.shape
    R = rows
    B = N // R
    dt = out_dtype or x.dtype
    out = nl.ndarray((N, C), dt, buffer=nl.shared_hbm)
    zero = None
    for r0, rs in row_blocks(R):
        for c0, cs in row_blocks(C, FCHUNK):
            lo, hi = c0 - (r0 + rs - 1) - diagonal, c0 + cs - 1 - r0 - diagonal   # range of c - r - diagonal
            keep_all, drop_all = (lo >= 0, hi < 0) if upper else (hi <= 0, lo > 0)
            if drop_all and zero is None:
                zero = nl.full((min(R, 128), min(C, FCHUNK)), 0.0, dt)
            keep = None
            if not keep_all and not drop_all:
                d = nl.iota((rs, cs), "float32", base=c0 - r0 - diagonal, partition_step=-1, free_step=1)
                keep = nl.greater_equal(d, 0.0) if upper else nl.less_equal(d, 0.0)
            for b in nl.affine_range(B):
                at = b * R + r0
                dst = out[at:at + rs, c0:c0 + cs]
                if keep_all:
                    nl.isa.dma_copy(dst, x[at:at + rs, c0:c0 + cs], queue=f"tri{b % 16}")
                elif drop_all:
                    nl.store(dst, zero[:rs, :cs])
                else:
                    nl.store(dst, nl.where(keep, nl.load(x[at:at + rs, c0:c0 + cs]), 0.0, dtype=dt))
    return out


@nl.jit
def reverse_last(x):
    """out[r, c] = x[r, C - 1 - c] for x (R, C) of a float or 8/16-bit type: per block of at most 128
    rows and 128 columns, the source columns DMA-transposed and multiplied on TensorE by the
    anti-identity (one nonzero product per result: exact)."""
    R, C = x.shape
    out = nl.ndarray((R, C), x.dtype, buffer=nl.shared_hbm)
    rev = nl.ndarray((P, P), "float32", bufs=1)
    # anti-identity: 1 where row + column == P - 1
    nl.isa.iota(rev, base=0, partition_step=1, free_step=1)
    rev[...] = nl.equal(rev, float(P - 1))
    for c0, cs in row_blocks(C, P):
        s0 = C - c0 - cs                 # the source columns, reversed into [c0, c0 + cs)
        for r0, rs in row_blocks(R, P):
            src = nl.load_transpose2d(x[r0:r0 + rs, s0:s0 + cs])                      # (cs, rs)
            if src.dtype != "float32":
                src = nl.copy(src, dtype="float32")
            acc = nl.ndarray((rs, cs), "float32", buffer=nl.psum)
            nl.isa.nc_matmul(acc, src, rev[0:cs, P - cs:P])
            nl.store(out[r0:r0 + rs, c0:c0 + cs], nl.copy(acc, dtype=out.dtype))
    return out


@nl.jit
def cumsum_last(x, out_dtype="float32"):
    """out[r, c] = x[r, 0] + ... + x[r, c] for x (R, C): rows on partitions, each chunk scanned on
    VectorE in log2(chunk) shifted adds (Hillis-Steele), chunks chained by the previous chunk's last
    column as a per-partition operand."""
    R, C = x.shape
    out = nl.ndarray((R, C), out_dtype, buffer=nl.shared_hbm)
    for r0, rs in row_blocks(R, P):
        carry = None
        for c0, cs in row_blocks(C, FCHUNK):
            t = nl.load(x[r0:r0 + rs, c0:c0 + cs], dtype="float32")
            shift = 1
            while shift < cs:
                nxt = nl.ndarray((rs, cs), "float32")
                nxt[:, :shift] = nl.copy(t[:, :shift])
                nxt[:, shift:] = nl.add(t[:, shift:], t[:, :cs - shift])
                t = nxt
                shift *= 2
            if carry is not None:
                t = nl.add(t, carry)
            carry = nl.copy(t[:, cs - 1:cs])
            nl.store(out[r0:r0 + rs, c0:c0 + cs], nl.copy(t, dtype=out_dtype))
    return out
