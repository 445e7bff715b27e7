# Copyright 2026 The neuron-kernels Authors. Licensed under the Apache License, Version 2.0.
"""Tile sizes shared by the kernels."""

P = 128          # SBUF partitions
# Free-dimension chunk for streaming kernels: 2048 fp32 = 8 KiB per partition per tile, past the
# 4 KiB per partition at which DMA saturates (C §4.5), small enough to double-buffer several tiles.
FCHUNK = 2048
# Integers that pass through fp32 on VectorE (indices, positions) are exact below 2**24.
FP32_EXACT = 2 ** 24


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def row_blocks(n: int, size: int = P):
    """(start, length) of consecutive blocks of at most ``size`` covering range(n)."""
    return [(i, min(size, n - i)) for i in range(0, n, size)]
