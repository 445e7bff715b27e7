# Copyright 2026 The neuron-kernels Authors. Licensed under the Apache License, Version 2.0.
"""Batch norm and group norm, forward and backward: statistics per row of a 2-D view.

Batch norm's rows are channels (the input viewed channel-major, (C, N x spatial), a strided
access pattern for the DMA); group norm's rows are (sample, group) pairs of the contiguous
input, each row holding its group's channels one after another. Rows sit on partitions and a
row's elements stream through SBUF in chunks: one pass for the mean, one for the centered sum
of squares (CPU's two-pass variance), one to write the normalised, affine result as a single
VectorE instruction with two per-partition operands (x * scale + shift).
"""

from __future__ import annotations

from .. import language as nl
from ..language import isa as _isa
from ._tiling import FCHUNK, P, row_blocks


def _chunks(x, r0, rs, M):
    """A pass over the row block: (column start, tile) per chunk, each loaded as the pass reaches it
    (its buffer rotates); a row of one chunk is loaded once and kept for every pass."""
    blocks = row_blocks(M, FCHUNK)
    if len(blocks) == 1:
        t = nl.load(x[r0:r0 + rs, :], dtype="float32")
        return lambda: iter([(0, t)])

    def stream():
        for c0, cs in blocks:
            yield c0, nl.load(x[r0:r0 + rs, c0:c0 + cs], dtype="float32")
    return stream


def _row_stats(chunks, rs, M):
    """(mean, biased variance) of each row, (rs, 1) fp32."""
    s = nl.zeros((rs, 1), "float32")
    for _, t in chunks():
        s[...] = nl.add(s, nl.sum(t, axis=1))
    mean = nl.multiply(s, 1.0 / M)
    q = nl.zeros((rs, 1), "float32")
    for _, t in chunks():
        part = nl.ndarray((rs, 1), "float32")
        nl.activation("square", nl.subtract(t, mean), reduce_op="add", reduce_res=part)
        q[...] = nl.add(q, part)
    return mean, nl.multiply(q, 1.0 / M)


def _affine_store(out, r0, rs, chunks, scale, shift):
    for c0, t in chunks():
        r = nl.ndarray(t.shape, "float32")
        _isa.tensor_scalar(r, t, "multiply", scale, op1="add", operand1=shift)
        nl.store(out[r0:r0 + rs, c0:c0 + t.shape[1]], nl.copy(r, dtype=out.dtype))


@nl.jit
def batch_norm(x, weight=None, bias=None, running_mean=None, running_var=None, training=True, momentum=0.1,
               eps=1e-5):
    """Rows of x (C, M) are channels. Returns (y, save_mean, save_invstd, running_mean', running_var'),
    the statistics (C, 1) fp32; the running ones are updated only when training with them given
    (momentum, unbiased variance, as torch), else returned as given."""
    C, M = x.shape
    y = nl.ndarray((C, M), x.dtype, buffer=nl.shared_hbm)
    save_mean = nl.ndarray((C, 1), "float32", buffer=nl.shared_hbm)
    save_invstd = nl.ndarray((C, 1), "float32", buffer=nl.shared_hbm)
    new_rm = nl.ndarray((C, 1), "float32", buffer=nl.shared_hbm)
    new_rv = nl.ndarray((C, 1), "float32", buffer=nl.shared_hbm)
    for r0, rs in row_blocks(C):
        chunks = _chunks(x, r0, rs, M)
        if training:
            mean, var = _row_stats(chunks, rs, M)
        else:
            mean = nl.load(running_mean[r0:r0 + rs, :], dtype="float32")
            var = nl.load(running_var[r0:r0 + rs, :], dtype="float32")
        invstd = nl.activation("rsqrt", var, bias=eps)
        scale = invstd
        if weight is not None:
            scale = nl.multiply(invstd, nl.load(weight[r0:r0 + rs, :], dtype="float32"))
        shift = nl.multiply(nl.multiply(mean, scale), -1.0)
        if bias is not None:
            shift = nl.add(shift, nl.load(bias[r0:r0 + rs, :], dtype="float32"))
        _affine_store(y, r0, rs, chunks, scale, shift)
        nl.store(save_mean[r0:r0 + rs, :], mean)
        nl.store(save_invstd[r0:r0 + rs, :], invstd)
        if running_mean is not None:
            rm = nl.load(running_mean[r0:r0 + rs, :], dtype="float32")
            rv = nl.load(running_var[r0:r0 + rs, :], dtype="float32")
            if training:
                rm = nl.add(nl.multiply(rm, 1.0 - momentum), nl.multiply(mean, momentum))
                unbiased = M / (M - 1) if M > 1 else 1.0
                rv = nl.add(nl.multiply(rv, 1.0 - momentum), nl.multiply(var, momentum * unbiased))
            nl.store(new_rm[r0:r0 + rs, :], rm)
            nl.store(new_rv[r0:r0 + rs, :], rv)
    return y, save_mean, save_invstd, new_rm, new_rv


