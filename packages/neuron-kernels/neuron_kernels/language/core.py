# Copyright 2026 The neuron-kernels Authors. Licensed under the Apache License, Version 2.0.
"""Trace-time values of the tile language: HBM tensors, on-chip tiles, and the tracing context."""

from __future__ import annotations

import threading

from neuron_sim.isa import HBM, PSUM, SBUF, Access, ProgramBuilder, register_internal_path

register_internal_path(__file__)

_state = threading.local()


class TraceContext:
    def __init__(self, builder: ProgramBuilder, program_id: tuple[int, ...], num_programs: tuple[int, ...]):
        self.builder = builder
        self.program_id = program_id
        self.num_programs = num_programs


def ctx() -> TraceContext:
    c = getattr(_state, "ctx", None)
    if c is None:
        raise RuntimeError("tile-language operations run only while a @jit kernel is being traced")
    return c


def builder() -> ProgramBuilder:
    return ctx().builder


class _Value:
    __slots__ = ("acc",)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.acc.shape

    @property
    def dtype(self) -> str:
        return self.acc.buf.dtype

    @property
    def ndim(self) -> int:
        return len(self.acc.shape)


class Tensor(_Value):
    """A view of an HBM tensor (a kernel argument or a kernel-allocated output)."""

    __slots__ = ()

    def __init__(self, acc: Access):
        self.acc = acc

    def __getitem__(self, index):
        if _is_tile(index) or (isinstance(index, tuple) and index and _is_tile(index[0])):
            raise TypeError("index an HBM tensor with a tile through nl.load_gather(table, indices)")
        return Tensor(self.acc.sub(index))

    def reshape(self, *shape) -> "Tensor":
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return Tensor(self.acc.reshape(shape))

    def broadcast_partitions(self, rows: int) -> "Tensor":
        """Read one row into ``rows`` partitions (a stride-0 DMA), e.g. a bias vector for every row."""
        return Tensor(self.acc.broadcast_partitions(rows))

    def __repr__(self):
        return f"Tensor({self.acc!r}, shape={self.shape}, dtype={self.dtype})"


def _is_tile(x) -> bool:
    return isinstance(x, Tile)


class Tile(_Value):
    """A view of an SBUF or PSUM tile; the first dimension is the partition dimension.

    Its arithmetic operators (``a + b``, ``t += x``) are the tile language's elementwise ops;
    ops.py, which defines those, installs them (ops imports this module, not the reverse)."""

    __slots__ = ("producer", "_inplace")

    def __init__(self, acc: Access, producer=None):
        self.acc = acc
        self.producer = producer        # the instruction that created this value, while it can be retargeted
        self._inplace = False

    @property
    def buffer(self) -> str:
        return self.acc.buf.kind

    def __getitem__(self, index) -> "Tile":
        return Tile(self.acc.sub(index))

    def __setitem__(self, index, value):
        dst = self.acc.sub(index)
        if isinstance(value, Tile):
            if value._inplace and value.acc.rect() == dst.rect():
                return                              # `t[i] += x` already updated t[i]
            b = builder()
            p = value.producer
            if p is not None and p.idx == len(b.instrs) - 1 and p.writes[0] is value.acc:
                b.retarget(p, dst)
                value.producer = None
                value.acc = dst
                return
            b.tensor_copy(dst, value.acc, engine="vector")
        elif isinstance(value, (int, float)):
            builder().memset(dst, float(value))
        else:
            raise TypeError(f"cannot assign {type(value).__name__} to a tile; assign a tile or a number")

    def __repr__(self):
        return f"Tile({self.acc!r}, shape={self.shape}, dtype={self.dtype}, buffer={self.buffer})"


def new_tile(shape, dtype, buffer=SBUF, bufs=None, name=None) -> Tile:
    return Tile(builder().alloc(shape, dtype, kind=buffer, bufs=bufs, name=name))


def new_hbm(shape, dtype, name=None) -> Tensor:
    b = builder()
    return Tensor(b.hbm(name or f"hbm{len(b.buffers)}", shape, dtype))


__all__ = ["Tensor", "Tile", "TraceContext", "ctx", "builder", "new_tile", "new_hbm", "HBM", "SBUF", "PSUM"]
