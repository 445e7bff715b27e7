# Copyright 2026 The neuron-kernels Authors. Licensed under the Apache License, Version 2.0.
"""Instruction-level operations (NKI's ``nki.isa``): each call is exactly one ISA instruction.

Destinations are explicit tiles, as in ``nisa.nc_matmul(dst, stationary, moving)``.
"""

from __future__ import annotations

from .core import Tensor, Tile, builder


def _a(x):
    return x.acc if isinstance(x, (Tile, Tensor)) else x


def dma_copy(dst, src, queue=None):
    return builder().dma_copy(_a(dst), _a(src), queue_key=queue)


def dma_transpose(dst, src, queue=None):
    return builder().dma_transpose(_a(dst), _a(src), queue_key=queue)


def nc_matmul(dst: Tile, stationary: Tile, moving: Tile, accumulate: bool = False):
    """dst[M, N] (+)= stationary[K, M].T @ moving[K, N]."""
    return builder().nc_matmul(dst.acc, stationary.acc, moving.acc, accumulate=accumulate)


def nc_transpose(dst: Tile, src: Tile):
    return builder().nc_transpose(dst.acc, src.acc)


def tensor_tensor(dst: Tile, a: Tile, b: Tile, op: str, engine: str = "vector"):
    return builder().tensor_tensor(dst.acc, a.acc, b.acc, op, engine=engine)


def tensor_scalar(dst: Tile, src: Tile, op0: str, operand0, reverse0=False, op1=None, operand1=None,
                  reverse1=False, engine: str = "vector"):
    return builder().tensor_scalar(dst.acc, src.acc, op0, _a(operand0), reverse0, op1, _a(operand1), reverse1,
                                   engine=engine)


def activation(dst: Tile, src: Tile, func: str, bias=None, scale=1.0, reduce_op=None, reduce_res: Tile = None):
    return builder().activation(dst.acc, src.acc, func, bias=_a(bias), scale=_a(scale), reduce_op=reduce_op,
                                reduce_dst=_a(reduce_res))


def tensor_reduce(dst: Tile, src: Tile, op: str, axis, negate=False, engine: str = "vector"):
    return builder().tensor_reduce(dst.acc, src.acc, op, axis, engine=engine, negate=negate)


def tensor_copy(dst: Tile, src: Tile, engine: str = "vector"):
    return builder().tensor_copy(dst.acc, src.acc, engine=engine)


def memset(dst: Tile, value: float, engine: str = "vector"):
    return builder().memset(dst.acc, value, engine=engine)


def iota(dst: Tile, base=0, partition_step=0, free_step=1):
    return builder().iota(dst.acc, base=base, partition_step=partition_step, free_step=free_step)


def select(dst: Tile, pred: Tile, on_true: Tile, on_false: Tile, engine: str = "vector"):
    return builder().select(dst.acc, pred.acc, on_true.acc, on_false.acc, engine=engine)