@nl.jit
def batch_norm_backward(grad, x, mean, invstd, weight=None):
    """Training-mode gradients for rows (channels) of x (C, M): (grad_x, grad_weight (C, 1),
    grad_bias (C, 1)), from the forward's save_mean and save_invstd."""
    C, M = x.shape
    gx = nl.ndarray((C, M), x.dtype, buffer=nl.shared_hbm)
    gw = nl.ndarray((C, 1), "float32", buffer=nl.shared_hbm)
    gb = nl.ndarray((C, 1), "float32", buffer=nl.shared_hbm)
    for r0, rs in row_blocks(C):
        xs, gs = _chunks(x, r0, rs, M), _chunks(grad, r0, rs, M)
        mu = nl.load(mean[r0:r0 + rs, :], dtype="float32")
        inv = nl.load(invstd[r0:r0 + rs, :], dtype="float32")
        sg = nl.zeros((rs, 1), "float32")
        sgx = nl.zeros((rs, 1), "float32")
        for (_, t), (_, g) in zip(xs(), gs()):
            sg[...] = nl.add(sg, nl.sum(g, axis=1))
            sgx[...] = nl.add(sgx, nl.sum(nl.multiply(g, nl.subtract(t, mu)), axis=1))
        nl.store(gb[r0:r0 + rs, :], sg)
        nl.store(gw[r0:r0 + rs, :], nl.multiply(sgx, inv))
        a = inv if weight is None else nl.multiply(inv, nl.load(weight[r0:r0 + rs, :], dtype="float32"))
        # grad_x = a (g - sg / M - (x - mu) inv^2 sgx / M) = a g + b x + c
        k = nl.multiply(nl.multiply(nl.multiply(inv, inv), sgx), 1.0 / M)
        b = nl.multiply(nl.multiply(a, k), -1.0)
        c = nl.subtract(nl.multiply(nl.multiply(a, k), mu), nl.multiply(nl.multiply(a, sg), 1.0 / M))
        for (c0, t), (_, g) in zip(xs(), gs()):
            lin = nl.ndarray(t.shape, "float32")
            _isa.tensor_scalar(lin, t, "multiply", b, op1="add", operand1=c)
            r = nl.add(lin, nl.multiply(g, a), dtype=gx.dtype)
            nl.store(gx[r0:r0 + rs, c0:c0 + t.shape[1]], r)
    return gx, gw, gb


