# Copyright 2026 The neuron-kernels Authors. Licensed under the Apache License, Version 2.0.
"""Optimizer steps over flat parameter views."""

from __future__ import annotations

from .. import language as nl
from ._tiling import FCHUNK, row_blocks


@nl.jit
def adamw(param, grad, exp_avg, exp_avg_sq, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=1e-2,
          step=1):
    """One AdamW step (torch.optim.AdamW semantics) on 2-D views; returns (param, exp_avg, exp_avg_sq)."""
    R, C = param.shape
    p_o = nl.ndarray((R, C), param.dtype, buffer=nl.shared_hbm)
    m_o = nl.ndarray((R, C), exp_avg.dtype, buffer=nl.shared_hbm)
    v_o = nl.ndarray((R, C), exp_avg_sq.dtype, buffer=nl.shared_hbm)
    bc1 = 1.0 - beta1 ** step
    bc2 = 1.0 - beta2 ** step
    for r0, rs in row_blocks(R):
        for c0, cs in row_blocks(C, FCHUNK):
            sl = (slice(r0, r0 + rs), slice(c0, c0 + cs))
            p = nl.load(param[sl], dtype="float32")
            g = nl.load(grad[sl], dtype="float32")
            m = nl.add(nl.multiply(nl.load(exp_avg[sl], dtype="float32"), beta1), nl.multiply(g, 1.0 - beta1))
            v = nl.add(nl.multiply(nl.load(exp_avg_sq[sl], dtype="float32"), beta2),
                       nl.multiply(nl.square(g), 1.0 - beta2))
            # denom = sqrt(v / bc2) + eps on ScalarE (scale folds the bias correction)
            denom = nl.add(nl.activation("sqrt", v, scale=1.0 / bc2), eps)
            upd = nl.divide(m, denom)
            p = nl.subtract(nl.multiply(p, 1.0 - lr * weight_decay), nl.multiply(upd, lr / bc1))
            nl.store(p_o[sl], nl.copy(p, dtype=p_o.dtype))
            nl.store(m_o[sl], nl.copy(m, dtype=m_o.dtype))
            nl.store(v_o[sl], nl.copy(v, dtype=v_o.dtype))
    return p_o, m_o, v_o
