# Copyright 2026 The neuron-kernels Authors. Licensed under the Apache License, Version 2.0.
"""2-D convolution, forward and backward (a 1-D convolution is a 2-D one with one row).

Forward is a direct convolution on TensorE: input channels on partitions (the contraction),
one matmul per kernel tap, and every tap and channel block of an output block accumulating in
one PSUM bank. A tap's moving operand is a strided view of the zero-padded input window in
SBUF, so no im2col copy is made. Depthwise convolutions (one input and one output channel per
group) run on VectorE instead, channels on partitions: a multiply by the tap's per-channel
weight and an add per tap.

grad_input contracts over output channels: each tap's product of the weight with an output
gradient block is added into a zero-initialised SBUF canvas of the padded input at the tap's
strided positions. grad_weight contracts over output positions: blocks of at most 128
positions of the output gradient are transposed by DMA, the matching input windows on TensorE,
and one matmul per block covers as many taps as fit a PSUM bank; the bias gradient is the same
contraction against a ones column.
"""

from __future__ import annotations

from .. import language as nl
from ..language import isa as _isa
from ._tiling import P, cdiv, row_blocks

NT = 512                    # one PSUM bank of fp32 per matmul
WINDOW_BUDGET = 32 * 1024   # bytes per partition for one input window
CANVAS_BUDGET = 96 * 1024   # bytes per partition for grad_input's padded image
WEIGHT_BUDGET = 96 * 1024   # bytes per partition for the resident weights of one output block
VECTOR_BLOCK = 2048         # output elements per partition per block on VectorE (depthwise)


def out_size(n, k, s, p, d):
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def _itemsize(dtype):
    return 4 if dtype == "float32" else 2


