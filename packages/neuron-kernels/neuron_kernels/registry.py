# Copyright 2026 The neuron-kernels Authors. Licensed under the Apache License, Version 2.0.
"""The op table (op_table.yaml) as Python objects: ATen op + dtype -> kernel entry."""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import Any

import yaml

from . import adapters
from .language import TensorSpec

_TABLE = os.path.join(os.path.dirname(__file__), "op_table.yaml")


def _norm_dtype(dtype) -> str:
    s = str(dtype)
    return s[len("torch."):] if s.startswith("torch.") else s


def _freeze(v):
    if isinstance(v, (list, tuple)):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _freeze(x)) for k, x in v.items()))
    return v


@dataclasses.dataclass(frozen=True)
class OpEntry:
    """One native op: ``run`` executes its kernel, ``estimate_ns`` times it without data."""

    aten: str
    adapter: str
    dtypes: tuple
    notes: str = ""
    # The row's other columns (how torch_neuron binds, executes and costs the op), uninterpreted here.
    columns: dict = dataclasses.field(default_factory=dict, compare=False, hash=False)

    @property
    def _adapt(self):
        return getattr(adapters, self.adapter)

    def launch(self, *args, **attrs) -> adapters.KernelCall:
        return self._adapt(*args, **attrs)

    def run(self, *arrays, **attrs):
        """Execute the kernel functionally on numpy arrays; returns the op's result(s) as numpy arrays."""
        ln = self.launch(*arrays, **attrs)
        return ln.post(ln.kernel(*ln.args, **ln.kwargs))

    def estimate_ns(self, shapes, dtypes, profile: str = "trn2", **attrs) -> float:
        """Simulated device time (ns) of the kernel for arguments of these shapes and dtypes (timing only).

        ``shapes``/``dtypes`` list the op's tensor arguments in order; a None shape stands for an absent
        optional tensor. Cached per (shapes, dtypes, profile, attributes).
        """
        if isinstance(dtypes, str):
            dtypes = [dtypes] * len(shapes)
        return _estimate(self, tuple(None if s is None else tuple(s) for s in shapes),
                         tuple(_norm_dtype(d) for d in dtypes), profile, _freeze(attrs))

    def estimate_engines_ns(self, shapes, dtypes, profile: str = "trn2", **attrs) -> tuple:
        """(latency ns, busy ns of tensor, vector, scalar, gpsimd, dma) of the kernel's schedule;
        cached like ``estimate_ns``."""
        if isinstance(dtypes, str):
            dtypes = [dtypes] * len(shapes)
        return _estimate_engines(self, tuple(None if s is None else tuple(s) for s in shapes),
                                 tuple(_norm_dtype(d) for d in dtypes), profile, _freeze(attrs))

    def schedule(self, shapes, dtypes, profile: str = "trn2", **attrs):
        """The full timing-only schedule (engine timeline, utilisation, trace) for these shapes."""
        if isinstance(dtypes, str):
            dtypes = [dtypes] * len(shapes)
        specs = [None if s is None else TensorSpec(tuple(s), _norm_dtype(d)) for s, d in zip(shapes, dtypes)]
        ln = self.launch(*specs, **attrs)
        return ln.kernel.schedule(*ln.args, profile=profile, **ln.kwargs)


@functools.lru_cache(maxsize=4096)
def _estimate_engines(entry: OpEntry, shapes, dtypes, profile, attrs) -> tuple:
    s = entry.schedule(shapes, dtypes, profile, **dict(attrs))
    return s.latency_ns, tuple(float(s.busy_ns.get(k, 0.0)) for k in ("tensor", "vector", "scalar", "gpsimd", "dma"))


def _estimate(entry: OpEntry, shapes, dtypes, profile, attrs) -> float:
    return _estimate_engines(entry, shapes, dtypes, profile, attrs)[0]


@functools.lru_cache(maxsize=1)
def table() -> dict[str, OpEntry]:
    """All entries keyed by ATen op name, from op_table.yaml."""
    with open(_TABLE) as f:
        data = yaml.safe_load(f)
    out = {}
    for e in data["ops"]:
        rest = {k: v for k, v in e.items() if k not in ("aten", "adapter", "dtypes", "notes")}
        entry = OpEntry(e["aten"], e["adapter"], tuple(e["dtypes"]), e.get("notes", ""), rest)
        if not hasattr(adapters, entry.adapter):
            raise ValueError(f"op_table.yaml: {entry.aten} names adapter {entry.adapter!r}, "
                             f"which neuron_kernels/adapters.py does not define")
        out[entry.aten] = entry
    return out


def lookup(aten_op: str, dtype: Any) -> OpEntry | None:
    """The kernel entry for ``aten_op`` (e.g. "aten::mm", "aten::add.Tensor") at ``dtype``, or None."""
    e = table().get(aten_op)
    if e is None or _norm_dtype(dtype) not in e.dtypes:
        return None
    return e


def native_ops() -> list[tuple[str, tuple]]:
    """(op, dtypes) for every native op, in table order."""
    return [(e.aten, e.dtypes) for e in table().values()]


