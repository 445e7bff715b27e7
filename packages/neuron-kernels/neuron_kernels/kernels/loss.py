# Copyright 2026 The neuron-kernels Authors. Licensed under the Apache License, Version 2.0.
"""Negative log-likelihood loss (forward and backward) over log-probabilities and class indices.

A target row becomes a one-hot row by comparing a class iota with the row's target (a
per-partition scalar); an ignored target (ignore_index outside [0, C)) matches no class, so
its row adds neither loss nor weight. Partition sums run on TensorE against a ones column.
"""

from __future__ import annotations

from .. import language as nl
from ._tiling import FCHUNK, P, row_blocks


def _target(target, r0, rs, ignore_index):
    """The rows' targets in fp32, with ignore_index mapped to -1 (no class matches it)."""
    t = nl.copy(nl.load(target[r0:r0 + rs, :]), dtype="float32")
    if 0 <= ignore_index:
        t = nl.where(nl.equal(t, float(ignore_index)), -1.0, t, dtype="float32")
    return t


@nl.jit
def nll_loss(logp, target, reduction="mean", ignore_index=-100, out_dtype=None):
    """Returns (loss (1, 1) or per-row (N, 1), total_weight (1, 1)) for logp (N, C), target (N, 1) int32."""
    N, C = logp.shape
    dt = out_dtype or logp.dtype
    per_row = nl.ndarray((N, 1), dt, buffer=nl.shared_hbm)
    loss = nl.ndarray((1, 1), dt, buffer=nl.shared_hbm)
    weight = nl.ndarray((1, 1), dt, buffer=nl.shared_hbm)
    ones = nl.full((P, 1), 1.0, "float32")
    total = nl.zeros((1, 1), "float32", buffer=nl.psum)
    count = nl.zeros((1, 1), "float32", buffer=nl.psum)
    for r0, rs in row_blocks(N):
        tgt = _target(target, r0, rs, ignore_index)
        picked = hit = None
        for c0, cs in row_blocks(C, FCHUNK):
            x = nl.load(logp[r0:r0 + rs, c0:c0 + cs], dtype="float32")
            onehot = nl.equal(nl.iota((rs, cs), "float32", base=c0), tgt)
            p = nl.sum(nl.where(onehot, x, 0.0), axis=1)
            h = nl.sum(onehot, axis=1)
            picked = p if picked is None else nl.add(picked, p)
            hit = h if hit is None else nl.add(hit, h)
        if reduction == "none":
            nl.store(per_row[r0:r0 + rs, :], nl.multiply(picked, -1.0, dtype=dt))
        nl.isa.nc_matmul(total, picked, ones[:rs, :], accumulate=True)
        nl.isa.nc_matmul(count, hit, ones[:rs, :], accumulate=True)
    w = nl.copy(count)
    s = nl.multiply(nl.copy(total), -1.0)
    nl.store(loss, nl.copy(nl.divide(s, w) if reduction == "mean" else s, dtype=dt))
    nl.store(weight, nl.copy(w, dtype=dt))
    return (per_row if reduction == "none" else loss), weight


@nl.jit
def nll_loss_backward(grad, logp, target, total_weight, reduction="mean", ignore_index=-100, out_dtype=None):
    """grad_input (N, C): -grad (/ total_weight for mean) at each row's target class, 0 elsewhere.

    grad is (1, 1) (mean, sum) or (N, 1) (none); total_weight is (1, 1)."""
    N, C = logp.shape
    dt = out_dtype or logp.dtype
    out = nl.ndarray((N, C), dt, buffer=nl.shared_hbm)
    for r0, rs in row_blocks(N):
        tgt = _target(target, r0, rs, ignore_index)
        if reduction == "none":
            g = nl.load(grad[r0:r0 + rs, :], dtype="float32")
        else:
            g = nl.load(grad.reshape(1, 1).broadcast_partitions(rs), dtype="float32")
        if reduction == "mean":
            g = nl.divide(g, nl.load(total_weight.reshape(1, 1).broadcast_partitions(rs), dtype="float32"))
        g = nl.multiply(g, -1.0)
        for c0, cs in row_blocks(C, FCHUNK):
            onehot = nl.equal(nl.iota((rs, cs), "float32", base=c0), tgt)
            nl.store(out[r0:r0 + rs, c0:c0 + cs], nl.multiply(onehot, g, dtype=dt))
    return out
