# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""Device-numerics mode: a native call's values come from its tile kernel (ISA simulator).

The CPU kernel still runs first (it allocates and shapes the outputs); then the kernel reads
its operands through zero-copy host views of their storage and its results overwrite the
outputs. TORCH_NEURON_DEVICE_NUMERICS=1 at import or ``set_device_numerics(True)`` turns it on.
"""
from __future__ import annotations

import numpy as np
import torch

from .. import _C
from . import binders, estimate
from .binders import AsFloat, Checked
from .bridge import NotCovered, from_numpy, host_view, name_of_c10

NUMERICS_ENV = "TORCH_NEURON_DEVICE_NUMERICS"
_executions: dict[tuple[str, str], int] = {}
installed = False
_enabled = False
# Callables that see every native call (op, entry, dtype, inputs, args, results) before its
# values are recomputed: recording a model's native calls for replay (``recording``).
_observers: list = []


def _operand(t) -> np.ndarray:
    """A kernel operand as numpy: a view of the tensor's bytes unless it must be converted."""
    if isinstance(t, Checked):
        t.check()
    as_float = isinstance(t, AsFloat)
    words = binders.operand_shape(t) if isinstance(t, binders.AsWords) else None
    t = binders.unwrap(t).detach()
    if as_float:
        t = t.float()
    t = t.resolve_conj().resolve_neg()
    if not t.is_contiguous():
        t = t.contiguous()
    v = host_view(t)
    if words is not None:
        return v.reshape(-1).view(np.int32).reshape(words)
    if v.dtype == np.bool_:
        return v.view(np.uint8)   # bool is carried as uint8 0/1
    return v


def _write(target: torch.Tensor, value) -> None:
    arr = np.ascontiguousarray(value)
    if target.is_contiguous() and target.numel() and arr.size != target.numel() and \
            arr.nbytes == target.numel() * target.element_size() and arr.dtype == np.int32:
        # 64-bit results written as int32 word pairs (the dtype policy's AsWords)
        np.copyto(host_view(target).reshape(-1).view(np.int32), arr.reshape(-1))
        return
    if arr.size != target.numel():
        raise RuntimeError(f"the kernel returned {arr.shape} ({arr.size} elements) for a result of "
                           f"shape {tuple(target.shape)}")
    if target.is_contiguous() and target.numel():
        view = host_view(target)
        if view.dtype == arr.dtype:
            np.copyto(view, arr.reshape(view.shape))
            return
        if view.dtype == np.bool_ and arr.dtype == np.uint8:
            np.copyto(view.view(np.uint8), arr.reshape(view.shape) != 0)
            return
    target.copy_(from_numpy(arr).reshape(target.shape))


def execute(op: str, entry_name: str, c10_dtype: str, inputs: list, args: list, results: list) -> None:
    """Recomputes a native call's results with its tile kernel (called from host execution)."""
    import neuron_kernels

    dtype = name_of_c10(c10_dtype)
    shapes = binders.tensor_shapes(inputs)
    try:
        entry = neuron_kernels.lookup(entry_name, dtype)
        if entry is None:
            raise NotCovered(f"no kernel for dtype {dtype}")
        with torch.no_grad():
            launches = binders.bind(op, entry, dtype, inputs, results, args)
            for ln in launches:
                kernel = binders.kernel_of(ln, entry, dtype)
                arrays = [None if t is None else _operand(t) for t in ln.tensors]
                out = kernel.run(*arrays, **estimate.attrs(ln, True))
                outs = out if isinstance(out, tuple) else (out,)
                if len(outs) < len(ln.targets):
                    raise RuntimeError(f"the kernel returned {len(outs)} results for {len(ln.targets)} outputs")
                for target, value in zip(ln.targets, outs):
                    if target is not None:
                        _write(target, value)
            for ln in launches:
                key = (ln.entry or entry_name, dtype)
                _executions[key] = _executions.get(key, 0) + 1
    except Exception as e:  # noqa: BLE001 - reported with the op, its shapes and the switch
        kind = "is outside the kernel's coverage" if isinstance(e, NotCovered) else "failed"
        raise RuntimeError(
            f"neuron device numerics ({NUMERICS_ENV}=1): the tile kernel of {op} ({dtype}, "
            f"argument shapes {list(shapes)}) {kind}: {type(e).__name__}: {e}. Unset {NUMERICS_ENV} "
            "(or call torch_neuron.set_device_numerics(False)) to take this op's values from the host "
            "reference path.") from None


def _observe_and_execute(op, entry_name, c10_dtype, inputs, args, results) -> None:
    for observe in tuple(_observers):
        observe(op, entry_name, c10_dtype, inputs, args, results)
    if _enabled:
        execute(op, entry_name, c10_dtype, inputs, args, results)


def _install_executor() -> None:
    # The backend calls the executor only when one is set: none at all keeps its fast paths.
    if _observers:
        _C.set_native_executor(_observe_and_execute)
    elif _enabled:
        _C.set_native_executor(execute)
    else:
        _C.set_native_executor(None)


def set_device_numerics(enabled: bool) -> None:
    """Device-numerics mode: native ops' values come from their tile kernels (ISA simulator).

    Much slower than the host reference path (the simulator interprets every instruction);
    meant for checking kernels and low-precision numerics on small models.
    """
    global _enabled
    if enabled and not installed:
        raise RuntimeError(f"{NUMERICS_ENV}=1 / set_device_numerics(True) needs neuron_kernels "
                           "(pip install neuron-kernels): no native kernels are registered")
    _enabled = bool(enabled)
    _install_executor()


def add_observer(fn) -> None:
    """Calls ``fn(op, entry, dtype, inputs, args, results)`` on every native call, device numerics
    on or off: ``inputs`` are the call's arguments in schema order as host tensors (copies taken
    before the call for the arguments it writes), ``results`` its returns."""
    _observers.append(fn)
    _install_executor()


def remove_observer(fn) -> None:
    _observers.remove(fn)
    _install_executor()


def device_numerics_enabled() -> bool:
    return _enabled


def device_numerics_stats() -> dict[tuple[str, str], int]:
    """Tile-kernel executions in device-numerics mode: (op-table entry, dtype) -> launches.

    Keyed by the kernel that ran: aten::abs.out runs aten::abs's kernel, ``x + 2.5``
    (aten::add.Tensor with a number) runs aten::add.Scalar's."""
    return dict(_executions)


def clear_device_numerics_stats() -> None:
    _executions.clear()