class Geometry:
    """Sizes, strides, padding and dilation of one convolution, with its block and window helpers."""

    def __init__(self, H, W, KH, KW, stride, padding, dilation):
        self.H, self.W, self.KH, self.KW = H, W, KH, KW
        (self.sh, self.sw), (self.ph, self.pw), (self.dh, self.dw) = stride, padding, dilation
        self.Ho = out_size(H, KH, self.sh, self.ph, self.dh)
        self.Wo = out_size(W, KW, self.sw, self.pw, self.dw)
        if self.Ho < 1 or self.Wo < 1:
            raise ValueError(f"convolution of a {H}x{W} input with a {KH}x{KW} kernel has no output")

    def in_rows(self, nr):
        return (nr - 1) * self.sh + (self.KH - 1) * self.dh + 1

    def in_cols(self, nc):
        return (nc - 1) * self.sw + (self.KW - 1) * self.dw + 1

    def blocks(self, cap, itemsize):
        """Output blocks (row0, rows, col0, cols) of at most ``cap`` positions whose input window
        fits WINDOW_BUDGET; whole rows when a row fits, else row segments."""
        nc = min(self.Wo, cap)
        nr = max(1, min(self.Ho, cap // nc))
        while self.in_rows(nr) * self.in_cols(nc) * itemsize > WINDOW_BUDGET and (nr > 1 or nc > 1):
            if nr > 1:
                nr = cdiv(nr, 2)
            else:
                nc = cdiv(nc, 2)
        return [(r0, min(nr, self.Ho - r0), c0, min(nc, self.Wo - c0))
                for r0 in range(0, self.Ho, nr) for c0 in range(0, self.Wo, nc)]

    def tap(self, win, kh, kw, nr, nc):
        """The [channels, nr, nc] view of an input window that tap (kh, kw) multiplies."""
        r, c = kh * self.dh, kw * self.dw
        return win[:, r:r + (nr - 1) * self.sh + 1:self.sh, c:c + (nc - 1) * self.sw + 1:self.sw]

    def window(self, img, c0, cs, r0, nr, col0, nc, dtype, fill=0.0):
        """SBUF [cs, rows, cols]: the input rows and columns output block (r0, nr, col0, nc) reads, in
        padded coordinates: ``fill`` outside the image, one DMA for the part inside."""
        rows, cols = self.in_rows(nr), self.in_cols(nc)
        top, left = r0 * self.sh - self.ph, col0 * self.sw - self.pw
        t = nl.ndarray((cs, rows, cols), dtype)
        a0, a1 = max(top, 0), min(top + rows, self.H)
        b0, b1 = max(left, 0), min(left + cols, self.W)
        inside = a1 > a0 and b1 > b0
        if not inside or (a0, a1, b0, b1) != (top, top + rows, left, left + cols):
            _isa.memset(t, fill)
        if inside:
            t[:, a0 - top:a1 - top, b0 - left:b1 - left] = nl.load(img[c0:c0 + cs, a0:a1, b0:b1], dtype=dtype)
        return t


def _operand_dtype(dtype):
    # TensorE takes fp32 x fp32 or 16-bit floats on both sides
    return "float32" if dtype == "float32" else dtype


@nl.jit
def conv2d(x, w, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    """out[B, O, Ho, Wo] = conv(x[B, C, H, W], w[O, C / groups, KH, KW]) (+ bias[O])."""
    B, C, H, W = x.shape
    O, Cg, KH, KW = w.shape
    g = Geometry(H, W, KH, KW, stride, padding, dilation)
    out = nl.ndarray((B, O, g.Ho, g.Wo), x.dtype, buffer=nl.shared_hbm)
    bias2 = bias.reshape(O, 1) if bias is not None else None
    if groups == C == O and Cg == 1:
        _depthwise_forward(x, w, bias2, out, g)
        return out
    Og, T = O // groups, KH * KW
    cdt = _operand_dtype(x.dtype)
    w2 = w.reshape(O, Cg * T)
    cblocks = row_blocks(Cg)
    blocks = g.blocks(NT, _itemsize(cdt))
    for grp in range(groups):
        for o0, os_ in row_blocks(Og):
            og = grp * Og + o0
            if (Cg * T + len(cblocks) * T * os_) * _itemsize(cdt) > WEIGHT_BUDGET:
                raise ValueError(f"weights of {os_} output channels x {Cg} input channels x {T} taps exceed "
                                 f"{WEIGHT_BUDGET} bytes per partition")
            # stationary weights [input channel, block, tap, output channel], resident for the output block:
            # the block's rows in one DMA, each tap's [output, input] columns transposed on TensorE
            rows = nl.load(w2[og:og + os_, :], dtype=cdt)
            wt = nl.ndarray((P, len(cblocks), T, os_), cdt, bufs=1)
            for j, (c0, cs) in enumerate(cblocks):
                for t in range(T):
                    cols = rows[:, c0 * T + t:(c0 + cs - 1) * T + t + 1:T]
                    wt[:cs, j, t, :] = nl.copy(nl.transpose(cols), dtype=cdt)
            bt = nl.load(bias2[og:og + os_, :], dtype="float32") if bias is not None else None
            for b in range(B):
                for r0, nr, col0, nc in blocks:
                    acc = nl.ndarray((os_, nr, nc), "float32", buffer=nl.psum)
                    n = 0
                    for j, (c0, cs) in enumerate(cblocks):
                        win = g.window(x[b], grp * Cg + c0, cs, r0, nr, col0, nc, cdt)
                        for kh in range(KH):
                            for kw in range(KW):
                                _isa.nc_matmul(acc, wt[:cs, j, kh * KW + kw, :], g.tap(win, kh, kw, nr, nc),
                                               accumulate=n > 0)
                                n += 1
                    res = nl.add(acc, bt, dtype=out.dtype) if bt is not None else nl.copy(acc, dtype=out.dtype)
                    nl.store(out[b, og:og + os_, r0:r0 + nr, col0:col0 + nc], res)
    return out


def _depthwise_forward(x, w, bias2, out, g):
    B, C = x.shape[0], x.shape[1]
    T = g.KH * g.KW
    w2 = w.reshape(C, T)
    blocks = g.blocks(VECTOR_BLOCK, 4)
    for c0, cs in row_blocks(C):
        wt = nl.load(w2[c0:c0 + cs, :], dtype="float32")
        bt = nl.load(bias2[c0:c0 + cs, :], dtype="float32") if bias2 is not None else None
        for b in range(B):
            for r0, nr, col0, nc in blocks:
                win = g.window(x[b], c0, cs, r0, nr, col0, nc, "float32")
                acc = nl.ndarray((cs, nr, nc), "float32")
                for t in range(T):
                    prod = nl.multiply(g.tap(win, t // g.KW, t % g.KW, nr, nc), wt[:, t:t + 1])
                    acc[...] = prod if t == 0 else nl.add(acc, prod)
                res = nl.add(acc, bt, dtype=out.dtype) if bt is not None else nl.copy(acc, dtype=out.dtype)
                nl.store(out[b, c0:c0 + cs, r0:r0 + nr, col0:col0 + nc], res)


def _canvas_shape(g, what="the padded input"):
    """(rows, cols) of an fp32 canvas holding every padded position a tap touches and the whole
    image inside the padding; ValueError when it exceeds CANVAS_BUDGET bytes per partition."""
    CH, CW = max(g.in_rows(g.Ho), g.ph + g.H), max(g.in_cols(g.Wo), g.pw + g.W)
    if CH * CW * 4 > CANVAS_BUDGET:
        raise ValueError(f"{what} ({CH}x{CW}) exceeds {CANVAS_BUDGET} bytes per partition")
    return CH, CW


def _canvas_tap(canvas, g, kh, kw, r0, nr, col0, nc):
    r, c = kh * g.dh + r0 * g.sh, kw * g.dw + col0 * g.sw
    return canvas[:, r:r + (nr - 1) * g.sh + 1:g.sh, c:c + (nc - 1) * g.sw + 1:g.sw]


@nl.jit
def conv2d_grad_input(grad, w, bias=None, input_hw=(1, 1), stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    """grad_input[B, C, H, W] of conv2d from grad[B, O, Ho, Wo] and w[O, C / groups, KH, KW]; with ``bias`` (C,)
    added, the transposed convolution of grad."""
    B, O, Ho, Wo = grad.shape
    _, Cg, KH, KW = w.shape
    H, W = input_hw
    C = Cg * groups
    g = Geometry(H, W, KH, KW, stride, padding, dilation)
    if (g.Ho, g.Wo) != (Ho, Wo):
        raise ValueError(f"grad_output is {Ho}x{Wo}; the convolution of a {H}x{W} input gives {g.Ho}x{g.Wo}")
    gin = nl.ndarray((B, C, H, W), grad.dtype, buffer=nl.shared_hbm)
    CH, CW = _canvas_shape(g)
    T = KH * KW
    depthwise = groups == C == O and Cg == 1
    if depthwise:
        blocks = g.blocks(VECTOR_BLOCK, 4)
        w2 = w.reshape(C, T)
        for c0, cs in row_blocks(C):
            wt = nl.load(w2[c0:c0 + cs, :], dtype="float32")
            for b in range(B):
                canvas = nl.zeros((cs, CH, CW), "float32", bufs=1)
                for r0, nr, col0, nc in blocks:
                    gt = nl.load(grad[b, c0:c0 + cs, r0:r0 + nr, col0:col0 + nc], dtype="float32")
                    for t in range(T):
                        view = _canvas_tap(canvas, g, t // KW, t % KW, r0, nr, col0, nc)
                        view[...] = nl.add(view, nl.multiply(gt, wt[:, t:t + 1]))
                _store_canvas(gin, b, c0, cs, canvas, g, bias)
        return gin
    Og = O // groups
    cdt = _operand_dtype(grad.dtype)
    w3 = w.reshape(O, Cg, T)
    blocks = g.blocks(NT, _itemsize(cdt))
    oblocks = row_blocks(Og)
    for grp in range(groups):
        for c0, cs in row_blocks(Cg):
            if len(oblocks) * cs * T * _itemsize(cdt) > WEIGHT_BUDGET:
                raise ValueError(f"weights of {Og} output channels x {cs} input channels x {T} taps exceed "
                                 f"{WEIGHT_BUDGET} bytes per partition")
            # stationary weights [output channel, block, input channel, tap]: the contraction is over O
            wt = nl.ndarray((P, len(oblocks), cs, T), cdt, bufs=1)
            for j, (o0, os_) in enumerate(oblocks):
                wt[:os_, j, :, :] = nl.load(w3[grp * Og + o0:grp * Og + o0 + os_, c0:c0 + cs, :], dtype=cdt)
            for b in range(B):
                canvas = nl.zeros((cs, CH, CW), "float32", bufs=1)
                for j, (o0, os_) in enumerate(oblocks):
                    og = grp * Og + o0
                    for r0, nr, col0, nc in blocks:
                        gt = nl.load(grad[b, og:og + os_, r0:r0 + nr, col0:col0 + nc], dtype=cdt)
                        for t in range(T):
                            ps = nl.ndarray((cs, nr, nc), "float32", buffer=nl.psum)
                            _isa.nc_matmul(ps, wt[:os_, j, :, t], gt)
                            view = _canvas_tap(canvas, g, t // KW, t % KW, r0, nr, col0, nc)
                            view[...] = nl.add(view, ps)
                _store_canvas(gin, b, grp * Cg + c0, cs, canvas, g, bias)
    return gin


def _store_canvas(gin, b, c0, cs, canvas, g, bias=None):
    inner = canvas[:, g.ph:g.ph + g.H, g.pw:g.pw + g.W]
    if bias is not None:
        bt = nl.load(bias.reshape(bias.shape[0], 1)[c0:c0 + cs, :], dtype="float32")
        nl.store(gin[b, c0:c0 + cs, :, :], nl.add(inner, bt, dtype=gin.dtype))
    else:
        nl.store(gin[b, c0:c0 + cs, :, :], nl.copy(inner, dtype=gin.dtype))


@nl.jit
def conv2d_grad_weight(grad, x, weight_shape=(1, 1, 1, 1), stride=(1, 1), padding=(0, 0), dilation=(1, 1),
                       groups=1):
    """(grad_weight[O, C / groups, KH, KW], grad_bias[O, 1]) of conv2d from grad[B, O, Ho, Wo] and x[B, C, H, W]."""
    B, O, Ho, Wo = grad.shape
    _, C, H, W = x.shape
    _, Cg, KH, KW = weight_shape
    g = Geometry(H, W, KH, KW, stride, padding, dilation)
    if (g.Ho, g.Wo) != (Ho, Wo):
        raise ValueError(f"grad_output is {Ho}x{Wo}; the convolution of a {H}x{W} input gives {g.Ho}x{g.Wo}")
    T = KH * KW
    gw = nl.ndarray((O, Cg, KH, KW), x.dtype, buffer=nl.shared_hbm)
    gb = nl.ndarray((O, 1), grad.dtype, buffer=nl.shared_hbm)
    gw3 = gw.reshape(O, Cg, T)
    if groups == C == O and Cg == 1:
        _depthwise_grad_weight(grad, x, gw.reshape(O, T), gb, g)
        return gw, gb
    Og = O // groups
    cdt = _operand_dtype(x.dtype)
    g2 = grad.reshape(B, O, Ho * Wo)
    pblocks = g.blocks(P, _itemsize(cdt))
    ones = nl.full((P, 1), 1.0, cdt)
    for grp in range(groups):
        for o0, os_ in row_blocks(Og):
            og = grp * Og + o0
            bacc = nl.ndarray((os_, 1), "float32", buffer=nl.psum, bufs=1)
            for ci, (c0, cs) in enumerate(row_blocks(Cg)):
                taps = max(1, NT // cs)            # taps per PSUM bank
                res = nl.ndarray((os_, cs, T), "float32", bufs=1)
                for t0 in range(0, T, taps):
                    tn = min(taps, T - t0)
                    acc = nl.ndarray((os_, cs, tn), "float32", buffer=nl.psum)
                    first = True
                    for b in range(B):
                        for r0, nr, col0, nc in pblocks:
                            npos, q0 = nr * nc, r0 * Wo + col0
                            # positions on partitions: rows of whole width, or one row's segment
                            gT = nl.load_transpose2d(g2[b, og:og + os_, q0:q0 + npos], dtype=cdt)
                            win = g.window(x[b], grp * Cg + c0, cs, r0, nr, col0, nc, cdt)
                            xT = nl.ndarray((npos, cs, tn), cdt)
                            for i in range(tn):
                                t = t0 + i
                                xT[:, :, i] = nl.copy(nl.transpose(g.tap(win, t // KW, t % KW, nr, nc)), dtype=cdt)
                            _isa.nc_matmul(acc, gT, xT, accumulate=not first)
                            if ci == 0 and t0 == 0:
                                _isa.nc_matmul(bacc, gT, ones[:npos, :], accumulate=not first)
                            first = False
                    res[:, :, t0:t0 + tn] = nl.copy(acc)
                nl.store(gw3[og:og + os_, c0:c0 + cs, :], nl.copy(res, dtype=gw.dtype))
            nl.store(gb[og:og + os_, :], nl.copy(bacc, dtype=gb.dtype))
    return gw, gb


def _depthwise_grad_weight(grad, x, gw2, gb, g):
    B, C = x.shape[0], x.shape[1]
    T = g.KH * g.KW
    blocks = g.blocks(VECTOR_BLOCK, 4)
    for c0, cs in row_blocks(C):
        acc = nl.zeros((cs, T), "float32", bufs=1)
        bacc = nl.zeros((cs, 1), "float32", bufs=1)
        for b in range(B):
            for r0, nr, col0, nc in blocks:
                gt = nl.load(grad[b, c0:c0 + cs, r0:r0 + nr, col0:col0 + nc], dtype="float32")
                win = g.window(x[b], c0, cs, r0, nr, col0, nc, "float32")
                for t in range(T):
                    s = nl.sum(nl.multiply(g.tap(win, t // g.KW, t % g.KW, nr, nc), gt), axis=(1, 2), keepdims=False)
                    acc[:, t:t + 1] = nl.add(acc[:, t:t + 1], s)
                bacc[...] = nl.add(bacc, nl.sum(gt, axis=(1, 2), keepdims=False))
        nl.store(gw2[c0:c0 + cs, :], nl.copy(acc, dtype=gw2.dtype))
        nl.store(gb[c0:c0 + cs, :], nl.copy(bacc, dtype=gb.dtype))
