# Copyright 2026 The neuron-kernels Authors. Licensed under the Apache License, Version 2.0.
"""Embedding lookup (indirect DMA gather)."""

from __future__ import annotations

from .. import language as nl
from ._tiling import FCHUNK, FP32_EXACT, row_blocks


@nl.jit
def embedding(table, indices):
    """out[i, :] = table[indices[i], :]; indices is (N, 1) int32."""
    N = indices.shape[0]
    V, D = table.shape
    out = nl.ndarray((N, D), table.dtype, buffer=nl.shared_hbm)
    for r0, rs in row_blocks(N):
        idx = nl.load(indices[r0:r0 + rs, :])
        for c0, cs in row_blocks(D, FCHUNK):
            nl.store(out[r0:r0 + rs, c0:c0 + cs], nl.load_gather(table[:, c0:c0 + cs], idx))
    return out


# Indices pass through fp32 on VectorE to wrap negative ones (exact below FP32_EXACT rows).


@nl.jit
def take_rows(table, indices):
    """out[i, :] = table[indices[i], :] with a negative index counting from the end, as torch's
    x[idx]; indices is (N, 1) int32. Any element type (the gather moves bytes)."""
    N = indices.shape[0]
    V, D = table.shape
    if V > FP32_EXACT:
        raise ValueError(f"a table of {V} rows: indices are wrapped in fp32, exact below {FP32_EXACT}")
    out = nl.ndarray((N, D), table.dtype, buffer=nl.shared_hbm)
    for r0, rs in row_blocks(N):
        i = nl.copy(nl.load(indices[r0:r0 + rs, :]), dtype="float32")
        i = nl.add(i, nl.multiply(nl.less(i, 0.0), float(V)))
        idx = nl.copy(i, dtype="int32")
        for c0, cs in row_blocks(D, FCHUNK):
            nl.store(out[r0:r0 + rs, c0:c0 + cs], nl.load_gather(table[:, c0:c0 + cs], idx))
    return out


@nl.jit
def gather_last(x, index):
    """out[r, j] = x[r, index[r, j]] for x (R, C) and int32 index (R, J): per 128-row block and index
    column, one indirect DMA of single elements, at flat rows r * C + index[r, j] computed on VectorE
    (exact below 2**24 elements)."""
    R, C = x.shape
    J = index.shape[1]
    if R * C > FP32_EXACT:
        raise ValueError(f"a source of {R * C} elements: positions are computed in fp32, exact below {FP32_EXACT}")
    flat = x.reshape(R * C, 1)
    out = nl.ndarray((R, J), x.dtype, buffer=nl.shared_hbm)
    for r0, rs in row_blocks(R):
        i = nl.copy(nl.load(index[r0:r0 + rs, :]), dtype="float32")
        row_start = nl.iota((rs, 1), "float32", base=r0 * C, partition_step=C)
        pos = nl.copy(nl.add(i, row_start), dtype="int32")
        res = nl.ndarray((rs, J), x.dtype)
        for j in range(J):
            res[:, j:j + 1] = nl.load_gather(flat, pos[:, j:j + 1])
        nl.store(out[r0:r0 + rs, :], res)
    return out


