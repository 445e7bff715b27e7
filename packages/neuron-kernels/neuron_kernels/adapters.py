# Copyright 2026 The neuron-kernels Authors. Licensed under the Apache License, Version 2.0.
"""Adapters from ATen argument conventions to kernel launches.

An adapter takes the op's tensor arguments (numpy arrays to run, or TensorSpecs to time)
plus its non-tensor attributes, and returns a ``KernelCall``: the kernel, its arguments in the
kernel's canonical layout (e.g. [128, n/128] views for elementwise ops) and a function that
maps the kernel's outputs back to the op's results. Layout changes are host-side views.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np

from neuron_sim.isa.dtypes import dtype_name

from . import kernels as K
from .language import Kernel, TensorSpec


@dataclasses.dataclass
class KernelCall:
    """A kernel with its arguments in the kernel's layout and the map from its outputs to the op's results."""

    kernel: Kernel
    args: tuple
    kwargs: dict
    post: Callable[[Any], Any]


def _shape(x):
    return tuple(x.shape)


def _dt(x) -> str:
    return x.dtype if isinstance(x, TensorSpec) else dtype_name(x.dtype)


def _re(x, shape):
    if isinstance(x, TensorSpec):
        return TensorSpec(shape, x.dtype)
    return np.ascontiguousarray(x).reshape(shape)


def _bcast(x, shape):
    if isinstance(x, TensorSpec):
        return TensorSpec(shape, x.dtype)
    return np.ascontiguousarray(np.broadcast_to(x, shape))


def _cast(x, dtype):
    if isinstance(x, TensorSpec):
        return TensorSpec(x.shape, dtype)
    return x.astype(np.dtype(dtype) if dtype in ("float32", "int32") else x.dtype)


def _move_last(x, dim):
    if isinstance(x, TensorSpec):
        s = list(x.shape)
        s.append(s.pop(dim))
        return TensorSpec(s, x.dtype)
    return np.ascontiguousarray(np.moveaxis(x, dim, -1))


def _flat2d(shape):
    n = int(np.prod(shape)) if shape else 1
    if n % 128 == 0 and n >= 128:
        return (128, n // 128)
    c = shape[-1] if shape else 1
    return (n // max(c, 1), c) if c else (1, 0)


def _same(x):
    return x


# -- matmul family ----------------------------------------------------------------------------
def mm(a, b):
    return KernelCall(K.matmul, (a, b), {}, _same)


def bmm(a, b):
    return KernelCall(K.bmm, (a, b), {}, _same)


def matmul(a, b):
    if len(_shape(a)) == 2 and len(_shape(b)) == 2:
        return mm(a, b)
    if len(_shape(a)) == 3 and len(_shape(b)) == 2:
        B, M, Kd = _shape(a)
        return KernelCall(K.matmul, (_re(a, (B * M, Kd)), b), {}, lambda o: o.reshape(B, M, -1))
    return bmm(a, b)


def linear(x, weight, bias=None):
    lead = _shape(x)[:-1]
    x2 = _re(x, (int(np.prod(lead)), _shape(x)[-1]))
    args = (x2, weight) if bias is None else (x2, weight, bias)
    return KernelCall(K.linear, args, {}, lambda o: o.reshape(*lead, -1))


def addmm(bias, x, w):
    return KernelCall(K.linear, (x, w, _re(bias, (_shape(bias)[-1],))), {"transpose_weight": False}, _same)


# -- elementwise ------------------------------------------------------------------------------
def _binary(op):
    def f(a, b):
        shape = tuple(np.broadcast_shapes(_shape(a), _shape(b)))
        v = _flat2d(shape)
        return KernelCall(K.binary, (_re(_bcast(a, shape), v), _re(_bcast(b, shape), v)), {"op": op},
                      lambda o: o.reshape(shape))
    return f


add, sub, mul, div = _binary("add"), _binary("subtract"), _binary("multiply"), _binary("divide")
maximum, minimum = _binary("maximum"), _binary("minimum")


def _scalar(op):
    def f(a, other):
        shape = _shape(a)
        return KernelCall(K.binary_scalar, (_re(a, _flat2d(shape)),), {"scalar": float(other), "op": op},
                      lambda o: o.reshape(shape))
    return f


add_scalar, mul_scalar = _scalar("add"), _scalar("multiply")


def _unary(func):
    def f(a):
        shape = _shape(a)
        return KernelCall(K.unary, (_re(a, _flat2d(shape)),), {"func": func}, lambda o: o.reshape(shape))
    return f


exp, log, tanh, sigmoid, relu = _unary("exp"), _unary("log"), _unary("tanh"), _unary("sigmoid"), _unary("relu")
silu, sqrt, rsqrt, neg = _unary("silu"), _unary("sqrt"), _unary("rsqrt"), _unary("negative")
abs, reciprocal = _unary("abs"), _unary("reciprocal")  # noqa: A001 - ATen's name


def gelu(a, approximate="none"):
    return _unary("gelu_apprx_tanh" if approximate == "tanh" else "gelu")(a)


def _act_backward(func):
    def f(grad, x):
        shape = _shape(x)
        v = _flat2d(shape)
        return KernelCall(K.activation_backward, (_re(grad, v), _re(x, v)), {"func": func}, lambda o: o.reshape(shape))
    return f


silu_backward = _act_backward("silu_dx")

# d/dx of 0.5 x (1 + tanh(u)), u = k (x + 0.044715 x^3): 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 * 0.044715 x^2)
_K = 0.7978845608028654
_T = ("tanh", ("multiply", ("add", ("x", 1), ("multiply", ("c", 0.044715), ("multiply", ("x", 1),
                                                                           ("square", ("x", 1))))), ("c", _K)))
_GELU_TANH_DX = ("multiply", ("x", 0), ("add", ("multiply", ("add", _T, ("c", 1.0)), ("c", 0.5)),
                                       ("multiply", ("multiply", ("x", 1), ("subtract", ("c", 1.0), ("square", _T))),
                                        ("add", ("multiply", ("square", ("x", 1)), ("c", 3 * 0.044715 * 0.5 * _K)),
                                         ("c", 0.5 * _K)))))


def gelu_backward(grad, x, approximate="none"):
    """grad * gelu'(x): ScalarE's derivative table for the erf form, a generated expression for 'tanh'."""
    if approximate == "tanh":
        return pointwise(grad, x, expr=_GELU_TANH_DX)
    return _act_backward("gelu_dx")(grad, x)


# -- reductions -------------------------------------------------------------------------------
def _permute(x, perm):
    if isinstance(x, TensorSpec):
        return TensorSpec(tuple(x.shape[p] for p in perm), x.dtype)
    return np.ascontiguousarray(np.transpose(x, perm))


def _reduction(op, mean=False):
    def f(x, dim=-1, keepdim=False):
        """Reduces over ``dim`` (an int or a set of dims; empty: all). Adjacent reduced dims are one
        block of the (outer, D, inner) view; others are moved last first (a host-side layout change)."""
        shape = _shape(x)
        nd = len(shape)
        ds = dim if isinstance(dim, (tuple, list)) else (dim,)
        dims = sorted({int(d) % nd for d in ds}) if nd else []
        if nd and not dims:
            dims = list(range(nd))
        kept = [i for i in range(nd) if i not in dims]
        if dims and dims != list(range(dims[0], dims[-1] + 1)):
            x = _permute(x, kept + dims)
            src = [shape[i] for i in kept + dims]
            lo, hi = len(kept), nd
        else:
            src = list(shape)
            lo, hi = (dims[0], dims[-1] + 1) if dims else (0, 0)
        O = int(np.prod(src[:lo]))
        D = int(np.prod(src[lo:hi]))
        I = int(np.prod(src[hi:]))
        out_shape = tuple(1 if i in dims else s for i, s in enumerate(shape)) if keepdim else \
            tuple(shape[i] for i in kept)
        return KernelCall(K.reduce, (_re(x, (O, D, I)),), {"op": op, "scale": 1.0 / D if mean and D else 1.0},
                          lambda o: o.reshape(out_shape))
    return f


sum_dim, mean_dim, amax, amin = _reduction("add"), _reduction("add", True), _reduction("max"), _reduction("min")


def _softmax_like(kernel):
    def f(x, dim=-1, half_to_float=False):
        shape = _shape(x)
        d = dim % len(shape)
        xl = _move_last(x, d)
        ls = _shape(xl)
        x2 = _re(xl, (int(np.prod(ls[:-1])), ls[-1]))
        return KernelCall(kernel, (x2,), {}, lambda o: np.moveaxis(o.reshape(ls), -1, d))
    return f


softmax, log_softmax = _softmax_like(K.softmax), _softmax_like(K.log_softmax)


# -- normalisation ----------------------------------------------------------------------------
def layer_norm(x, weight=None, bias=None, eps=1e-5):
    shape = _shape(x)
    C = shape[-1]
    lead = shape[:-1]
    args = (_re(x, (int(np.prod(lead)), C)), weight, bias)
    return KernelCall(K.layer_norm, args, {"eps": float(eps)},
                  lambda o: (o[0].reshape(shape), o[1].reshape(*lead, 1), o[2].reshape(*lead, 1)))


def layer_norm_backward(grad, x, mean, rstd, weight=None):
    shape = _shape(x)
    C = shape[-1]
    R = int(np.prod(shape[:-1]))
    args = (_re(grad, (R, C)), _re(x, (R, C)), _re(rstd, (R, 1)), weight, _re(mean, (R, 1)))
    return KernelCall(K.norm_backward, args, {}, lambda o: (o[0].reshape(shape), o[1].reshape(C), o[2].reshape(C)))


def rms_norm(x, weight=None, eps=1e-6):
    shape = _shape(x)
    C = shape[-1]
    lead = shape[:-1]
    return KernelCall(K.rms_norm, (_re(x, (int(np.prod(lead)), C)), weight), {"eps": float(eps)},
                  lambda o: (o[0].reshape(shape), o[1].reshape(*lead, 1)))


# -- embedding, loss, attention, optimizer ------------------------------------------------------
def embedding(weight, indices):
    ishape = _shape(indices)
    n = int(np.prod(ishape))
    return KernelCall(K.embedding, (weight, _re(_cast(indices, "int32"), (n, 1))), {},
                  lambda o: o.reshape(*ishape, -1))


def _move_first(x, dim):
    if isinstance(x, TensorSpec):
        s = list(x.shape)
        s.insert(0, s.pop(dim))
        return TensorSpec(s, x.dtype)
    return np.ascontiguousarray(np.moveaxis(x, dim, 0))


def cross_entropy(logits, target, reduction="mean"):
    n = _shape(logits)[0]
    return KernelCall(K.cross_entropy, (logits, _re(_cast(target, "int32"), (n, 1))), {"reduction": reduction},
                  lambda o: o[0].reshape(()) if reduction != "none" else o[1].reshape(n))


def _sdpa_mask(mask, lead, Sq, Sk):
    """An additive mask broadcastable to (*lead, Sq, Sk) as the kernel's (G, Sq or 1, Sk) operand and
    (mask_div, mask_mod): batch-head b reads group (b // mask_div) % mask_mod. Lead dims the mask
    broadcasts over stay unexpanded when the ones it has form one run; otherwise it is expanded."""
    ms = _shape(mask)
    ms = (1,) * (len(lead) + 2 - len(ms)) + ms
    mlead, mq = list(ms[:-2]), ms[-2]
    varying = [i for i, n in enumerate(mlead) if n != 1]
    if varying and any(mlead[i] != lead[i] for i in range(varying[0], varying[-1] + 1)):
        mlead, varying = list(lead), [i for i, n in enumerate(lead) if n != 1]
    if varying:
        i0, i1 = varying[0], varying[-1] + 1
        mod, div = int(np.prod(lead[i0:i1])), int(np.prod(lead[i1:]))
    else:
        mod = div = 1
    full = _bcast(_re(mask, ms), (*mlead, mq, Sk))
    return _re(full, (mod, mq, Sk)), {"mask_div": div, "mask_mod": mod}


def _with_mask(args, kw, mask, lead, Sq, Sk):
    """The attention kernels' operands and keywords, with the mask operand appended when given."""
    if mask is None:
        return args, kw
    m, mkw = _sdpa_mask(mask, lead, Sq, Sk)
    return args + (m,), {**kw, **mkw}


def _heads_per_pack(BH, Sq, Sk, mask, causal, forward=False) -> int:
    """How many heads the attention kernels take per pack: the most, dividing BH, whose queries
    and keys fit 128 partitions (heads of short sequences share one set of tiles); 1 with a mask
    operand, or causal with Sq != Sk (the causal diagonal of each head is then offset).

    The forward of two packed heads without a causal mask is the exception: its block mask costs
    VectorE more than the halved per-block overheads save once two blocks' instructions are
    interleaved (3-7% slower in the schedules of 8-64 heads of 64 keys), so it runs head by head."""
    if mask is not None or (causal and Sq != Sk) or 2 * max(Sq, Sk) > 128:
        return 1
    g = 128 // max(Sq, Sk)
    while BH % g:
        g -= 1
    if forward and not causal and g == 2:
        return 1
    return g


def _attention_views(BH, heads, tensors):
    """(BH, S, d) operands as (BH / heads, heads * S, d): consecutive heads' rows are contiguous."""
    return tuple(_re(t, (BH // heads, heads * s[-2], s[-1])) for t, s in tensors)


def sdpa(q, k, v, mask=None, is_causal=False, scale=None):
    shape, kshape = _shape(q), _shape(k)
    lead = shape[:-2]
    BH = int(np.prod(lead))
    g = _heads_per_pack(BH, shape[-2], kshape[-2], mask, is_causal, forward=True)
    args = _attention_views(BH, g, ((q, shape), (k, kshape), (v, _shape(v))))
    args, kw = _with_mask(args, {"causal": bool(is_causal), "scale": scale, "heads": g}, mask, lead, shape[-2],
                          kshape[-2])
    return KernelCall(K.sdpa_fwd, args, kw,
                      lambda o: (o[0].reshape(shape), o[1].reshape(*lead, shape[-2])))


def sdpa_backward(grad_out, q, k, v, out, lse, mask=None, is_causal=False, scale=None):
    shape, kshape = _shape(q), _shape(k)
    lead = shape[:-2]
    BH = int(np.prod(lead))
    g = _heads_per_pack(BH, shape[-2], kshape[-2], mask, is_causal)
    args = _attention_views(BH, g, ((q, shape), (k, kshape), (v, kshape), (out, shape), (grad_out, shape),
                                    (lse, shape[:-1] + (1,))))
    args, kw = _with_mask(args, {"causal": bool(is_causal), "scale": scale, "heads": g}, mask, lead, shape[-2],
                          kshape[-2])
    return KernelCall(K.sdpa_bwd, args, kw,
                      lambda o: (o[0].reshape(shape), o[1].reshape(kshape), o[2].reshape(kshape)))


def adamw(param, grad, exp_avg, exp_avg_sq, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=1e-2, step=1):
    shape = _shape(param)
    v = _flat2d(shape)
    args = tuple(_re(t, v) for t in (param, grad, exp_avg, exp_avg_sq))
    kw = dict(lr=float(lr), beta1=float(beta1), beta2=float(beta2), eps=float(eps),
              weight_decay=float(weight_decay), step=int(step))
    return KernelCall(K.adamw, args, kw, lambda o: tuple(t.reshape(shape) for t in o))


# -- generated elementwise family, foreach lists ------------------------------------------------
def _out_dtype(name, default):
    return default if name is None else dtype_name(name) if not isinstance(name, str) else name


def pointwise(*xs, expr=("x", 0), out_dtype=None):
    """An elementwise expression over operands broadcast to one shape (see kernels.pointwise)."""
    shape = tuple(np.broadcast_shapes(*(_shape(x) for x in xs)))
    v = _flat2d(shape)
    args = tuple(_re(_bcast(x, shape), v) for x in xs)
    return KernelCall(K.pointwise, args, {"expr": expr, "arity": len(xs),
                                          "out_dtype": _out_dtype(out_dtype, _dt(xs[0]))},
                      lambda o: o.reshape(shape))


def foreach(*xs, expr=("x", 0), arity=1, shared=0, scalars=(), out_dtype=None):
    """One launch for a foreach list: ``shared`` one-element tensors, then ``arity`` operands per list entry
    (each entry's operands broadcast to the first one's shape)."""
    sh, ops = xs[:shared], xs[shared:]
    groups = [ops[i:i + arity] for i in range(0, len(ops), arity)]
    shapes = [_shape(g[0]) for g in groups]
    args = tuple(_re(t, (1, 1)) for t in sh)
    for g, s in zip(groups, shapes):
        v = _flat2d(s)
        args += tuple(_re(_bcast(t, s), v) for t in g)
    kw = {"expr": expr, "arity": arity, "shared": shared, "scalars": tuple(float(s) for s in scalars),
          "out_dtype": _out_dtype(out_dtype, _dt(ops[0]))}

    def post(o):
        outs = o if isinstance(o, tuple) else (o,)
        return tuple(r.reshape(s) for r, s in zip(outs, shapes))
    return KernelCall(K.pointwise, args, kw, post)


def norms(*xs, ord=2.0, out_dtype=None, out_shape=()):
    """Norms over all elements of each operand, one launch for the list."""
    args = tuple(_re(x, _flat2d(_shape(x))) for x in xs)

    def post(o):
        outs = o if isinstance(o, tuple) else (o,)
        return tuple(r.reshape(out_shape) for r in outs)
    return KernelCall(K.norms, args, {"ord": float(ord), "out_dtype": _out_dtype(out_dtype, _dt(xs[0]))}, post)


def row_norms(x, ord=2.0, dims=(), keepdim=False, out_dtype=None):
    """Norms over ``dims``: those dims moved last (a strided view for the DMA) as each kept element's row."""
    xs = _shape(x)
    kept = [d for d in range(len(xs)) if d not in dims]
    R, Kn = int(np.prod([xs[d] for d in kept])), int(np.prod([xs[d] for d in dims]))
    if isinstance(x, TensorSpec):
        x2 = TensorSpec((R, Kn), x.dtype)
    else:
        x2 = np.ascontiguousarray(np.transpose(x, kept + list(dims))).reshape(R, Kn)
    shape = tuple(1 if d in dims else xs[d] for d in range(len(xs))) if keepdim else tuple(xs[d] for d in kept)
    return KernelCall(K.row_norms, (x2,), {"ord": float(ord), "out_dtype": _out_dtype(out_dtype, _dt(x))},
                      lambda o: o.reshape(shape))


# -- data movement --------------------------------------------------------------------------------
def cat(*parts, dim=0):
    """Concatenation along ``dim``: each part viewed as (outer, its extent x inner), one DMA per part."""
    shapes = [_shape(p) for p in parts]
    d = dim % len(shapes[0])
    O = int(np.prod(shapes[0][:d]))
    views = tuple(_re(p, (O, int(np.prod(s[d:])))) for p, s in zip(parts, shapes))
    out_shape = list(shapes[0])
    out_shape[d] = sum(s[d] for s in shapes)
    return KernelCall(K.cat, views, {}, lambda o: o.reshape(out_shape))


def triangle(x, diagonal=0, upper=False):
    """torch.tril / torch.triu: the last two dims are the matrices, the leading ones stacked."""
    shape = _shape(x)
    R, C = shape[-2:]
    B = int(np.prod(shape[:-2]))
    return KernelCall(K.triangle, (_re(x, (B * R, C)),), {"rows": R, "diagonal": int(diagonal), "upper": bool(upper)},
                      lambda o: o.reshape(shape))


def fill(shape=(), value=0.0, out_dtype="float32", high=None):
    if high is None:
        v = _flat2d(tuple(shape))
        kw = {}
    else:
        # Word pairs stay adjacent: a (rows, 2 * pairs per row) view.
        r, c = _flat2d((int(np.prod(shape)) // 2,))
        v, kw = (r, 2 * c), {"high": float(high)}
    return KernelCall(K.fill, (), {"shape": v, "value": float(value), "out_dtype": out_dtype, **kw},
                      lambda o: o.reshape(tuple(shape)))


def arange(n=1, start=0.0, step=1.0, words=False, out_dtype="float32"):
    v = _flat2d((n,))
    return KernelCall(K.arange, (), {"shape": v, "start": float(start), "step": float(step), "words": bool(words),
                                     "out_dtype": out_dtype},
                      lambda o: o.reshape((n, 2) if words else (n,)))


# -- losses and backward passes -------------------------------------------------------------------
def nll_loss(logp, target, reduction="mean", ignore_index=-100):
    s = _shape(logp)
    x = _re(logp, (1, s[0]) if len(s) == 1 else s)
    n = _shape(x)[0]
    kw = {"reduction": reduction, "ignore_index": int(ignore_index)}
    return KernelCall(K.nll_loss, (x, _re(_cast(target, "int32"), (n, 1))), kw,
                      lambda o: (o[0].reshape(() if reduction != "none" else (n,) if len(s) > 1 else ()),
                                 o[1].reshape(())))


def nll_loss_backward(grad, logp, target, total_weight, reduction="mean", ignore_index=-100):
    s = _shape(logp)
    x = _re(logp, (1, s[0]) if len(s) == 1 else s)
    n = _shape(x)[0]
    g = _re(grad, (n, 1) if reduction == "none" else (1, 1))
    kw = {"reduction": reduction, "ignore_index": int(ignore_index)}
    return KernelCall(K.nll_loss_backward, (g, x, _re(_cast(target, "int32"), (n, 1)), _re(total_weight, (1, 1))),
                      kw, lambda o: o.reshape(s))


def _softmax_backward(log):
    def f(grad, y, dim=-1):
        shape = _shape(y)
        d = dim % len(shape) if shape else 0
        gl, yl = _move_last(grad, d), _move_last(y, d)
        ls = _shape(yl)
        v = (int(np.prod(ls[:-1])), ls[-1])
        return KernelCall(K.softmax_backward, (_re(gl, v), _re(yl, v)), {"log": log},
                          lambda o: np.moveaxis(o.reshape(ls), -1, d))
    return f


softmax_backward, log_softmax_backward = _softmax_backward(False), _softmax_backward(True)


def embedding_backward(grad, indices, num_weights=1, padding_idx=-1):
    n = int(np.prod(_shape(indices)))
    D = _shape(grad)[-1]
    return KernelCall(K.embedding_backward, (_re(grad, (n, D)), _re(_cast(indices, "int32"), (n, 1))),
                      {"num_weights": int(num_weights), "padding_idx": int(padding_idx)}, _same)


# The adapters of convolutional nets and of indexing build on the helpers above; the registry
# finds every adapter by name in this module.
from .index_adapters import cumsum, flip, gather, index_add, index_rows, scatter_add, scatter_src, topk  # noqa: E402,F401
from .spatial_adapters import (avg_pool2d, avg_pool2d_backward, batch_norm, batch_norm_backward,  # noqa: E402,F401
                               bilinear_weights, conv, conv_grad_input, conv_grad_weight, group_norm,
                               group_norm_backward, max_pool2d, max_pool2d_backward, upsample_bilinear,
                               upsample_bilinear_backward, upsample_nearest, upsample_nearest_backward,
                               weight_norm, weight_norm_backward)
