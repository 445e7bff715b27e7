"""Native kernels: the ops neuron_kernels' op table serves run "on the device".

For each (op, dtype) in the table, executions are counted as native and their
timeline duration is the kernel's simulated engine schedule for the call's
shapes (timing-only simulation, cached per shape signature). Values come from
the host reference path. A call the kernel's adapter does not cover (shape or
argument outside its notes) runs as a fallback; `native_rejections()` says why.
"""
from __future__ import annotations

import torch

from . import _C

_DTYPES = {
    "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16,
    "float64": torch.float64, "int32": torch.int32, "int64": torch.int64,
}
_C10_NAMES = {"Float": "float32", "BFloat16": "bfloat16", "Half": "float16",
              "Double": "float64", "Int": "int32", "Long": "int64"}
_rejections: dict[tuple[str, str, tuple], str] = {}
_profile = "trn2"


def _executed_names(aten: str) -> list[str]:
    """The names under which the backend executes a table op (functional, out=, in-place)."""
    name, _, overload = aten.partition(".")
    names = [aten, f"{name}.out"]
    inplace = f"{name}_" + (f".{overload}" if overload else "")
    names.append(inplace)
    return names


def _estimate(entry_name: str, c10_dtype: str, shapes: list) -> float:
    import neuron_kernels

    dtype = _C10_NAMES.get(c10_dtype, c10_dtype)
    entry = neuron_kernels.lookup(entry_name, dtype)
    key = (entry_name, dtype, tuple(tuple(s) for s in shapes))
    if entry is None:
        _rejections[key] = f"no kernel for dtype {dtype}"
        return -1.0
    try:
        return float(entry.estimate_ns([tuple(s) for s in shapes], [dtype] * len(shapes),
                                       profile=_profile))
    except Exception as e:  # noqa: BLE001 - any adapter failure means "not covered"
        _rejections[key] = f"{type(e).__name__}: {e}"
        return -1.0


def native_rejections() -> dict[tuple[str, str, tuple], str]:
    """Calls of table ops that ran as fallback, with the adapter's reason."""
    return dict(_rejections)


def install(profile: str) -> int:
    """Registers the op table; returns the number of (op, dtype) pairs made native."""
    global _profile
    _profile = profile
    try:
        import neuron_kernels
    except ImportError:
        return 0
    n = 0
    for aten, dtypes in neuron_kernels.native_ops():
        for d in dtypes:
            if d not in _DTYPES:
                continue
            for executed in _executed_names(aten):
                _C.register_native(executed, aten, _DTYPES[d])
            n += 1
    _C.set_native_estimator(_estimate)
    return n
