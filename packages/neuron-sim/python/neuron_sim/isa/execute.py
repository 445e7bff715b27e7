# Copyright 2026 The neuron-sim Authors. Licensed under the Apache License, Version 2.0.
"""Functional execution of a Program in numpy.

Engines compute in FP32 and round to the destination dtype (bf16/fp8 through ml_dtypes);
TensorE accumulates in FP32 PSUM. On-chip memory and kernel-allocated HBM start poisoned
(NaN for floats), so a read of memory nobody wrote shows up in the result.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from .dtypes import FLOAT_TYPES, np_dtype, poison
from .errors import IsaError, ShapeError
from .access import Access
from .program import Program

_F32 = np.float32

_BINARY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
    "maximum": np.maximum, "minimum": np.minimum, "power": np.power,
    "greater": lambda a, b: (a > b).astype(_F32), "greater_equal": lambda a, b: (a >= b).astype(_F32),
    "less": lambda a, b: (a < b).astype(_F32), "less_equal": lambda a, b: (a <= b).astype(_F32),
    "equal": lambda a, b: (a == b).astype(_F32), "not_equal": lambda a, b: (a != b).astype(_F32),
    "bypass": lambda a, b: a, "abs_max": lambda a, b: np.maximum(np.abs(a), np.abs(b)),
    "logical_and": lambda a, b: ((a != 0) & (b != 0)).astype(_F32),
    "logical_or": lambda a, b: ((a != 0) | (b != 0)).astype(_F32),
}
_REDUCE = {"add": np.sum, "max": np.max, "min": np.min, "multiply": np.prod}


def _erf(x):
    # Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7), evaluated in float64: no scipy dependency.
    x64 = x.astype(np.float64)
    s = np.sign(x64)
    a = np.abs(x64)
    t = 1.0 / (1.0 + 0.3275911 * a)
    y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t
               + 0.254829592) * t * np.exp(-a * a)
    return (s * y).astype(_F32)


def _sigmoid(x):
    with np.errstate(over="ignore"):
        return (1.0 / (1.0 + np.exp(-x))).astype(_F32)


def _gelu(x):
    return (0.5 * x * (1.0 + _erf(x / _F32(math.sqrt(2.0))))).astype(_F32)


def _gelu_tanh(x):
    c = _F32(math.sqrt(2.0 / math.pi))
    return (0.5 * x * (1.0 + np.tanh(c * (x + _F32(0.044715) * x * x * x)))).astype(_F32)


def _gelu_dx(x):
    pdf = np.exp(-0.5 * x * x) / _F32(math.sqrt(2 * math.pi))
    return (0.5 * (1.0 + _erf(x / _F32(math.sqrt(2.0)))) + x * pdf).astype(_F32)


def _silu_dx(x):
    s = _sigmoid(x)
    return (s * (1.0 + x * (1.0 - s))).astype(_F32)


_ACT = {
    "identity": lambda x: x, "copy": lambda x: x, "exp": np.exp, "log": np.log, "tanh": np.tanh,
    "sigmoid": _sigmoid, "relu": lambda x: np.maximum(x, _F32(0)), "gelu": _gelu, "gelu_apprx_tanh": _gelu_tanh,
    "silu": lambda x: x * _sigmoid(x), "square": np.square, "sqrt": np.sqrt,
    "rsqrt": lambda x: (1.0 / np.sqrt(x)).astype(_F32), "reciprocal": lambda x: (1.0 / x).astype(_F32),
    "abs": np.abs, "sign": np.sign, "negative": np.negative,
    "softplus": lambda x: np.logaddexp(_F32(0), x).astype(_F32), "sin": np.sin, "cos": np.cos, "erf": _erf,
    "gelu_dx": _gelu_dx, "silu_dx": _silu_dx, "sigmoid_dx": lambda x: _sigmoid(x) * (1 - _sigmoid(x)),
}


class Memory:
    """Backing arrays for every buffer of one program (HBM may be shared across cores)."""

    def __init__(self, program: Program, inputs: Sequence[np.ndarray], outputs=None):
        self.arrays: dict[int, np.ndarray] = {}
        if len(inputs) != len(program.inputs):
            raise TypeError(f"{program.name} takes {len(program.inputs)} inputs, got {len(inputs)}")
        for b, x in zip(program.inputs, inputs):
            x = np.asarray(x)
            if tuple(x.shape) != b.shape:
                raise ShapeError("kernel launch", program.name, f"input {b.name} has shape {tuple(x.shape)}; the "
                                 f"kernel was traced for {b.shape}", "trace the kernel for this shape")
            self.arrays[b.id] = np.ascontiguousarray(x, dtype=np_dtype(b.dtype))
        if outputs is not None:
            for b, x in zip(program.outputs, outputs):
                self.arrays[b.id] = x
        self.program = program

    def base(self, buf) -> np.ndarray:
        a = self.arrays.get(buf.id)
        if a is None:
            a = self.arrays[buf.id] = poison(buf.shape, buf.dtype)
        return a

    def view(self, acc: Access) -> np.ndarray:
        a = self.base(acc.buf)
        if acc.view_shape != acc.buf.shape:
            a = a.reshape(acc.view_shape)
        v = a[acc.index]
        if acc.bcast:
            v = np.broadcast_to(v, (acc.bcast,) + v.shape)
        return v

    def read(self, acc: Access) -> np.ndarray:
        v = self.view(acc)
        if acc.buf.dtype in FLOAT_TYPES:
            return v.astype(_F32)
        return v

    def write(self, acc: Access, value) -> None:
        v = self.view(acc)
        value = np.asarray(value)
        if acc.buf.dtype not in FLOAT_TYPES and value.dtype.kind == "f":
            value = np.rint(value)
        v[...] = value.reshape(v.shape) if value.shape != v.shape and value.ndim else value


def _p2(x: np.ndarray) -> np.ndarray:
    return x.reshape(x.shape[0], -1)


def _scalar(mem: Memory, v):
    if isinstance(v, Access):
        return _p2(mem.read(v))
    return _F32(v)


def execute(program: Program, inputs: Sequence[np.ndarray], outputs=None) -> list[np.ndarray]:
    """Run ``program`` on numpy ``inputs``; returns the output arrays (``outputs`` may preallocate them)."""
    mem = Memory(program, inputs, outputs)
    for ins in program.instrs:
        _step(mem, ins)
    return [mem.base(b) for b in program.outputs]


def _step(mem: Memory, ins) -> None:
    op = ins.op
    with np.errstate(all="ignore"):
        if op == "dma_copy":
            mem.write(ins.writes[0], mem.view(ins.reads[0]).astype(_F32)
                      if ins.reads[0].buf.dtype in FLOAT_TYPES else mem.view(ins.reads[0]))
        elif op == "dma_transpose":
            mem.write(ins.writes[0], mem.read(ins.reads[0]).T)
        elif op == "dma_gather":
            table = mem.read(ins.reads[0])
            idx = mem.view(ins.reads[1]).reshape(-1).astype(np.int64)
            bad = np.nonzero((idx < 0) | (idx >= table.shape[0]))[0]
            if bad.size:
                r = int(bad[0])
                raise IsaError(op, ins.loc, f"index {int(idx[r])} at row {r} is out of range for a table of "
                               f"{table.shape[0]} rows", "clamp or validate the indices")
            mem.write(ins.writes[0], table[idx])
        elif op == "nc_matmul":
            st, mv = ins.reads
            a = mem.read(st).reshape(st.shape[0], -1)
            b = mem.read(mv).reshape(mv.shape[0], -1)
            r = a.T @ b
            dst = ins.writes[0]
            if ins.attrs["accumulate"]:
                r = _p2(mem.read(dst)) + r
            mem.write(dst, r)
        elif op == "nc_transpose":
            mem.write(ins.writes[0], _p2(mem.read(ins.reads[0])).T)
        elif op == "tensor_tensor":
            a, b = ins.reads
            mem.write(ins.writes[0], _BINARY[ins.attrs["op"]](_p2(mem.read(a)), _p2(mem.read(b))))
        elif op == "select":
            p, a, b = (_p2(mem.read(x)) for x in ins.reads)
            mem.write(ins.writes[0], np.where(p != 0, a, b))
        elif op == "tensor_scalar":
            at = ins.attrs
            x = _p2(mem.read(ins.reads[0]))
            x = _apply_scalar(x, at["op0"], _scalar(mem, at["operand0"]), at["reverse0"])
            if at["op1"] is not None:
                x = _apply_scalar(x, at["op1"], _scalar(mem, at["operand1"]), at["reverse1"])
            mem.write(ins.writes[0], x)
        elif op in ("activation", "activation_reduce"):
            at = ins.attrs
            x = _p2(mem.read(ins.reads[0]))
            x = x * _scalar(mem, at["scale"])
            if at["bias"] is not None:
                x = x + _scalar(mem, at["bias"])
            y = _ACT[at["func"]](x.astype(_F32))
            mem.write(ins.writes[0], y)
            if at["reduce_op"]:
                y2 = _p2(mem.read(ins.writes[0]))
                mem.write(ins.writes[1], _REDUCE[at["reduce_op"]](y2, axis=1, keepdims=True))
        elif op == "tensor_reduce":
            x = mem.read(ins.reads[0])
            r = _REDUCE[ins.attrs["op"]](x, axis=ins.attrs["axes"])
            if ins.attrs["negate"]:
                r = -r
            mem.write(ins.writes[0], r)
        elif op == "tensor_copy":
            src = ins.reads[0]
            mem.write(ins.writes[0], mem.read(src))
        elif op == "memset":
            mem.write(ins.writes[0], np.full(ins.writes[0].shape, ins.attrs["value"], dtype=_F32))
        elif op == "iota":
            dst = ins.writes[0]
            P, F = dst.shape[0], dst.free_size
            at = ins.attrs
            v = (at["base"] + at["partition_step"] * np.arange(P, dtype=np.float64)[:, None]
                 + at["free_step"] * np.arange(F, dtype=np.float64)[None, :])
            mem.write(dst, v)
        else:
            raise IsaError(op, ins.loc, "no functional semantics for this instruction")


def _apply_scalar(x, op, s, reverse):
    f = _BINARY[op]
    return f(s, x) if reverse else f(x, s)
