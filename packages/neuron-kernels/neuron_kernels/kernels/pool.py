# Copyright 2026 The neuron-kernels Authors. Licensed under the Apache License, Version 2.0.
"""Max pooling with indices, forward and backward, on VectorE: image planes (sample, channel) on
partitions, windows as strided views of the padded input in SBUF (conv.Geometry).

Forward keeps, per output, the first maximum in window order (a strict greater-than per tap, as
CPU) and its position in the plane; the int64 indices are written as int32 word pairs (low word
the position, high word 0). Backward adds each output's gradient where the tap's position equals
its index, into an SBUF canvas of the padded plane, tap by tap.
"""

from __future__ import annotations

from .. import language as nl
from ..language import isa as _isa
from ._tiling import FP32_EXACT, P, row_blocks
from .conv import VECTOR_BLOCK, Geometry, _canvas_shape, _canvas_tap



def _positions(g, rs, r0, nr, col0, nc):
    """[rs, nr, nc]: each output's top-left tap position oh * sh * W + ow * sw in the unpadded plane."""
    base = nl.ndarray((rs, nr, nc), "float32")
    for i in range(nr):
        _isa.iota(base[:, i, :], base=(r0 + i) * g.sh * g.W + col0 * g.sw, free_step=g.sw)
    return base


@nl.jit
def max_pool2d(x, kernel_size=(1, 1), stride=(1, 1), padding=(0, 0), dilation=(1, 1)):
    """(out (R, Ho, Wo), indices as int32 words (R, Ho, 2 Wo)) for planes x (R, H, W)."""
    R, H, W = x.shape
    KH, KW = kernel_size
    g = Geometry(H, W, KH, KW, stride, padding, dilation)
    if H * W > FP32_EXACT:
        raise ValueError(f"planes of {H * W} elements: positions are computed in fp32, exact below {FP32_EXACT}")
    out = nl.ndarray((R, g.Ho, g.Wo), x.dtype, buffer=nl.shared_hbm)
    words = nl.ndarray((R, g.Ho, 2 * g.Wo), "int32", buffer=nl.shared_hbm)
    blocks = g.blocks(VECTOR_BLOCK, 4)
    for c0, cs in row_blocks(R):
        for r0, nr, col0, nc in blocks:
            win = g.window(x, c0, cs, r0, nr, col0, nc, "float32", fill=float("-inf"))
            base = _positions(g, cs, r0, nr, col0, nc)
            best = nl.ndarray((cs, nr, nc), "float32")
            idx = nl.ndarray((cs, nr, nc), "float32")
            for t in range(KH * KW):
                kh, kw = divmod(t, KW)
                v = g.tap(win, kh, kw, nr, nc)
                pos = nl.add(base, float((kh * g.dh - g.ph) * W + kw * g.dw - g.pw))
                if t == 0:
                    best[...] = nl.copy(v)
                    idx[...] = pos
                    continue
                better = nl.greater(v, best)
                best[...] = nl.where(better, v, best)
                idx[...] = nl.where(better, pos, idx)
            nl.store(out[c0:c0 + cs, r0:r0 + nr, col0:col0 + nc], nl.copy(best, dtype=out.dtype))
            w = nl.zeros((cs, nr, 2 * nc), "int32")
            w[:, :, 0:2 * nc:2] = nl.copy(idx, dtype="int32")
            nl.store(words[c0:c0 + cs, r0:r0 + nr, 2 * col0:2 * (col0 + nc)], w)
    return out, words


@nl.jit
def max_pool2d_backward(grad, words, input_hw=(1, 1), kernel_size=(1, 1), stride=(1, 1), padding=(0, 0),
                        dilation=(1, 1)):
    """grad_input (R, H, W) from grad (R, Ho, Wo) and the forward's indices as int32 words (R, Ho, 2 Wo)."""
    R, Ho, Wo = grad.shape
    H, W = input_hw
    KH, KW = kernel_size
    g = Geometry(H, W, KH, KW, stride, padding, dilation)
    CH, CW = _canvas_shape(g, "the padded plane")
    gin = nl.ndarray((R, H, W), grad.dtype, buffer=nl.shared_hbm)
    blocks = g.blocks(VECTOR_BLOCK, 4)
    for c0, cs in row_blocks(R):
        canvas = nl.zeros((cs, CH, CW), "float32", bufs=1)
        for r0, nr, col0, nc in blocks:
            gt = nl.load(grad[c0:c0 + cs, r0:r0 + nr, col0:col0 + nc], dtype="float32")
            w = nl.load(words[c0:c0 + cs, r0:r0 + nr, 2 * col0:2 * (col0 + nc)])
            idx = nl.copy(w[:, :, 0:2 * nc:2], dtype="float32")
            base = _positions(g, cs, r0, nr, col0, nc)
            for t in range(KH * KW):
                kh, kw = divmod(t, KW)
                pos = nl.add(base, float((kh * g.dh - g.ph) * W + kw * g.dw - g.pw))
                view = _canvas_tap(canvas, g, kh, kw, r0, nr, col0, nc)
                view[...] = nl.add(view, nl.multiply(nl.equal(idx, pos), gt))
        inner = canvas[:, g.ph:g.ph + H, g.pw:g.pw + W]
        nl.store(gin[c0:c0 + cs, :, :], nl.copy(inner, dtype=gin.dtype))
    return gin


