# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""Recording the native calls a program makes, with their arguments, for replay elsewhere.

    with NativeCallRecorder() as rec:
        train_one_step(model)                  # on device "neuron"
    for (overload, dtype), r in rec.calls.items():
        r.call.replay("cpu"); r.call.replay("neuron")

The recorder observes the backend's own native accounting (``numerics.add_observer``): it sees
exactly the overloads that executed natively, with the arguments the backend received (in
schema order; copies taken before the call for the arguments the call writes). It keeps one call
per (overload, dtype), the most ragged one (``raggedness``), as CPU copies that preserve each
tensor's sizes and strides.

A call is *ragged* when the largest tensor it reads or writes (by element count) has an element count that
is not a multiple of 128, the partition count of the tile kernels ("elements"), or else one of its
dimensions that is not ("dimension"): the kernel's tiling then has a partial tile.
"""
from __future__ import annotations

import dataclasses

import torch

from . import numerics

PARTITIONS = 128
# A call of up to this many elements in its largest tensor is preferred over a larger one of the
# same raggedness: large enough to span several partition rows, small enough for the simulator.
_PREFERRED_NUMEL = 16384


@dataclasses.dataclass
class TensorArgument:
    """A tensor argument as CPU bytes: the storage span it covers, with its sizes and strides."""
    span: torch.Tensor
    size: tuple
    stride: tuple

    @classmethod
    def capture(cls, t: torch.Tensor) -> TensorArgument:
        t = t.detach()
        size, stride = tuple(t.shape), tuple(t.stride())
        if t.numel() == 0:
            return cls(torch.empty(0, dtype=t.dtype), size, tuple(0 for _ in size))
        extent = 1 + sum((n - 1) * s for n, s in zip(size, stride))
        span = t.as_strided((extent,), (1,), t.storage_offset()).clone()
        return cls(span, size, stride)

    def on(self, device) -> torch.Tensor:
        return self.span.to(device, copy=True).as_strided(self.size, self.stride, 0)

    @property
    def dtype(self) -> torch.dtype:
        return self.span.dtype


def _capture(v):
    if isinstance(v, torch.Tensor):
        return TensorArgument.capture(v)
    if isinstance(v, (list, tuple)):
        return [_capture(x) for x in v]
    return v


def _materialize(v, device):
    if isinstance(v, TensorArgument):
        return v.on(device)
    if isinstance(v, list):
        return [_materialize(x, device) for x in v]
    if isinstance(v, torch.device):
        return torch.device(device)
    return v


def _tensors(v):
    if isinstance(v, TensorArgument):
        yield v
    elif isinstance(v, list):
        for x in v:
            yield from _tensors(x)


def aten_overload(name: str):
    """``"aten::add.Tensor"`` -> ``torch.ops.aten.add.Tensor`` (``.default`` when unnamed)."""
    ns, _, rest = name.partition("::")
    op, _, overload = rest.partition(".")
    return getattr(getattr(getattr(torch.ops, ns), op), overload or "default")


@dataclasses.dataclass
class RecordedCall:
    """One call of an ATen overload: its arguments in schema order, tensors as CPU copies, and the
    sizes of its tensor results."""
    overload: str
    arguments: list
    result_sizes: list = dataclasses.field(default_factory=list)

    @classmethod
    def capture(cls, overload: str, inputs, results=()) -> RecordedCall:
        return cls(overload, [_capture(v) for v in inputs], _result_sizes(results))

    def shapes(self) -> list:
        """The tensor arguments' shapes (nested lists for tensor-list arguments, None for others)."""
        def shape(v):
            if isinstance(v, TensorArgument):
                return list(v.size)
            if isinstance(v, list) and any(isinstance(x, (TensorArgument, list)) for x in v):
                return [shape(x) for x in v]
            return None
        return [s for s in (shape(v) for v in self.arguments) if s is not None]

    def largest(self) -> tuple | None:
        """The sizes of the largest tensor the call reads or writes (arguments and results)."""
        sizes = [t.size for t in _tensors(self.arguments)] + [tuple(s) for s in self.result_sizes]
        return max(sizes, key=_numel) if sizes else None

    def raggedness(self) -> str | None:
        """"elements", "dimension" or None (see the module's docstring)."""
        size = self.largest()
        if size is None:
            return None
        if _numel(size) % PARTITIONS:
            return "elements"
        if any(n % PARTITIONS for n in size):
            return "dimension"
        return None

    def preference(self) -> tuple:
        """Larger is preferred: ragged, spanning more than one partition row, by elements, size."""
        size = self.largest()
        numel = _numel(size) if size is not None else 0
        kind = self.raggedness()
        return (kind is not None, min(numel, _PREFERRED_NUMEL) > PARTITIONS, kind == "elements",
                min(numel, _PREFERRED_NUMEL))

    def arguments_on(self, device) -> tuple[list, dict]:
        """Positional and keyword arguments for calling the overload with tensors on ``device``."""
        schema = aten_overload(self.overload)._schema
        args, kwargs = [], {}
        for a, v in zip(schema.arguments, self.arguments):
            v = _materialize(v, device)
            if isinstance(v, int) and not isinstance(v, bool) and "ScalarType" in str(a.type):
                v = _DTYPES_BY_CODE[v]
            if a.kwarg_only:
                kwargs[a.name] = v
            else:
                args.append(v)
        return args, kwargs

    def replay(self, device):
        """Calls the overload on ``device``; returns (result, the arguments it was given)."""
        args, kwargs = self.arguments_on(device)
        return aten_overload(self.overload)(*args, **kwargs), (args, kwargs)


def _numel(size) -> int:
    n = 1
    for s in size:
        n *= s
    return n


# c10::ScalarType codes, as a call's dtype arguments arrive from the backend.
_DTYPES_BY_CODE = {
    0: torch.uint8, 1: torch.int8, 2: torch.int16, 3: torch.int32, 4: torch.int64, 5: torch.float16,
    6: torch.float32, 7: torch.float64, 11: torch.bool, 15: torch.bfloat16,
}


@dataclasses.dataclass
class Recorded:
    call: RecordedCall
    executions: int = 0


class NativeCallRecorder:
    """Records, while active, one call per (overload, dtype) that executed natively."""

    def __init__(self):
        self.calls: dict[tuple[str, str], Recorded] = {}

    def _observe(self, op, entry_name, c10_dtype, inputs, args, results) -> None:
        key = (op, c10_dtype)
        have = self.calls.get(key)
        if have is not None:
            have.executions += 1
            candidate = RecordedCall(op, [_shape_only(v) for v in inputs], _result_sizes(results))
            if candidate.preference() <= have.call.preference():
                return
        call = RecordedCall.capture(op, inputs, results)
        self.calls[key] = Recorded(call, 1 if have is None else have.executions)

    def __enter__(self) -> NativeCallRecorder:
        numerics.add_observer(self._observe)
        return self

    def __exit__(self, *exc) -> None:
        numerics.remove_observer(self._observe)


def _result_sizes(results) -> list:
    out = []
    for r in results:
        for t in (r if isinstance(r, (list, tuple)) else (r,)):
            if isinstance(t, torch.Tensor):
                out.append(list(t.shape))
    return out


def _shape_only(v):
    # Raggedness needs sizes only: no bytes are copied for a call that is not kept.
    if isinstance(v, torch.Tensor):
        return TensorArgument(torch.empty(0, dtype=v.dtype), tuple(v.shape), tuple(v.stride()))
    if isinstance(v, (list, tuple)):
        return [_shape_only(x) for x in v]
    return v
