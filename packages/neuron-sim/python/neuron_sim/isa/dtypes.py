# Copyright 2026 The neuron-sim Authors. Licensed under the Apache License, Version 2.0.
"""Element types of the ISA: names as NKI spells them, numpy dtypes (bf16/fp8 via ml_dtypes)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

# Trn2's FP8 e4m3 is the non-OCP variant with max 240 (F §2.9), which is ml_dtypes.float8_e4m3.
DTYPES: dict[str, np.dtype] = {
    "float32": np.dtype(np.float32),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float8_e4m3": np.dtype(ml_dtypes.float8_e4m3),
    "float8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "int32": np.dtype(np.int32),
    "uint32": np.dtype(np.uint32),
    "int16": np.dtype(np.int16),
    "int8": np.dtype(np.int8),
    "uint8": np.dtype(np.uint8),
}
_BY_NUMPY = {v: k for k, v in DTYPES.items()}

FLOAT_TYPES = frozenset(["float32", "float16", "bfloat16", "float8_e4m3", "float8_e4m3fn", "float8_e5m2"])
LOW_PRECISION_MATMUL = frozenset(["float16", "bfloat16", "float8_e4m3", "float8_e4m3fn", "float8_e5m2"])


def dtype_name(dtype) -> str:
    """The ISA name of a dtype given as a name, numpy dtype or numpy type."""
    if isinstance(dtype, str):
        if dtype in DTYPES:
            return dtype
        raise TypeError(f"unsupported dtype {dtype!r}; supported: {sorted(DTYPES)}")
    try:
        return _BY_NUMPY[np.dtype(dtype)]
    except (KeyError, TypeError):
        raise TypeError(f"unsupported dtype {dtype!r}; supported: {sorted(DTYPES)}") from None


def np_dtype(name: str) -> np.dtype:
    return DTYPES[dtype_name(name)]


def itemsize(name: str) -> int:
    return DTYPES[name].itemsize


def poison(shape, name: str) -> np.ndarray:
    """Uninitialised memory: NaN for floats, 4 for integers (the NKI simulator's sentinel, F §8)."""
    if name in FLOAT_TYPES:
        return np.full(shape, np.nan, dtype=DTYPES[name])
    return np.full(shape, 4, dtype=DTYPES[name])
