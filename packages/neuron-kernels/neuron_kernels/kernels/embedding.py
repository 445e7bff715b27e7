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
