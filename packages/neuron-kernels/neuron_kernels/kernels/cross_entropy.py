# Copyright 2026 The neuron-kernels Authors. Licensed under the Apache License, Version 2.0.
"""Cross-entropy loss over class logits against class-index targets."""

from __future__ import annotations

from .. import language as nl
from ._tiling import FCHUNK, P, row_blocks


@nl.jit
def cross_entropy(logits, target, reduction="mean"):
    """Cross-entropy of logits (N, C) against class indices target (N, 1) int32.

    Returns (loss, per_row): loss is (1, 1) (mean or sum over rows), per_row is (N, 1) fp32.
    """
    N, C = logits.shape
    if C > FCHUNK * 4:
        raise ValueError(f"cross_entropy holds a whole row of {C} classes per tile; at most {FCHUNK * 4}")
    per_row = nl.ndarray((N, 1), "float32", buffer=nl.shared_hbm)
    loss = nl.ndarray((1, 1), "float32", buffer=nl.shared_hbm)
    ones = nl.full((P, 1), 1.0 / N if reduction == "mean" else 1.0, "float32")
    cls = nl.iota((P, C), "float32")                       # cls[p, c] = c
    total = nl.zeros((1, 1), "float32", buffer=nl.psum)
    for r0, rs in row_blocks(N):
        x = nl.load(logits[r0:r0 + rs, :], dtype="float32")
        tgt = nl.copy(nl.load(target[r0:r0 + rs, :]), dtype="float32")
        m = nl.max(x, axis=1)
        s = nl.ndarray((rs, 1), "float32")
        nl.activation("exp", x, bias=nl.multiply(m, -1.0), reduce_op="add", reduce_res=s)
        lse = nl.add(m, nl.log(s))
        onehot = nl.equal(cls[:rs, :], tgt)                # per-partition scalar compare
        picked = nl.sum(nl.multiply(onehot, x), axis=1)
        row_loss = nl.subtract(lse, picked)
        nl.store(per_row[r0:r0 + rs, :], row_loss)
        nl.isa.nc_matmul(total, row_loss, ones[:rs, :], accumulate=True)   # sum over partitions on TensorE
    nl.store(loss, nl.copy(total))
    return loss, per_row
