# Copyright 2026 The neuron-kernels Authors. Licensed under the Apache License, Version 2.0.
"""Adapters of the indexing, scan and selection kernels (see ``adapters``): row and element gathers,
scatters, index_add, topk, flip and cumsum. Layout changes are host-side views."""

from __future__ import annotations

import numpy as np

from . import kernels as K
from .adapters import KernelCall, _cast, _dt, _move_first, _move_last, _out_dtype, _re, _shape
from .language import TensorSpec


def index_rows(x, indices, rows=1):
    """x[indices] for one index tensor on dim 0: x as (rows, rest) rows gathered; the result has
    shape indices.shape + x.shape[1:] (64-bit elements arrive as int32 word pairs)."""
    ishape = _shape(indices)
    n = int(np.prod(ishape)) if ishape else 1
    x2 = _re(x, (rows, int(np.prod(_shape(x))) // max(rows, 1)))
    # a 1-D x's rows are single elements (or one element's two words)
    rest = tuple(_shape(x)[1:]) if len(_shape(x)) > 1 else ((x2.shape[1],) if x2.shape[1] > 1 else ())
    return KernelCall(K.take_rows, (x2, _re(_cast(indices, "int32"), (n, 1))), {},
                      lambda o: o.reshape(ishape + rest))


def gather(x, index, dim=0):
    """torch.gather: ``dim`` moved last (a strided view for the DMA), x cut to the index's other
    sizes, one row per index row."""
    xs, ishape = _shape(x), _shape(index)
    lead = tuple(ishape[:dim] + ishape[dim + 1:])
    R, J = int(np.prod(lead)) if lead else 1, ishape[dim]
    if isinstance(x, TensorSpec):
        x2 = TensorSpec((R, xs[dim]), x.dtype)
    else:
        xm = np.moveaxis(x, dim, -1)
        x2 = np.ascontiguousarray(xm[tuple(slice(0, n) for n in lead)]).reshape(R, xs[dim])
    i2 = _re(_cast(_move_last(index, dim), "int32"), (R, J))
    return KernelCall(K.gather_last, (x2, i2), {}, lambda o: np.moveaxis(o.reshape(lead + (J,)), -1, dim))


def _scatter(reduce):
    def f(x, index, src, dim=0):
        """Tensor.scatter_add / scatter (src form) along ``dim`` (moved last): the index covers every
        row of x; src is cut to the index's sizes."""
        xs, ishape = _shape(x), _shape(index)
        R, C, J = int(np.prod(xs)) // xs[dim], xs[dim], ishape[dim]
        if isinstance(src, TensorSpec):
            s2 = TensorSpec((R, J), src.dtype)
        else:
            sm = np.moveaxis(src, dim, -1)
            s2 = np.ascontiguousarray(sm[tuple(slice(0, n) for n in _shape(_move_last(index, dim)))]).reshape(R, J)
        x2 = _re(_move_last(x, dim), (R, C))
        i2 = _re(_cast(_move_last(index, dim), "int32"), (R, J))
        moved = tuple(_shape(_move_last(x, dim)))
        return KernelCall(K.scatter_last, (x2, i2, s2), {"reduce": reduce},
                          lambda o: np.moveaxis(o.reshape(moved), -1, dim))
    return f


scatter_add, scatter_src = _scatter("add"), _scatter("set")


def index_add(x, index, src, dim=0, alpha=1.0):
    """Tensor.index_add: ``dim`` moved first (rows), the other dims flattened."""
    moved = (_shape(x)[dim],) + tuple(s for k, s in enumerate(_shape(x)) if k != dim)
    xm = _re(_move_first(x, dim), (moved[0], int(np.prod(moved[1:]))))
    sm = _move_first(src, dim)
    s2 = _re(sm, (_shape(sm)[0], int(np.prod(_shape(sm)[1:]))))
    i2 = _re(_cast(index, "int32"), (_shape(index)[0] if _shape(index) else 1, 1))
    return KernelCall(K.index_add_rows, (xm, i2, s2), {"alpha": float(alpha)},
                      lambda o: np.moveaxis(o.reshape(moved), 0, dim))


def topk(x, k=1, dim=-1, largest=True, keepdim=True):
    """torch.topk (and max.dim / min.dim with k = 1): ``dim`` moved last; (values, int64 indices).
    Without ``keepdim`` (max.dim) the picked dim is dropped."""
    xs = _shape(x)
    dim = dim % len(xs)
    moved = xs[:dim] + xs[dim + 1:]
    R = int(np.prod(moved)) if moved else 1
    x2 = _re(_move_last(x, dim), (R, xs[dim]))

    def post(o):
        vals, idx = o[0].reshape(moved + (k,)), o[1].view(np.int64).reshape(moved + (k,))
        if not keepdim:
            return vals[..., 0], idx[..., 0]
        return np.moveaxis(vals, -1, dim), np.moveaxis(idx, -1, dim)
    return KernelCall(K.topk_rows, (x2,), {"k": int(k), "largest": bool(largest)}, post)


def _dims_last(x, dims):
    """x with ``dims`` moved last and flattened to one axis: (view (R, L), the moved shape, the inverse
    permutation) -- a strided access pattern for the DMA."""
    xs = _shape(x)
    kept = [d for d in range(len(xs)) if d not in dims]
    perm = kept + list(dims)
    R, L = int(np.prod([xs[d] for d in kept])), int(np.prod([xs[d] for d in dims]))
    x2 = TensorSpec((R, L), x.dtype) if isinstance(x, TensorSpec) else \
        np.ascontiguousarray(np.transpose(x, perm)).reshape(R, L)
    return x2, tuple(xs[d] for d in perm), tuple(np.argsort(perm))


def flip(x, dims=()):
    """torch.flip: the flipped dims moved last and flattened (reversing the flattened axis reverses each)."""
    x2, moved, inv = _dims_last(x, sorted(dims))
    return KernelCall(K.reverse_last, (x2,), {}, lambda o: np.transpose(o.reshape(moved), inv))


def cumsum(x, dim=0, out_dtype=None):
    x2, moved, inv = _dims_last(x, [dim])
    return KernelCall(K.cumsum_last, (x2,), {"out_dtype": _out_dtype(out_dtype, _dt(x))},
                      lambda o: np.transpose(o.reshape(moved), inv))
