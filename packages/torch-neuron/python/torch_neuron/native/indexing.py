# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""Binders of the indexing, scan and selection kernels: x[idx], gather, scatter, index_add and
index_put, topk / max.dim / min.dim, cumsum and flip. Integer index operands are read as their low
words; positions a kernel finds are written as int64 (int32 word pairs), as the dtype policy says
(``families``)."""
from __future__ import annotations

from .binders import Call, NotCovered
from .families import _index, _number, isa_result, words_if_wide


def _bind_topk(c: Call):
    """topk, and max.dim / min.dim as its k = 1 case; indices written as int64 (int32 word pairs)."""
    x = c.tensor("self")
    if x.dim() == 0:
        raise NotCovered("0-dim input")
    d = int(c["dim"]) % x.dim()
    if c.kind == "topk":      # sorted=False leaves the order open: sorted is one
        attrs = {"k": int(c["k"]), "largest": bool(c["largest"]), "keepdim": True}
    else:
        attrs = {"k": 1, "largest": c.kind == "max", "keepdim": bool(c["keepdim"])}
    if not 0 < attrs["k"] <= x.shape[d]:
        raise NotCovered(f"k={attrs['k']} of {x.shape[d]}")
    return [c.launch((x,), dict(attrs, dim=d), targets=(0, 1))]


def _bind_flip(c: Call):
    x = c.operand(c["self"], "self", dtype=c["self"].dtype)
    if x.dim() == 0:
        raise NotCovered("0-dim input")
    return [c.launch((x,), {"dims": tuple(sorted({int(d) % x.dim() for d in c["dims"]}))})]


def _bind_cumsum(c: Call):
    x = c.tensor("self")
    if c["dtype"] is not None and c["dtype"] != x.dtype:
        raise NotCovered(f"dtype={c['dtype']} (a conversion)")
    if x.dim() == 0:
        raise NotCovered("0-dim input")
    return [c.launch((x,), {"dim": int(c["dim"]) % x.dim(), "out_dtype": isa_result(x.dtype)})]


def _bind_index(c: Call):
    """x[idx]: one integer index tensor on dim 0 gathers rows; masks and several index tensors
    (their result's size or layout depends on the values) stay on the host."""
    x = c.operand(c["self"], "self", dtype=c["self"].dtype)
    idx = list(c["indices"])
    if len(idx) != 1 or idx[0] is None:
        raise NotCovered(f"{len(idx)} index entries ({['None' if i is None else 'tensor' for i in idx]}); "
                         "the kernel gathers rows for one index tensor on dim 0")
    i = _index(c, "indices", x, idx[0])
    return [c.launch((words_if_wide(x), i), {"rows": int(x.shape[0])})]


def _bind_gather(c: Call):
    x = c.operand(c["self"], "self", dtype=c["self"].dtype)
    if c["sparse_grad"]:
        raise NotCovered("sparse_grad=True")
    idx = _index(c, like=x)
    if idx.dim() != x.dim():
        raise NotCovered(f"a {idx.dim()}-D index for a {x.dim()}-D input")
    return [c.launch((x, idx), {"dim": int(c["dim"]) % x.dim()})]


def _bind_scatter(c: Call):
    x = c.tensor("self")
    src = c.tensor("src")
    idx = _index(c, like=x)
    d = int(c["dim"]) % max(x.dim(), 1)
    if not (idx.dim() == x.dim() == src.dim()) or x.dim() == 0:
        raise NotCovered("index, self and src of different ranks")
    if any(idx.shape[k] != x.shape[k] for k in range(x.dim()) if k != d):
        raise NotCovered(f"an index of shape {tuple(idx.shape)} covering part of self's {tuple(x.shape)} rows")
    if c.a.get("reduce") is not None:
        raise NotCovered(f"reduce={c['reduce']!r}")
    return [c.launch((x, idx, src), {"dim": d})]


def _bind_index_add(c: Call):
    x, src = c.tensor("self"), c.tensor("source")
    idx = _index(c, like=x)
    if idx.dim() > 1:
        raise NotCovered(f"an index of shape {tuple(idx.shape)}")
    if x.dim() == 0 or src.dim() != x.dim():
        raise NotCovered("0-dim self or a source of another rank")
    return [c.launch((x, idx, src), {"dim": int(c["dim"]) % x.dim(), "alpha": _number(c["alpha"])})]


def _bind_index_put(c: Call):
    """x[idx] += values with one integer index tensor on dim 0 (index's backward): index_add's kernel.
    Without accumulate, repeated indices leave the result to the order of the writes: host."""
    x, values = c.tensor("self"), c.tensor("values")
    if not c["accumulate"]:
        raise NotCovered("accumulate=False (with repeated indices the last write is the host's order)")
    idx = list(c["indices"])
    if len(idx) != 1 or idx[0] is None or idx[0].dim() != 1:
        raise NotCovered("indices other than one 1-D integer tensor on dim 0")
    i = _index(c, "indices", x, idx[0])
    if tuple(values.shape) != (i.shape[0],) + tuple(x.shape[1:]):
        raise NotCovered(f"values of shape {tuple(values.shape)} (broadcast) for rows of {tuple(x.shape[1:])}")
    return [c.launch((x, i, values), {"dim": 0, "alpha": 1.0}, adapter="index_add")]


INDEXING_BINDERS = {
    "index": _bind_index,
    "gather": _bind_gather,
    "scatter": _bind_scatter,
    "index_add": _bind_index_add,
    "index_put": _bind_index_put,
    "topk": _bind_topk,
    "flip": _bind_flip,
    "cumsum": _bind_cumsum,
}
