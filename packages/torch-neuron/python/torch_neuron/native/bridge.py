# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""What torch tensors are to tile kernels: element types, host views, launch accounting.

The one map between torch dtypes and the ISA's element types (``neuron_sim.isa.dtypes``,
which neuron_kernels' op table also speaks) lives here, and so does the zero-copy numpy
view of a tensor's bytes that every kernel execution (eager native ops in device-numerics
mode, ``nki_op`` kernels) reads and writes.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
import torch

from .. import _C


class DType(NamedTuple):
    torch: torch.dtype
    isa: str | None      # the ISA element type; None: no engine type of that width
    operand: str | None  # what a library kernel's operand of this dtype is traced as
    c10: str             # c10::ScalarType name, as the backend passes a call's dtype
    code: int            # c10::ScalarType code, as a ScalarType argument reaches Python


# int64 has no ISA type: the library's kernels take int32 indices and their adapters cast
# int64 index operands, so an int64 operand is traced as int32 (data movement carries int64
# as int32 word pairs, families.AsWords). bool is carried as uint8 0/1. float64 has neither.
DTYPES: tuple[DType, ...] = (
    DType(torch.float32, "float32", "float32", "Float", 6),
    DType(torch.bfloat16, "bfloat16", "bfloat16", "BFloat16", 15),
    DType(torch.float16, "float16", "float16", "Half", 5),
    DType(torch.float8_e4m3fn, "float8_e4m3fn", "float8_e4m3fn", "Float8_e4m3fn", 24),
    DType(torch.float8_e5m2, "float8_e5m2", "float8_e5m2", "Float8_e5m2", 23),
    DType(torch.int32, "int32", "int32", "Int", 3),
    DType(torch.uint32, "uint32", "uint32", "UInt32", 28),
    DType(torch.int16, "int16", "int16", "Short", 2),
    DType(torch.int8, "int8", "int8", "Char", 1),
    DType(torch.uint8, "uint8", "uint8", "Byte", 0),
    DType(torch.int64, None, "int32", "Long", 4),
    DType(torch.bool, None, "uint8", "Bool", 11),
    DType(torch.float64, None, None, "Double", 7),
)
_BY_TORCH = {d.torch: d for d in DTYPES}
_BY_NAME = {str(d.torch)[len("torch."):]: d for d in DTYPES}
_BY_C10 = {d.c10: d for d in DTYPES}
_BY_CODE = {d.code: d for d in DTYPES}
_BY_ISA = {d.isa: d for d in DTYPES if d.isa is not None}


class NotCovered(Exception):
    """The call's arguments are outside what the kernel's adapter computes."""


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype of an op-table dtype name ("float32", "bfloat16", ...)."""
    return _BY_NAME[name].torch


def table_name(dtype: torch.dtype) -> str:
    """The op table's name of a torch dtype ("bfloat16" for torch.bfloat16)."""
    return str(dtype)[len("torch."):]


def name_of_c10(c10: str) -> str:
    """The op-table name of a c10::ScalarType name ("BFloat16" -> "bfloat16")."""
    d = _BY_C10.get(c10)
    return c10 if d is None else table_name(d.torch)


def dtype_of_code(code: int):
    """The torch dtype of a c10::ScalarType code, or a description when it has none here."""
    d = _BY_CODE.get(code)
    return d.torch if d is not None else f"ScalarType code {code}"


def isa_dtype(dtype: torch.dtype, what: str) -> str:
    """The ISA element type of a tensor given to a user kernel (TypeError when it has none)."""
    d = _BY_TORCH.get(dtype)
    if d is None or d.isa is None:
        supported = ", ".join(str(x.torch) for x in DTYPES if x.isa is not None)
        raise TypeError(f"{what}: dtype {dtype} has no tile-language element type; supported: {supported}. "
                        "Convert the tensor (e.g. .float()) before the call.")
    return d.isa


def operand_dtype(dtype: torch.dtype) -> str:
    """The element type a library kernel's operand of ``dtype`` is traced with (NotCovered if none)."""
    d = _BY_TORCH.get(dtype)
    if d is None or d.operand is None:
        raise NotCovered(f"a {dtype} operand")
    return d.operand


def torch_of_isa(isa: str, what: str) -> torch.dtype:
    """The torch dtype of a kernel output's ISA element type."""
    d = _BY_ISA.get(isa)
    if d is None:
        raise TypeError(f"{what} has element type {isa}, which has no torch dtype; return it as one of "
                        f"{', '.join(_BY_ISA)}")
    return d.torch


def np_dtype(dtype: torch.dtype) -> np.dtype:
    """The numpy dtype of a tensor's elements (bf16 and fp8 through ml_dtypes)."""
    d = _BY_TORCH[dtype]
    if d.isa is None:
        return np.dtype(table_name(dtype))
    from neuron_sim.isa.dtypes import np_dtype as isa_np_dtype
    return isa_np_dtype(d.isa)


def host_view(t: torch.Tensor, dtype: np.dtype | None = None) -> np.ndarray:
    """A numpy view of contiguous ``t``'s bytes, no copy: through the runtime's host alias
    for ``neuron`` tensors (their addresses are not host-dereferenceable), directly for host
    tensors (CPU tensors, or the backend's host-execution views of device storage)."""
    dtype = np_dtype(t.dtype) if dtype is None else np.dtype(dtype)
    shape = tuple(t.shape)
    if t.numel() == 0:
        return np.empty(shape, dtype)
    if not t.is_contiguous():
        raise ValueError(f"host_view of a non-contiguous tensor (shape {shape}, stride {t.stride()})")
    if t.device.type == "neuron":
        import neuron_sim
        return neuron_sim.alias_array(t.data_ptr(), shape, dtype)
    return t.detach().reshape(-1).view(torch.uint8).numpy().view(dtype).reshape(shape)


def from_numpy(arr: np.ndarray) -> torch.Tensor:
    """A host tensor over a numpy array's bytes (bf16 and fp8 through their bit patterns)."""
    arr = np.ascontiguousarray(arr)
    try:
        return torch.from_numpy(arr)
    except TypeError:  # an ml_dtypes element type numpy-to-torch does not know
        from neuron_sim.isa.dtypes import dtype_name
        dtype = torch_of_isa(dtype_name(arr.dtype), "a kernel result")
        return torch.from_numpy(arr.view(np.uint8)).view(dtype).reshape(arr.shape)


@functools.lru_cache(maxsize=None)
def _profile_of(index: int) -> str:
    return _C.get_device_properties(index)["profile"]


def device_profile(device: torch.device) -> str:
    """The hardware profile (trn1/trn2/trn3) of a ``neuron`` device."""
    return _profile_of(device.index if device.index is not None else _C.current_device())


def account_launch(op: str, dtype: torch.dtype, device: int, kernel_ns: float, flops: float = 0.0,
                   bytes_in: float = 0.0, bytes_out: float = 0.0) -> None:
    """Counts one native execution of ``op`` and puts its launch on the current stream (with its
    counted flops and operand bytes, when known, for MFU and traffic reports)."""
    _C.launch_native_kernel(op, dtype, device, float(kernel_ns), float(flops), float(bytes_in), float(bytes_out))
