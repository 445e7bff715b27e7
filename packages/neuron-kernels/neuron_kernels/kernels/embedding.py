# Copyright 2026 The neuron-kernels Authors. Licensed under the Apache License, Version 2.0.
"""Embedding lookup (indirect DMA gather)."""

from __future__ import annotations

from .. import language as nl
from ._tiling import FCHUNK, row_blocks


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


# Indices pass through fp32 on VectorE to wrap negative ones, exact below 2**24 rows.
_EXACT_ROWS = 2 ** 24


@nl.jit
def take_rows(table, indices):
    """out[i, :] = table[indices[i], :] with a negative index counting from the end, as torch's
    x[idx]; indices is (N, 1) int32. Any element type (the gather moves bytes)."""
    N = indices.shape[0]
    V, D = table.shape
    if V > _EXACT_ROWS:
        raise ValueError(f"a table of {V} rows: indices are wrapped in fp32, exact below {_EXACT_ROWS}")
    out = nl.ndarray((N, D), table.dtype, buffer=nl.shared_hbm)
    for r0, rs in row_blocks(N):
        i = nl.copy(nl.load(indices[r0:r0 + rs, :]), dtype="float32")
        i = nl.add(i, nl.multiply(nl.less(i, 0.0), float(V)))
        idx = nl.copy(i, dtype="int32")
        for c0, cs in row_blocks(D, FCHUNK):
            nl.store(out[r0:r0 + rs, c0:c0 + cs], nl.load_gather(table[:, c0:c0 + cs], idx))
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
