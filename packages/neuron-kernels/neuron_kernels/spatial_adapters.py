# Copyright 2026 The neuron-kernels Authors. Licensed under the Apache License, Version 2.0.
"""Adapters of the kernels of convolutional nets (see ``adapters``): convolution and its gradients,
batch, group and weight norm, pooling and upsampling. Layout changes are host-side views."""

from __future__ import annotations

import numpy as np

from . import kernels as K
from .adapters import KernelCall, _move_first, _re, _same, _shape
from .language import TensorSpec


def _as_2d(x, w, stride, padding, dilation):
    """A 1-D convolution's operands and parameters as a 2-D one's with one row."""
    if len(_shape(x)) == 4:
        return x, w, tuple(stride), tuple(padding), tuple(dilation)
    B, C, L = _shape(x)
    ws = _shape(w)
    return (_re(x, (B, C, 1, L)), _re(w, (ws[0], ws[1], 1, ws[2])), (1, stride[0]), (0, padding[0]),
            (1, dilation[0]))


def conv(x, w, bias=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    """aten::convolution (not transposed) over 1-D or 2-D inputs (N, C, [H,] W)."""
    shape = _shape(x)
    x4, w4, s, p, d = _as_2d(x, w, stride, padding, dilation)
    post = _same if len(shape) == 4 else (lambda o: o.reshape(o.shape[0], o.shape[1], o.shape[3]))
    return KernelCall(K.conv2d, (x4, w4, bias), {"stride": s, "padding": p, "dilation": d, "groups": int(groups)},
                      post)


def conv_grad_input(grad, w, bias=None, input_shape=(), stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    """grad_input of ``conv`` for an input of ``input_shape``; with ``bias``, the transposed convolution
    of ``grad`` (weight (C_in, C_out / groups, ...)) producing ``input_shape``."""
    gs = _shape(grad)
    g4, w4, s, p, d = _as_2d(grad, w, stride, padding, dilation)
    hw = tuple(input_shape[2:]) if len(input_shape) == 4 else (1, input_shape[2])
    return KernelCall(K.conv2d_grad_input, (g4, w4, bias),
                      {"input_hw": hw, "stride": s, "padding": p, "dilation": d, "groups": int(groups)},
                      _same if len(gs) == 4 else (lambda o: o.reshape(tuple(input_shape))))


def conv_grad_weight(grad, x, weight_shape=(), stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    """(grad_weight, grad_bias) of ``conv`` for a weight of ``weight_shape``."""
    ws = tuple(weight_shape)
    g4, x4, s, p, d = _as_2d(grad, x, stride, padding, dilation)    # x [B, C, L] takes a weight's 1-row form
    w4 = ws if len(ws) == 4 else (ws[0], ws[1], 1, ws[2])
    return KernelCall(K.conv2d_grad_weight, (g4, x4),
                      {"weight_shape": w4, "stride": s, "padding": p, "dilation": d, "groups": int(groups)},
                      lambda o: (o[0].reshape(ws), o[1].reshape(ws[0])))


def _channel_major(x):
    """(N, C, *) as (C, N x spatial): channels on partitions, a strided view for the DMA."""
    xs = _shape(x)
    N, C, L = xs[0], xs[1], int(np.prod(xs[2:]))
    if isinstance(x, TensorSpec):
        return TensorSpec((C, N * L), x.dtype)
    return np.ascontiguousarray(np.moveaxis(x.reshape(N, C, L), 1, 0)).reshape(C, N * L)


def _from_channel_major(o, xs):
    N, C, L = xs[0], xs[1], int(np.prod(xs[2:]))
    return np.moveaxis(o.reshape(C, N, L), 0, 1).reshape(xs)


def _column(v, C):
    return None if v is None else _re(v, (C, 1))


def batch_norm(x, weight=None, bias=None, running_mean=None, running_var=None, training=True, momentum=0.1,
               eps=1e-5):
    """aten::native_batch_norm over (N, C, *): (y, save_mean, save_invstd, running_mean', running_var')."""
    xs = _shape(x)
    C = xs[1]
    args = (_channel_major(x),) + tuple(_column(v, C) for v in (weight, bias, running_mean, running_var))
    return KernelCall(K.batch_norm, args, {"training": bool(training), "momentum": float(momentum), "eps": float(eps)},
                      lambda o: (_from_channel_major(o[0], xs),) + tuple(v.reshape(C) for v in o[1:]))


def batch_norm_backward(grad, x, mean, invstd, weight=None):
    xs = _shape(x)
    C = xs[1]
    args = (_channel_major(grad), _channel_major(x), _column(mean, C), _column(invstd, C), _column(weight, C))
    return KernelCall(K.batch_norm_backward, args, {},
                      lambda o: (_from_channel_major(o[0], xs), o[1].reshape(C), o[2].reshape(C)))


def _rows_of(x, dim):
    """``dim`` first, the rest flattened: (view (R, K), the moved shape)."""
    xs = _shape(x)
    moved = (xs[dim],) + tuple(s for k, s in enumerate(xs) if k != dim)
    return _re(_move_first(x, dim), (moved[0], int(np.prod(moved[1:])))), moved


def weight_norm(v, g, dim=0):
    """torch._weight_norm_interface: norms over every dim but ``dim`` (made the rows); (w, norms)."""
    v2, moved = _rows_of(v, dim)
    gshape = _shape(g)
    return KernelCall(K.weight_norm, (v2, _re(g, (moved[0], 1))), {},
                      lambda o: (np.moveaxis(o[0].reshape(moved), 0, dim), o[1].reshape(gshape)))


def weight_norm_backward(grad_w, v, g, norms, dim=0):
    v2, moved = _rows_of(v, dim)
    g2, _ = _rows_of(grad_w, dim)
    gshape = _shape(g)
    return KernelCall(K.weight_norm_backward, (g2, v2, _re(g, (moved[0], 1)), _re(norms, (moved[0], 1))), {},
                      lambda o: (np.moveaxis(o[0].reshape(moved), 0, dim), o[1].reshape(gshape)))


def _group_rows(v, N, G):
    """A per-channel parameter (C,) as each (sample, group) row's channels (N x G, C / G)."""
    if v is None:
        return None
    C = _shape(v)[0]
    if isinstance(v, TensorSpec):
        return TensorSpec((N * G, C // G), v.dtype)
    return np.ascontiguousarray(np.tile(v.reshape(G, C // G), (N, 1)))


def group_norm(x, weight=None, bias=None, N=1, C=1, HxW=1, group=1, eps=1e-5):
    """aten::native_group_norm: rows (sample, group) of the contiguous input; (y, mean (N, G), rstd (N, G))."""
    xs = _shape(x)
    G = int(group)
    args = (_re(x, (N * G, (C // G) * HxW)), _group_rows(weight, N, G), _group_rows(bias, N, G))
    return KernelCall(K.group_norm, args, {"channels": C // G, "eps": float(eps)},
                      lambda o: (o[0].reshape(xs), o[1].reshape(N, G), o[2].reshape(N, G)))


def group_norm_backward(grad, x, mean, rstd, weight=None, N=1, C=1, HxW=1, group=1):
    xs = _shape(x)
    G = int(group)
    rows = (N * G, (C // G) * HxW)
    args = (_re(grad, rows), _re(x, rows), _re(mean, (N * G, 1)), _re(rstd, (N * G, 1)), _group_rows(weight, N, G))
    return KernelCall(K.group_norm_backward, args, {"channels": C // G, "samples": N},
                      lambda o: (o[0].reshape(xs), o[1].reshape(C), o[2].reshape(C)))


def _planes(x):
    xs = _shape(x)
    lead = xs[:-2]
    return _re(x, ((int(np.prod(lead)) if lead else 1),) + tuple(xs[-2:])), lead


def avg_pool2d(x, kernel_size=(1, 1), stride=(1, 1), padding=(0, 0), count_include_pad=True, divisor=0):
    x3, lead = _planes(x)
    return KernelCall(K.avg_pool2d, (x3,), {"kernel_size": tuple(kernel_size), "stride": tuple(stride),
                                            "padding": tuple(padding), "count_include_pad": bool(count_include_pad),
                                            "divisor": int(divisor)},
                      lambda o: o.reshape(lead + o.shape[-2:]))


def avg_pool2d_backward(grad, input_shape=(), kernel_size=(1, 1), stride=(1, 1), padding=(0, 0),
                        count_include_pad=True, divisor=0):
    g3, _ = _planes(grad)
    return KernelCall(K.avg_pool2d_backward, (g3,), {
        "input_hw": tuple(input_shape[-2:]), "kernel_size": tuple(kernel_size), "stride": tuple(stride),
        "padding": tuple(padding), "count_include_pad": bool(count_include_pad), "divisor": int(divisor)},
        lambda o: o.reshape(tuple(input_shape)))


def upsample_nearest(x, factor=(1, 1)):
    x3, lead = _planes(x)
    return KernelCall(K.upsample_nearest, (x3,), {"factor": tuple(factor)}, lambda o: o.reshape(lead + o.shape[-2:]))


def upsample_nearest_backward(grad, factor=(1, 1)):
    g3, lead = _planes(grad)
    return KernelCall(K.upsample_nearest_backward, (g3,), {"factor": tuple(factor)},
                      lambda o: o.reshape(lead + o.shape[-2:]))


def bilinear_weights(n_in, n_out, align_corners, scale=None):
    """(n_out, n_in) float32: PyTorch's bilinear source weights along one axis (area_pixel_compute_source_index:
    align_corners maps the end pixels' centres onto each other, else half-pixel centres clamped at 0; a
    given ``scale`` (scales_h / scales_w) replaces n_in / n_out)."""
    a = np.zeros((n_out, n_in), np.float32)
    if align_corners:
        step = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    else:
        step = 1.0 / scale if scale else n_in / n_out
    for o in range(n_out):
        src = o * step if align_corners else max((o + 0.5) * step - 0.5, 0.0)
        i0 = min(int(np.floor(src)), n_in - 1)
        i1 = min(i0 + 1, n_in - 1)
        lam = src - i0
        a[o, i0] += 1.0 - lam
        a[o, i1] += lam
    return a


def _bilinear_matrices(in_hw, out_hw, align_corners, scales, transpose):
    mats = [bilinear_weights(i, o, align_corners, s) for i, o, s in zip(in_hw, out_hw, scales)]
    # forward: left_t = A_h.T (H, Ho), right = A_w.T (W, Wo); backward: A_h (Ho, H), A_w (Wo, W)
    return tuple(m if transpose else np.ascontiguousarray(m.T) for m in mats)


def upsample_bilinear(x, output_size=(1, 1), align_corners=False, scales=(None, None)):
    """aten::upsample_bilinear2d as out = A_h @ x @ A_w.T per plane (``resample``), the interpolation
    weights constant matrices."""
    x3, lead = _planes(x)
    in_hw = _shape(x)[-2:]
    if isinstance(x, TensorSpec):
        mats = (TensorSpec((in_hw[0], output_size[0]), "float32"), TensorSpec((in_hw[1], output_size[1]), "float32"))
    else:
        mats = _bilinear_matrices(in_hw, output_size, align_corners, scales, False)
    return KernelCall(K.resample, (x3,) + mats, {}, lambda o: o.reshape(lead + tuple(output_size)))


def upsample_bilinear_backward(grad, input_size=(), align_corners=False, scales=(None, None)):
    g3, _ = _planes(grad)
    out_hw, in_hw = _shape(grad)[-2:], tuple(input_size[-2:])
    if isinstance(grad, TensorSpec):
        mats = (TensorSpec((out_hw[0], in_hw[0]), "float32"), TensorSpec((out_hw[1], in_hw[1]), "float32"))
    else:
        mats = _bilinear_matrices(in_hw, out_hw, align_corners, scales, True)
    return KernelCall(K.resample, (g3,) + mats, {}, lambda o: o.reshape(tuple(input_size)))


def max_pool2d(x, kernel_size=(1, 1), stride=(1, 1), padding=(0, 0), dilation=(1, 1)):
    """aten::max_pool2d_with_indices over (*, H, W) planes: (out, int64 indices)."""
    xs = _shape(x)
    lead, (H, W) = xs[:-2], xs[-2:]
    R = int(np.prod(lead)) if lead else 1
    Ho, Wo = (K.conv.out_size(n, k, s_, p, d) for n, k, s_, p, d in zip((H, W), kernel_size, stride, padding, dilation))
    return KernelCall(K.max_pool2d, (_re(x, (R, H, W)),),
                      {"kernel_size": tuple(kernel_size), "stride": tuple(stride), "padding": tuple(padding),
                       "dilation": tuple(dilation)},
                      lambda o: (o[0].reshape(lead + (Ho, Wo)), o[1].view(np.int64).reshape(lead + (Ho, Wo))))


def max_pool2d_backward(grad, indices, input_shape=(), kernel_size=(1, 1), stride=(1, 1), padding=(0, 0),
                        dilation=(1, 1)):
    """grad_input of max_pool2d from the gradient and the indices (as int32 words)."""
    gs = _shape(grad)
    R, (Ho, Wo) = int(np.prod(gs[:-2])) if gs[:-2] else 1, gs[-2:]
    return KernelCall(K.max_pool2d_backward, (_re(grad, (R, Ho, Wo)), _re(indices, (R, Ho, 2 * Wo))),
                      {"input_hw": tuple(input_shape[-2:]), "kernel_size": tuple(kernel_size), "stride": tuple(stride),
                       "padding": tuple(padding), "dilation": tuple(dilation)},
                      lambda o: o.reshape(tuple(input_shape)))
