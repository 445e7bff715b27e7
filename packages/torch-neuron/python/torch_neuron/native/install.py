# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""Registering neuron_kernels' op table with the backend.

Every (overload, dtype) a table row executes as (the row's op and its ``executed_as``
column: out= and in-place forms, the PrivateUse1 entry points torch calls instead) is
counted native and timed by ``estimate``; the binding decides per call.
"""
from __future__ import annotations

import torch

from .. import _C
from . import binders, cost_classes, estimate, numerics
from .bridge import DTYPES, table_name


def executed_as(entry) -> list[str]:
    """The overloads the backend executes as ``entry``'s op: its own and the table's column."""
    return [entry.aten, *entry.columns.get("executed_as", ())]


def same_argument_overloads(aten: str) -> list[str]:
    """The out= and in-place forms of ``aten`` with its (non-out) arguments, from torch's schemas:
    what the table's executed_as column must list besides entry points of other names.

    Matching by arguments keeps e.g. aten::add.out (Tensor other) off add.Scalar and maps
    sum.dim_IntList to sum.IntList_out, not to the full reduction sum.out.
    """
    def signature(s, skip_out):
        return [(a.name, str(a.type)) for a in s.arguments if not (skip_out and a.is_out)]

    base = aten.partition(".")[0]
    want = signature(binders.schema(aten), False)
    names = []
    for name in (base, base + "_"):
        for s in torch._C._jit_get_schemas_for_operator(name):
            full = f"{name}.{s.overload_name}" if s.overload_name else name
            is_out = any(a.is_out for a in s.arguments)
            if full == aten or (name == base) != is_out:   # out= forms of op; in-place forms of op_
                continue
            if signature(s, True) == want:
                names.append(full)
    return names


def install(profile: str) -> int:
    """Registers the op table; returns the number of (op, dtype) pairs made native."""
    estimate.profile = profile
    try:
        import neuron_kernels
    except ImportError:
        return 0
    known = {table_name(d.torch): d.torch for d in DTYPES}
    cost_classes.register(neuron_kernels.table())
    n = 0
    for entry in neuron_kernels.table().values():
        names = executed_as(entry)
        for d in entry.dtypes:
            if d not in known:
                continue
            for executed in names:
                _C.register_native(executed, entry.aten, known[d])
            n += 1
    _C.set_native_estimator(estimate.estimate)
    numerics.installed = True
    return n
