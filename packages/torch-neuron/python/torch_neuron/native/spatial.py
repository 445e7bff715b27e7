# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""Binders of the kernels of convolutional nets: convolution (direct and transposed) and its
backward, batch, group and weight norm and their backwards, max and average pooling, and nearest
and bilinear upsampling."""
from __future__ import annotations

import torch

from .binders import AsFloat, Call, NotCovered
from .families import AsWords


def _pool_params(c: Call, x):
    if x.dim() not in (3, 4):
        raise NotCovered(f"a {x.dim()}-D input; max_pool2d takes (C, H, W) or (N, C, H, W)")
    if c["ceil_mode"]:
        raise NotCovered("ceil_mode=True")

    def pair(v, default=(1,)):
        v = list(v) if v else list(default)
        return tuple(int(e) for e in (v * 2 if len(v) == 1 else v))
    k = pair(c["kernel_size"])
    return {"kernel_size": k, "stride": pair(c["stride"], k), "padding": pair(c["padding"], (0,)),
            "dilation": pair(c.a.get("dilation"))}


def _avg_pool_params(c: Call, x):
    params = _pool_params(c, x)
    del params["dilation"]
    d = c["divisor_override"]
    return dict(params, count_include_pad=bool(c["count_include_pad"]), divisor=int(d) if d else 0)


def _bind_avg_pool(c: Call):
    x = c.tensor("self")
    return [c.launch((x,), _avg_pool_params(c, x))]


def _bind_avg_pool_backward(c: Call):
    g, x = c.tensor("grad_output"), c.tensor("self")
    return [c.launch((g,), dict(_avg_pool_params(c, x), input_shape=tuple(x.shape)))]


def _nearest_factor(c: Call, in_hw, out_hw):
    """The integer (fh, fw) of an upsampling that repeats each element; CPU's scales, when given, must agree."""
    factor = []
    for n_in, n_out, name in zip(in_hw, out_hw, ("scales_h", "scales_w")):
        scale = c[name]
        if n_in <= 0 or n_out % n_in or (scale is not None and float(scale) != n_out // n_in):
            raise NotCovered(f"{n_in} -> {n_out} ({name}={scale}): the kernel repeats by integer factors")
        factor.append(n_out // n_in)
    return {"factor": tuple(factor)}


def _bind_upsample_nearest(c: Call):
    x = c.tensor("self", 4)
    return [c.launch((x,), _nearest_factor(c, tuple(x.shape[-2:]), tuple(int(v) for v in c["output_size"])))]


def _bind_upsample_nearest_backward(c: Call):
    g = c.tensor("grad_output", 4)
    in_hw = tuple(int(v) for v in c["input_size"])[-2:]
    return [c.launch((g,), _nearest_factor(c, in_hw, tuple(int(v) for v in c["output_size"])))]


def _bilinear_attrs(c: Call):
    return {"align_corners": bool(c["align_corners"]),
            "scales": tuple(None if c[n] is None else float(c[n]) for n in ("scales_h", "scales_w"))}


def _bind_upsample_bilinear(c: Call):
    x = c.tensor("self", 4)
    return [c.launch((x,), dict(_bilinear_attrs(c), output_size=tuple(int(v) for v in c["output_size"])))]


def _bind_upsample_bilinear_backward(c: Call):
    g = c.tensor("grad_output", 4)
    return [c.launch((g,), dict(_bilinear_attrs(c), input_size=tuple(int(v) for v in c["input_size"])))]


def _bind_max_pool(c: Call):
    x = c.tensor("self")
    return [c.launch((x,), _pool_params(c, x), targets=(0, 1))]


def _bind_max_pool_backward(c: Call):
    g, x = c.tensor("grad_output"), c.tensor("self")
    idx = c["indices"]
    if not isinstance(idx, torch.Tensor) or idx.dtype != torch.int64 or idx.shape != g.shape:
        raise NotCovered("indices that are not the forward's int64 indices")
    params = _pool_params(c, x)
    return [c.launch((g, AsWords(idx)), dict(params, input_shape=tuple(x.shape)))]


_PARAM_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def _channel_params(c: Call, C, names):
    out = []
    for name in names:
        t = c[name]
        if t is not None:
            c.operand(t, name, 1, dtype=_PARAM_DTYPES)
            if t.numel() != C:
                raise NotCovered(f"'{name}' has {t.numel()} elements for {C} channels")
        out.append(t)
    return out


def _bind_batch_norm(c: Call):
    x = c.tensor("input")
    if x.dim() < 2:
        raise NotCovered(f"a {x.dim()}-D input; batch norm normalises channels (dim 1)")
    w, b, rm, rv = _channel_params(c, x.shape[1], ("weight", "bias", "running_mean", "running_var"))
    training = bool(c["training"])
    if (rm is None) != (rv is None) or (not training and rm is None):
        raise NotCovered("running statistics missing for evaluation, or only one of them given")
    attrs = {"training": training, "momentum": float(c["momentum"]), "eps": float(c["eps"])}
    live = c.live or {}
    # training updates the running statistics in place (the kernel's last two results);
    # evaluation returns empty save_mean / save_invstd, as CPU does
    running = (live.get("running_mean"), live.get("running_var")) if training and rm is not None else (None, None)
    targets = ((0, 1, 2) if training else (0, None, None)) + running
    return [c.launch((x, w, b, rm, rv), attrs, targets=targets)]


def _bind_batch_norm_backward(c: Call):
    g, x = c.tensor("grad_out"), c.tensor("input")
    if not c["train"]:
        raise NotCovered("train=False (evaluation-mode backward)")
    if g.shape != x.shape or x.dim() < 2:
        raise NotCovered(f"grad_out {tuple(g.shape)} and input {tuple(x.shape)}")
    (w,) = _channel_params(c, x.shape[1], ("weight",))
    mean, invstd = _channel_params(c, x.shape[1], ("save_mean", "save_invstd"))
    if mean is None or invstd is None:
        raise NotCovered("no saved statistics")
    return [c.launch((g, x, AsFloat(mean), AsFloat(invstd), w), targets=(0, 1, 2))]


def _group_sizes(c: Call, x):
    N, C, HxW, G = (int(c[n]) for n in ("N", "C", "HxW", "group"))
    if x.numel() != N * C * HxW or G <= 0 or C % G:
        raise NotCovered(f"N={N}, C={C}, HxW={HxW}, group={G} for an input of {x.numel()} elements")
    return {"N": N, "C": C, "HxW": HxW, "group": G}


def _bind_group_norm(c: Call):
    x = c.tensor("input")
    sizes = _group_sizes(c, x)
    w, b = _channel_params(c, sizes["C"], ("weight", "bias"))
    return [c.launch((x, w, b), dict(sizes, eps=float(c["eps"])), targets=(0, 1, 2))]


def _bind_group_norm_backward(c: Call):
    g, x = c.tensor("grad_out"), c.tensor("input")
    sizes = _group_sizes(c, x)
    if g.shape != x.shape:
        raise NotCovered(f"grad_out {tuple(g.shape)} and input {tuple(x.shape)}")
    (w,) = _channel_params(c, sizes["C"], ("weight",))
    mean, rstd = (c.operand(c[n], n, dtype=_PARAM_DTYPES) for n in ("mean", "rstd"))
    return [c.launch((g, x, AsFloat(mean), AsFloat(rstd), w), sizes, targets=(0, 1, 2))]


def _weight_norm_dim(c: Call, v, g):
    if v.dim() == 0 or g.numel() != v.shape[int(c["dim"]) % v.dim()]:
        raise NotCovered(f"g of {g.numel()} elements for v {tuple(v.shape)} and dim={c['dim']}")
    return {"dim": int(c["dim"]) % v.dim()}


def _bind_weight_norm(c: Call):
    v, g = c.tensor("v"), c.operand(c["g"], "g", dtype=_PARAM_DTYPES)
    return [c.launch((v, g), _weight_norm_dim(c, v, g), targets=(0, 1))]


def _bind_weight_norm_backward(c: Call):
    gw, v = c.tensor("grad_w"), c.tensor("saved_v")
    g, n = (c.operand(c[k], k, dtype=_PARAM_DTYPES) for k in ("saved_g", "saved_norms"))
    if gw.shape != v.shape or n.numel() != g.numel():
        raise NotCovered(f"grad_w {tuple(gw.shape)}, saved_v {tuple(v.shape)}")
    return [c.launch((gw, v, g, AsFloat(n)), _weight_norm_dim(c, v, g), targets=(0, 1))]


def _conv_attrs(c: Call, x):
    nd = x.dim() - 2
    params = {n: tuple(int(v) for v in c[n]) for n in ("stride", "padding", "dilation")}
    if any(len(v) != nd for v in params.values()):
        raise NotCovered(f"stride, padding and dilation of lengths {[len(v) for v in params.values()]} for a "
                         f"{nd}-D convolution")
    return dict(params, groups=int(c["groups"]))


def _transposed_shape(c: Call, x, w, attrs):
    """The output shape of a transposed convolution (torch's formula); output_padding below the stride."""
    op = tuple(int(v) for v in c["output_padding"])
    if len(op) != x.dim() - 2 or any(o >= s for o, s in zip(op, attrs["stride"])):
        raise NotCovered(f"output_padding={list(op)} for stride {list(attrs['stride'])}")
    spatial = tuple((n - 1) * s - 2 * p + d * (k - 1) + o + 1 for n, k, s, p, d, o in zip(
        x.shape[2:], w.shape[2:], attrs["stride"], attrs["padding"], attrs["dilation"], op))
    return (x.shape[0], w.shape[1] * attrs["groups"]) + spatial


def _bind_convolution(c: Call):
    x = c.tensor("input", (3, 4))
    w = c.tensor("weight", x.dim())
    b = c.tensor("bias", 1, optional=True)
    attrs = _conv_attrs(c, x)
    if c["transposed"]:   # grad_input of the direct convolution whose weight this is, plus the bias
        return [c.launch((x, w, b), dict(attrs, input_shape=_transposed_shape(c, x, w, attrs)),
                         adapter="conv_grad_input")]
    return [c.launch((x, w, b), attrs)]


def _bind_convolution_backward(c: Call):
    g = c.tensor("grad_output", (3, 4))
    x, w = c.tensor("input", g.dim()), c.tensor("weight", g.dim())
    attrs = _conv_attrs(c, x)
    grad_input, grad_weight, grad_bias = c["output_mask"]
    if c["transposed"]:
        # the roles swap: grad_input is the direct convolution of grad_output, grad_weight the direct
        # convolution's weight gradient with input and grad_output exchanged, grad_bias a sum
        launches = []
        if grad_input:
            launches.append(c.launch((g, w, None), attrs, targets=(0,), adapter="conv"))
        if grad_weight:
            launches.append(c.launch((x, g), dict(attrs, weight_shape=tuple(w.shape)), targets=(1, None)))
        if grad_bias:
            launches.append(c.launch((g,), {"dim": (0,) + tuple(range(2, g.dim())), "keepdim": False},
                                     targets=(2,), adapter="sum_dim"))
        return launches
    launches = []
    if grad_input:
        launches.append(c.launch((g, w, None), dict(attrs, input_shape=tuple(x.shape)), targets=(0,),
                                 adapter="conv_grad_input"))
    if grad_weight or grad_bias:
        launches.append(c.launch((g, x), dict(attrs, weight_shape=tuple(w.shape)), targets=(1, 2)))
    return launches


SPATIAL_BINDERS = {
    "convolution": _bind_convolution,
    "convolution_backward": _bind_convolution_backward,
    "batch_norm": _bind_batch_norm,
    "batch_norm_backward": _bind_batch_norm_backward,
    "group_norm": _bind_group_norm,
    "group_norm_backward": _bind_group_norm_backward,
    "weight_norm": _bind_weight_norm,
    "weight_norm_backward": _bind_weight_norm_backward,
    "max_pool": _bind_max_pool,
    "max_pool_backward": _bind_max_pool_backward,
    "avg_pool": _bind_avg_pool,
    "avg_pool_backward": _bind_avg_pool_backward,
    "upsample_nearest": _bind_upsample_nearest,
    "upsample_nearest_backward": _bind_upsample_nearest_backward,
    "upsample_bilinear": _bind_upsample_bilinear,
    "upsample_bilinear_backward": _bind_upsample_bilinear_backward,
}