@nl.jit
def scatter_last(x, index, src, reduce="add"):
    """out = x, then for each j in order out[r, index[r, j]] += src[r, j] (``reduce="add"``) or
    = src[r, j] (``"set"``: the last write wins, as CPU's loop). Per 128-row block and column chunk,
    index column j's one-hot row (a column iota equal to the index) selects on VectorE, so
    repeated indices add up without a read-modify-write of HBM."""
    R, C = x.shape
    J = index.shape[1]
    out = nl.ndarray((R, C), x.dtype, buffer=nl.shared_hbm)
    for r0, rs in row_blocks(R):
        i = nl.copy(nl.load(index[r0:r0 + rs, :]), dtype="float32")
        v = nl.load(src[r0:r0 + rs, :], dtype="float32")
        for c0, cs in row_blocks(C, FCHUNK):
            cols = nl.iota((rs, cs), "float32", base=c0)
            ones = nl.full((rs, cs), 1.0, "float32") if reduce == "set" else None
            acc = nl.ndarray((rs, cs), "float32")
            acc[...] = nl.load(x[r0:r0 + rs, c0:c0 + cs], dtype="float32")
            for j in range(J):
                hit = nl.equal(cols, i[:, j:j + 1])
                if reduce == "add":
                    acc[...] = nl.add(acc, nl.multiply(hit, v[:, j:j + 1]))
                else:       # the value in every column (a multiply by 1, exact), selected where hit
                    acc[...] = nl.where(hit, nl.multiply(ones, v[:, j:j + 1]), acc)
            nl.store(out[r0:r0 + rs, c0:c0 + cs], nl.copy(acc, dtype=out.dtype))
    return out


@nl.jit
def embedding_backward(grad, indices, num_weights=1, padding_idx=-1):
    """grad_weight (num_weights, D) = sum over rows i of onehot(indices[i]) x grad[i, :].

    Scatter-add as a matmul: per block of 128 rows, the one-hot block (rows, classes) is
    TensorE's stationary operand and the gradient rows its moving operand, accumulated in
    PSUM over the row blocks, so repeated indices add up without a read-modify-write."""
    N, D = grad.shape
    dt = grad.dtype
    mm_dt = "float32" if dt == "float32" else "bfloat16"
    out = nl.ndarray((num_weights, D), dt, buffer=nl.shared_hbm)
    for v0, vs in row_blocks(num_weights):
        for d0, ds in row_blocks(D, 512):
            acc = nl.zeros((vs, ds), "float32", buffer=nl.psum)
            for r0, rs in row_blocks(N):
                idx = nl.copy(nl.load(indices[r0:r0 + rs, :]), dtype="float32")
                if padding_idx >= 0:
                    idx = nl.where(nl.equal(idx, float(padding_idx)), -1.0, idx, dtype="float32")
                onehot = nl.equal(nl.iota((rs, vs), "float32", base=v0), idx, dtype=mm_dt)
                g = nl.load(grad[r0:r0 + rs, d0:d0 + ds], dtype=mm_dt)
                nl.isa.nc_matmul(acc, onehot, g, accumulate=True)
            nl.store(out[v0:v0 + vs, d0:d0 + ds], nl.copy(acc, dtype=dt))
    return out


@nl.jit
def index_add_rows(x, indices, src, alpha=1.0):
    """out = x with out[indices[i], :] += alpha * src[i, :] (a negative index counting from the end):
    the rows' sum is embedding_backward's one-hot x source matmul, accumulated in PSUM over source
    row blocks, then added to x's rows."""
    V, D = x.shape
    N = src.shape[0]
    mm_dt = "float32" if x.dtype == "float32" else "bfloat16"
    out = nl.ndarray((V, D), x.dtype, buffer=nl.shared_hbm)
    for v0, vs in row_blocks(V):
        for d0, ds in row_blocks(D, 512):
            acc = nl.zeros((vs, ds), "float32", buffer=nl.psum)
            for r0, rs in row_blocks(N):
                idx = nl.copy(nl.load(indices[r0:r0 + rs, :]), dtype="float32")
                idx = nl.add(idx, nl.multiply(nl.less(idx, 0.0), float(V)))
                onehot = nl.equal(nl.iota((rs, vs), "float32", base=v0), idx, dtype=mm_dt)
                g = nl.load(src[r0:r0 + rs, d0:d0 + ds], dtype=mm_dt)
                nl.isa.nc_matmul(acc, onehot, g, accumulate=True)
            base = nl.load(x[v0:v0 + vs, d0:d0 + ds], dtype="float32")
            res = nl.add(base, nl.multiply(acc, float(alpha)) if alpha != 1.0 else acc, dtype=x.dtype)
            nl.store(out[v0:v0 + vs, d0:d0 + ds], res)
    return out
