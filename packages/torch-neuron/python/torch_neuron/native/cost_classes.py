# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""Host cost classes: which engine a call the backend runs on the host would use on the device.

An op with a row in neuron_kernels' op table takes the row's ``cost_class`` column (for the row's
op and every overload in ``executed_as``). Ops the backend only ever runs on the host have no
row; the tensor-engine ones among them are listed here, and a row for one of them must come
with its removal from this list (``register`` refuses the duplicate). Every other op costs as
elementwise (VectorE).
"""
from __future__ import annotations

from .. import _C

# Contractions without a kernel row: costed at the TensorE peak, 2 * out * K flops.
HOST_ONLY_MATMUL = (
    "aten::dot", "aten::vdot", "aten::mv", "aten::mv.out", "aten::addmv", "aten::addmv.out",
    "aten::addmv_", "aten::baddbmm", "aten::baddbmm.out", "aten::baddbmm_", "aten::addbmm",
    "aten::addbmm.out", "aten::addbmm_", "aten::_addmm_activation", "aten::_addmm_activation.out",
    "aten::_int_mm", "aten::_int_mm.out", "aten::dot.out", "aten::vdot.out",
)


def classes(table) -> dict[str, str]:
    """Overload -> cost class, from the table's rows and the host-only contractions."""
    from .install import executed_as

    out: dict[str, str] = {}
    for entry in table.values():
        cls = entry.columns.get("cost_class", "elementwise")
        for name in executed_as(entry):
            out[name] = cls
    for name in HOST_ONLY_MATMUL:
        if name in out:
            raise ValueError(f"{name} has an op_table.yaml row (cost_class {out[name]!r}) and is also in "
                             f"torch_neuron.native.cost_classes.HOST_ONLY_MATMUL; remove it from the list")
        out[name] = "matmul"
    return out


def register(table) -> int:
    """Hands every class to the backend; returns how many overloads were classed."""
    cls = classes(table)
    for name, c in cls.items():
        _C.set_cost_class(name, c)
    return len(cls)
