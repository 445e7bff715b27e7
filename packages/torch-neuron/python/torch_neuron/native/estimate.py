# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""Device time of a native call: its kernel's simulated engine schedule (timing only).

The backend asks once per call signature (shapes, dtypes, attribute values; cached in C++);
-1 means the call runs as a fallback, and ``native_rejections()`` keeps the reason.
"""
from __future__ import annotations

from . import binders
from .binders import AsFloat, Deferred, Launch
from .bridge import NotCovered, name_of_c10, operand_dtype

_rejections: dict[tuple[str, str, tuple], str] = {}
profile = "trn2"


def spec_dtype(t) -> str:
    """The element type a kernel operand is traced with."""
    if isinstance(t, AsFloat):
        return "float32"
    if isinstance(t, binders.AsWords):
        return "int32"
    return operand_dtype(binders.unwrap(t).dtype)


def attrs(launch: Launch, running: bool) -> dict:
    """A launch's attributes: their values when running, representatives when timing."""
    out = {k: (v.read() if running else v.placeholder) if isinstance(v, Deferred) else v
           for k, v in launch.attrs.items()}
    if not running:
        # A kernel's schedule depends on whether a constant is 0 or 1 (an instruction it can
        # skip), not on its value; one representative keeps lr schedules, eps, ... from
        # re-simulating the schedule (the C++ signature classifies numbers the same way).
        out = {k: 0.5 if isinstance(v, float) and v not in (0.0, 1.0) else v for k, v in out.items()}
    return out


def _hbm_bytes() -> int:
    global _hbm
    if _hbm is None:
        import torch

        _hbm = int(torch.neuron.get_device_properties(0).total_memory)
    return _hbm


_hbm = None


def _check_fits(op: str, tensors) -> None:
    """Operands larger than the device's HBM (an expanded, stride-0 input can be) cannot run, and
    simulating their schedule tile by tile would take hours: the call falls back, and its
    allocation raises torch.OutOfMemoryError."""
    nbytes = sum(binders.unwrap(t).numel() * binders.unwrap(t).element_size() for t in tensors if t is not None)
    if nbytes > _hbm_bytes():
        raise NotCovered(f"{op}: operands of {nbytes} bytes exceed the device's {_hbm_bytes()} bytes of HBM")


def estimate(op: str, entry_name: str, c10_dtype: str, args: list):
    """Simulated device ns of one call of ``op`` served by table entry ``entry_name`` and the busy
    ns of each engine (tensor, vector, scalar, gpsimd, dma), or -1 when the call is not covered."""
    import neuron_kernels

    dtype = name_of_c10(c10_dtype)
    key = (op, dtype, binders.tensor_shapes(args))
    entry = neuron_kernels.lookup(entry_name, dtype)
    if entry is None:
        _rejections[key] = f"no kernel for dtype {dtype}"
        return -1.0
    try:
        total = 0.0
        busy = [0.0] * 5
        for ln in binders.bind(op, entry, dtype, args):
            kernel = binders.kernel_of(ln, entry, dtype)
            shapes = [None if t is None else binders.operand_shape(t) for t in ln.tensors]
            _check_fits(op, ln.tensors)
            dtypes = ["float32" if t is None else spec_dtype(t) for t in ln.tensors]
            ns, engines = kernel.estimate_engines_ns(shapes, dtypes, profile=profile, **attrs(ln, False))
            total += float(ns)
            busy = [b + e for b, e in zip(busy, engines)]
        return total, tuple(busy)
    except Exception as e:  # noqa: BLE001 - any binding or adapter failure means "not covered"
        _rejections[key] = str(e) if isinstance(e, NotCovered) else f"{type(e).__name__}: {e}"
        return -1.0


def native_rejections() -> dict[tuple[str, str, tuple], str]:
    """Calls of table ops that ran as fallback: (op, dtype, argument shapes) -> the reason."""
    return dict(_rejections)