@nl.jit
def group_norm(x, weight=None, bias=None, channels=1, eps=1e-5):
    """Rows of x (R, channels x L) are (sample, group) pairs; weight and bias (R, channels) hold each
    row's channels' parameters. Returns (y, mean (R, 1), rstd (R, 1))."""
    R, M = x.shape
    L = M // channels
    y = nl.ndarray((R, M), x.dtype, buffer=nl.shared_hbm)
    mean_o = nl.ndarray((R, 1), "float32", buffer=nl.shared_hbm)
    rstd_o = nl.ndarray((R, 1), "float32", buffer=nl.shared_hbm)
    for r0, rs in row_blocks(R):
        chunks = _chunks(x, r0, rs, M)
        mean, var = _row_stats(chunks, rs, M)
        rstd = nl.activation("rsqrt", var, bias=eps)
        w = nl.load(weight[r0:r0 + rs, :], dtype="float32") if weight is not None else None
        b = nl.load(bias[r0:r0 + rs, :], dtype="float32") if bias is not None else None
        neg_mean_rstd = nl.multiply(nl.multiply(mean, rstd), -1.0)
        for ch in range(channels):
            scale = rstd if w is None else nl.multiply(rstd, w[:, ch:ch + 1])
            shift = neg_mean_rstd if w is None else nl.multiply(neg_mean_rstd, w[:, ch:ch + 1])
            if b is not None:
                shift = nl.add(shift, b[:, ch:ch + 1])
            for l0, ls in row_blocks(L, FCHUNK):
                t = nl.load(x[r0:r0 + rs, ch * L + l0:ch * L + l0 + ls], dtype="float32")
                r = nl.ndarray((rs, ls), "float32")
                _isa.tensor_scalar(r, t, "multiply", scale, op1="add", operand1=shift)
                nl.store(y[r0:r0 + rs, ch * L + l0:ch * L + l0 + ls], nl.copy(r, dtype=y.dtype))
        nl.store(mean_o[r0:r0 + rs, :], mean)
        nl.store(rstd_o[r0:r0 + rs, :], rstd)
    return y, mean_o, rstd_o


@nl.jit
def group_norm_backward(grad, x, mean, rstd, weight=None, channels=1, samples=1):
    """Gradients of group_norm for rows (sample, group) of x (R, channels x L): (grad_x,
    grad_weight (1, G x channels), grad_bias (1, G x channels)). The parameter gradients sum each
    row's per-channel partials over the samples: the partials go through an HBM scratch
    (samples, G x channels) that is summed over partitions against a ones column on TensorE."""
    R, M = x.shape
    L = M // channels
    G = R // samples
    gx = nl.ndarray((R, M), x.dtype, buffer=nl.shared_hbm)
    gw = nl.ndarray((1, G * channels), "float32", buffer=nl.shared_hbm)
    gb = nl.ndarray((1, G * channels), "float32", buffer=nl.shared_hbm)
    part_w = nl.ndarray((R, channels), "float32", buffer=nl.shared_hbm)
    part_b = nl.ndarray((R, channels), "float32", buffer=nl.shared_hbm)
    for r0, rs in row_blocks(R):
        mu = nl.load(mean[r0:r0 + rs, :], dtype="float32")
        rs_ = nl.load(rstd[r0:r0 + rs, :], dtype="float32")
        w = nl.load(weight[r0:r0 + rs, :], dtype="float32") if weight is not None else None
        pw = nl.ndarray((rs, channels), "float32")
        pb = nl.ndarray((rs, channels), "float32")
        sgw = nl.zeros((rs, 1), "float32")        # sum of g w
        sgwx = nl.zeros((rs, 1), "float32")       # sum of g w (x - mean)
        for ch in range(channels):
            sg = nl.zeros((rs, 1), "float32")
            sgx = nl.zeros((rs, 1), "float32")
            for l0, ls in row_blocks(L, FCHUNK):
                cols = slice(ch * L + l0, ch * L + l0 + ls)
                t = nl.load(x[r0:r0 + rs, cols], dtype="float32")
                g = nl.load(grad[r0:r0 + rs, cols], dtype="float32")
                sg[...] = nl.add(sg, nl.sum(g, axis=1))
                sgx[...] = nl.add(sgx, nl.sum(nl.multiply(g, nl.subtract(t, mu)), axis=1))
            pb[:, ch:ch + 1] = nl.copy(sg)
            pw[:, ch:ch + 1] = nl.multiply(sgx, rs_)
            wc = 1.0 if w is None else w[:, ch:ch + 1]
            sgw[...] = nl.add(sgw, nl.multiply(sg, wc))
            sgwx[...] = nl.add(sgwx, nl.multiply(sgx, wc))
        nl.store(part_w[r0:r0 + rs, :], pw)
        nl.store(part_b[r0:r0 + rs, :], pb)
        # grad_x = rstd w_c g + b x + c with b = -rstd^3 sgwx / M, c = -b mean - rstd sgw / M
        k = nl.multiply(nl.multiply(nl.multiply(rs_, rs_), nl.multiply(rs_, sgwx)), -1.0 / M)
        c = nl.subtract(nl.multiply(nl.multiply(k, mu), -1.0), nl.multiply(nl.multiply(rs_, sgw), 1.0 / M))
        for ch in range(channels):
            a = rs_ if w is None else nl.multiply(rs_, w[:, ch:ch + 1])
            for l0, ls in row_blocks(L, FCHUNK):
                cols = slice(ch * L + l0, ch * L + l0 + ls)
                t = nl.load(x[r0:r0 + rs, cols], dtype="float32")
                g = nl.load(grad[r0:r0 + rs, cols], dtype="float32")
                lin = nl.ndarray((rs, ls), "float32")
                _isa.tensor_scalar(lin, t, "multiply", k, op1="add", operand1=c)
                nl.store(gx[r0:r0 + rs, cols], nl.add(lin, nl.multiply(g, a), dtype=gx.dtype))
    # the samples' partials summed over partitions: (samples, G x channels) rows against ones
    ones = nl.full((P, 1), 1.0, "float32")
    for dst, part in ((gw, part_w), (gb, part_b)):
        flat = part.reshape(samples, G * channels)
        for c0, cs in row_blocks(G * channels, 512):
            acc = nl.zeros((1, cs), "float32", buffer=nl.psum)
            for n0, ns in row_blocks(samples):
                _isa.nc_matmul(acc, ones[:ns, :], nl.load(flat[n0:n0 + ns, c0:c0 + cs]), accumulate=True)
            nl.store(dst[:, c0:c0 + cs], nl.copy(acc))
    return gx, gw, gb


