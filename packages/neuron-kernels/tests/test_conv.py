# Copyright 2026 The neuron-kernels Authors. Licensed under the Apache License, Version 2.0.
"""The convolution kernels (forward, grad_input, grad_weight with grad_bias) against numpy sums
over kernel taps, for plain, padded, strided, dilated, grouped, depthwise and 1-D convolutions."""

import numpy as np
import pytest

from neuron_kernels import kernels as K
from neuron_kernels import lookup

r = np.random.default_rng(3)


def _taps(xp, kh, kw, Ho, Wo, s, d):
    return xp[:, :, kh * d[0]:kh * d[0] + (Ho - 1) * s[0] + 1:s[0], kw * d[1]:kw * d[1] + (Wo - 1) * s[1] + 1:s[1]]


def reference(x, w, b, gy, s, p, d, groups):
    """(y, grad_x, grad_w, grad_b) in float64: y sums, per tap, the tap's input view times its weights."""
    x, w, gy = (a.astype(np.float64) for a in (x, w, gy))
    B, C, H, W = x.shape
    O, Cg, KH, KW = w.shape
    Og = O // groups
    Ho, Wo = gy.shape[2:]
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])))
    y = np.zeros((B, O, Ho, Wo))
    gxp = np.zeros_like(xp)
    gw = np.zeros_like(w)
    for kh in range(KH):
        for kw in range(KW):
            v = _taps(xp, kh, kw, Ho, Wo, s, d)
            gv = _taps(gxp, kh, kw, Ho, Wo, s, d)
            for g in range(groups):
                cs, os_ = slice(g * Cg, (g + 1) * Cg), slice(g * Og, (g + 1) * Og)
                y[:, os_] += np.einsum("bchw,oc->bohw", v[:, cs], w[os_, :, kh, kw])
                gv[:, cs] += np.einsum("bohw,oc->bchw", gy[:, os_], w[os_, :, kh, kw])
                gw[os_, :, kh, kw] += np.einsum("bohw,bchw->oc", gy[:, os_], v[:, cs])
    y += b.astype(np.float64)[None, :, None, None]
    return y, gxp[:, :, p[0]:p[0] + H, p[1]:p[1] + W], gw, gy.sum(axis=(0, 2, 3))


CASES = [
    ((2, 3, 9, 11), (5, 3, 3, 3), (1, 1), (1, 1), (1, 1), 1),
    ((2, 4, 10, 7), (6, 2, 3, 2), (2, 1), (1, 0), (1, 2), 2),
    ((1, 8, 9, 9), (8, 1, 3, 3), (1, 1), (1, 1), (1, 1), 8),
    ((2, 3, 16, 16), (8, 3, 4, 4), (4, 4), (0, 0), (1, 1), 1),
    ((1, 130, 6, 6), (140, 130, 3, 3), (1, 1), (1, 1), (1, 1), 1),
    ((1, 2, 1, 300), (3, 2, 1, 5), (1, 1), (0, 2), (1, 1), 1),
]


@pytest.mark.parametrize("xs,ws,s,p,d,groups", CASES, ids=lambda v: str(v))
def test_conv_kernels_match_numpy(xs, ws, s, p, d, groups):
    x = r.standard_normal(xs).astype(np.float32)
    w = r.standard_normal(ws).astype(np.float32)
    b = r.standard_normal(ws[0]).astype(np.float32)
    y = K.conv2d(x, w, b, stride=s, padding=p, dilation=d, groups=groups)
    gy = r.standard_normal(y.shape).astype(np.float32)
    want = reference(x, w, b, gy, s, p, d, groups)
    gx = K.conv2d_grad_input(gy, w, input_hw=xs[2:], stride=s, padding=p, dilation=d, groups=groups)
    gw, gb = K.conv2d_grad_weight(gy, x, weight_shape=ws, stride=s, padding=p, dilation=d, groups=groups)
    for name, got, ref in zip(("y", "grad_x", "grad_w", "grad_b"), (y, gx, gw, gb.reshape(-1)), want):
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4, err_msg=name)


def test_a_convolution_is_timed_from_its_schedule_and_taps_cost_tensor_engine_time():
    e = lookup("aten::convolution_overrideable", "bfloat16")
    kw = {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "groups": 1}
    ns3, eng3 = e.estimate_engines_ns([(8, 128, 14, 14), (128, 128, 3, 3), (128,)], "bfloat16", **kw)
    ns1, eng1 = e.estimate_engines_ns([(8, 128, 14, 14), (128, 128, 1, 1), (128,)], "bfloat16",
                                      **dict(kw, padding=(0, 0)))
    assert eng3[0] > 5 * eng1[0]              # nine taps of TensorE work against one
    assert ns3 > ns1 > 0
    dw_ns, dw_eng = e.estimate_engines_ns([(8, 128, 14, 14), (128, 1, 3, 3), (128,)], "bfloat16",
                                          **dict(kw, groups=128))
    assert dw_eng[0] == 0 and dw_eng[1] > 0    # depthwise: VectorE only


def _bilinear_reference(x, out_hw, align_corners):
    """Four-tap bilinear interpolation written out, in float64."""
    H, W = x.shape[-2:]
    out = np.zeros(x.shape[:-2] + tuple(out_hw))

    def src(o, n_in, n_out):
        if align_corners:
            return o * (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
        return max((o + 0.5) * n_in / n_out - 0.5, 0.0)
    for i in range(out_hw[0]):
        for j in range(out_hw[1]):
            si, sj = src(i, H, out_hw[0]), src(j, W, out_hw[1])
            i0, j0 = min(int(si), H - 1), min(int(sj), W - 1)
            i1, j1 = min(i0 + 1, H - 1), min(j0 + 1, W - 1)
            a, b = si - i0, sj - j0
            out[..., i, j] = ((1 - a) * (1 - b) * x[..., i0, j0] + (1 - a) * b * x[..., i0, j1]
                              + a * (1 - b) * x[..., i1, j0] + a * b * x[..., i1, j1])
    return out


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("shapes", [((2, 3, 8, 8), (16, 12)), ((1, 1, 130, 5), (140, 3))], ids=str)
def test_bilinear_resampling_matches_four_tap_interpolation(shapes, align_corners):
    shape, out_hw = shapes
    x = r.standard_normal(shape).astype(np.float32)
    got = lookup("aten::upsample_bilinear2d", "float32").run(x, output_size=out_hw, align_corners=align_corners)
    np.testing.assert_allclose(got, _bilinear_reference(x.astype(np.float64), out_hw, align_corners),
                               rtol=1e-4, atol=1e-4)