def _in_image(g, cs, r0, nr, col0, nc):
    """A window of ones inside the plane and zeros in the padding (avg_pool2d's count_include_pad=False)."""
    rows, cols = g.in_rows(nr), g.in_cols(nc)
    top, left = r0 * g.sh - g.ph, col0 * g.sw - g.pw
    t = nl.zeros((cs, rows, cols), "float32")
    a0, a1 = max(top, 0), min(top + rows, g.H)
    b0, b1 = max(left, 0), min(left + cols, g.W)
    if a1 > a0 and b1 > b0:
        _isa.memset(t[:, a0 - top:a1 - top, b0 - left:b1 - left], 1.0)
    return t


def _window_sum(g, win, nr, nc, cs):
    acc = nl.ndarray((cs, nr, nc), "float32")
    for t in range(g.KH * g.KW):
        v = g.tap(win, t // g.KW, t % g.KW, nr, nc)
        acc[...] = nl.copy(v) if t == 0 else nl.add(acc, v)
    return acc


@nl.jit
def avg_pool2d(x, kernel_size=(1, 1), stride=(1, 1), padding=(0, 0), count_include_pad=True, divisor=0):
    """out (R, Ho, Wo): window sums of planes x (R, H, W) over ``divisor`` (when nonzero), the kernel
    size (count_include_pad) or the window's elements inside the plane."""
    R, H, W = x.shape
    KH, KW = kernel_size
    g = Geometry(H, W, KH, KW, stride, padding, (1, 1))
    out = nl.ndarray((R, g.Ho, g.Wo), x.dtype, buffer=nl.shared_hbm)
    for c0, cs in row_blocks(R):
        for r0, nr, col0, nc in g.blocks(VECTOR_BLOCK, 4):
            acc = _window_sum(g, g.window(x, c0, cs, r0, nr, col0, nc, "float32"), nr, nc, cs)
            if divisor or count_include_pad:
                res = nl.multiply(acc, 1.0 / (divisor or KH * KW))
            else:
                res = nl.divide(acc, _window_sum(g, _in_image(g, cs, r0, nr, col0, nc), nr, nc, cs))
            nl.store(out[c0:c0 + cs, r0:r0 + nr, col0:col0 + nc], nl.copy(res, dtype=out.dtype))
    return out


@nl.jit
def avg_pool2d_backward(grad, input_hw=(1, 1), kernel_size=(1, 1), stride=(1, 1), padding=(0, 0),
                        count_include_pad=True, divisor=0):
    """grad_input (R, H, W): each output's gradient over its divisor, added at every tap of its window."""
    R, Ho, Wo = grad.shape
    H, W = input_hw
    KH, KW = kernel_size
    g = Geometry(H, W, KH, KW, stride, padding, (1, 1))
    CH, CW = _canvas_shape(g, "the padded plane")
    gin = nl.ndarray((R, H, W), grad.dtype, buffer=nl.shared_hbm)
    for c0, cs in row_blocks(R):
        canvas = nl.zeros((cs, CH, CW), "float32", bufs=1)
        for r0, nr, col0, nc in g.blocks(VECTOR_BLOCK, 4):
            gt = nl.load(grad[c0:c0 + cs, r0:r0 + nr, col0:col0 + nc], dtype="float32")
            if divisor or count_include_pad:
                share = nl.multiply(gt, 1.0 / (divisor or KH * KW))
            else:
                share = nl.divide(gt, _window_sum(g, _in_image(g, cs, r0, nr, col0, nc), nr, nc, cs))
            for t in range(KH * KW):
                view = _canvas_tap(canvas, g, t // KW, t % KW, r0, nr, col0, nc)
                view[...] = nl.add(view, share)
        nl.store(gin[c0:c0 + cs, :, :], nl.copy(canvas[:, g.ph:g.ph + H, g.pw:g.pw + W], dtype=gin.dtype))
    return gin


def _row_blocks_of(H, per_row):
    return row_blocks(H, max(1, VECTOR_BLOCK // max(per_row, 1)))


@nl.jit
def upsample_nearest(x, factor=(1, 1)):
    """out (R, H fh, W fw): each element of planes x (R, H, W) repeated over an fh x fw block, one
    strided VectorE copy per position in the block."""
    R, H, W = x.shape
    fh, fw = factor
    out = nl.ndarray((R, H * fh, W * fw), x.dtype, buffer=nl.shared_hbm)
    for c0, cs in row_blocks(R):
        for h0, hs in _row_blocks_of(H, W * fh * fw):
            t = nl.load(x[c0:c0 + cs, h0:h0 + hs, :])
            o = nl.ndarray((cs, hs * fh, W * fw), x.dtype)
            for a in range(fh):
                for b in range(fw):
                    o[:, a:hs * fh:fh, b:W * fw:fw] = nl.copy(t)
            nl.store(out[c0:c0 + cs, h0 * fh:(h0 + hs) * fh, :], o)
    return out


@nl.jit
def upsample_nearest_backward(grad, factor=(1, 1)):
    """grad_input (R, H, W): each fh x fw block of grad (R, H fh, W fw) summed, a strided add per position."""
    R, Hf, Wf = grad.shape
    fh, fw = factor
    H, W = Hf // fh, Wf // fw
    gin = nl.ndarray((R, H, W), grad.dtype, buffer=nl.shared_hbm)
    for c0, cs in row_blocks(R):
        for h0, hs in _row_blocks_of(H, W * fh * fw):
            t = nl.load(grad[c0:c0 + cs, h0 * fh:(h0 + hs) * fh, :], dtype="float32")
            acc = nl.ndarray((cs, hs, W), "float32")
            for a in range(fh):
                for b in range(fw):
                    v = t[:, a:hs * fh:fh, b:Wf:fw]
                    acc[...] = nl.copy(v) if a == b == 0 else nl.add(acc, v)
            nl.store(gin[c0:c0 + cs, h0:h0 + hs, :], nl.copy(acc, dtype=gin.dtype))
    return gin


@nl.jit
def resample(x, left_t, right):
    """out[p] = left_t.T @ x[p] @ right for planes x (R, H, W), left_t (H, Ho), right (W, Wo): a separable
    linear resampling (bilinear interpolation and its backward, whose matrices are the interpolation
    weights). Columns first for all planes at once (x's rows DMA-transposed, the contraction over W),
    through an HBM scratch, then rows plane by plane (the contraction over H)."""
    R, H, W = x.shape
    Ho, Wo = left_t.shape[1], right.shape[1]
    cdt = "float32"
    out = nl.ndarray((R, Ho, Wo), x.dtype, buffer=nl.shared_hbm)
    mid = nl.ndarray((R * H, Wo), "float32", buffer=nl.shared_hbm)
    rows = x.reshape(R * H, W)
    wblocks = row_blocks(W)
    rt = nl.ndarray((P, len(wblocks), Wo), cdt, bufs=1)
    for j, (w0, ws) in enumerate(wblocks):
        rt[:ws, j, :] = nl.load(right[w0:w0 + ws, :], dtype=cdt)
    for r0, rs in row_blocks(R * H):
        for n0, ns in row_blocks(Wo, 512):
            acc = nl.ndarray((rs, ns), "float32", buffer=nl.psum)
            for j, (w0, ws) in enumerate(wblocks):
                xt = nl.load_transpose2d(rows[r0:r0 + rs, w0:w0 + ws], dtype=cdt)
                nl.isa.nc_matmul(acc, xt, rt[:ws, j, n0:n0 + ns], accumulate=j > 0)
            nl.store(mid[r0:r0 + rs, n0:n0 + ns], nl.copy(acc))
    hblocks = row_blocks(H)
    lt = nl.ndarray((P, len(hblocks), Ho), cdt, bufs=1)
    for j, (h0, hs) in enumerate(hblocks):
        lt[:hs, j, :] = nl.load(left_t[h0:h0 + hs, :], dtype=cdt)
    for p in range(R):
        for m0, ms in row_blocks(Ho):
            for n0, ns in row_blocks(Wo, 512):
                acc = nl.ndarray((ms, ns), "float32", buffer=nl.psum)
                for j, (h0, hs) in enumerate(hblocks):
                    y = nl.load(mid[p * H + h0:p * H + h0 + hs, n0:n0 + ns])
                    nl.isa.nc_matmul(acc, lt[:hs, j, m0:m0 + ms], y, accumulate=j > 0)
                nl.store(out[p, m0:m0 + ms, n0:n0 + ns], nl.copy(acc, dtype=out.dtype))
    return out