def _row_sum(chunks_a, chunks_b, rs, square=False):
    """Per row, the sum of a * b (or a * a) over the row's chunks, (rs, 1) fp32."""
    s = nl.zeros((rs, 1), "float32")
    for (_, a), (_, b) in zip(chunks_a(), chunks_b()):
        s[...] = nl.add(s, nl.sum(nl.multiply(a, b), axis=1))
    return s


@nl.jit
def weight_norm(v, g):
    """(w, norms) of torch's weight norm for rows of v (R, K) and magnitudes g (R, 1): w = v g / ||v_row||."""
    R, K = v.shape
    w = nl.ndarray((R, K), v.dtype, buffer=nl.shared_hbm)
    norms = nl.ndarray((R, 1), "float32", buffer=nl.shared_hbm)
    for r0, rs in row_blocks(R):
        vs = _chunks(v, r0, rs, K)
        norm = nl.sqrt(_row_sum(vs, vs, rs))
        scale = nl.divide(nl.load(g[r0:r0 + rs, :], dtype="float32"), norm)
        for c0, t in vs():
            nl.store(w[r0:r0 + rs, c0:c0 + t.shape[1]], nl.multiply(t, scale, dtype=w.dtype))
        nl.store(norms[r0:r0 + rs, :], norm)
    return w, norms


@nl.jit
def weight_norm_backward(grad_w, v, g, norms):
    """(grad_v, grad_g) of weight_norm: grad_g = sum(grad_w v) / n and
    grad_v = g / n (grad_w - v sum(grad_w v) / n^2), per row."""
    R, K = v.shape
    gv = nl.ndarray((R, K), v.dtype, buffer=nl.shared_hbm)
    gg = nl.ndarray((R, 1), "float32", buffer=nl.shared_hbm)
    for r0, rs in row_blocks(R):
        vs, gs = _chunks(v, r0, rs, K), _chunks(grad_w, r0, rs, K)
        n = nl.load(norms[r0:r0 + rs, :], dtype="float32")
        dot = _row_sum(gs, vs, rs)
        nl.store(gg[r0:r0 + rs, :], nl.divide(dot, n))
        a = nl.divide(nl.load(g[r0:r0 + rs, :], dtype="float32"), n)         # g / n
        b = nl.multiply(nl.divide(nl.divide(dot, n), n), nl.multiply(a, -1.0))   # -(g / n) dot / n^2
        for (c0, t), (_, gw) in zip(vs(), gs()):
            lin = nl.ndarray(t.shape, "float32")
            _isa.tensor_scalar(lin, t, "multiply", b)
            nl.store(gv[r0:r0 + rs, c0:c0 + t.shape[1]], nl.add(lin, nl.multiply(gw, a), dtype=gv.dtype))
    return gv, gg
