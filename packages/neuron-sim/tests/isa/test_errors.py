# Copyright 2026 The neuron-sim Authors. Licensed under the Apache License, Version 2.0.
"""Every constraint-violation class raises its error, naming the instruction and the issuing source line."""

import inspect
import os

import pytest

from neuron_sim import isa


def _here(offset=2):
    """file:line ``offset`` lines below the caller (where the violating call sits)."""
    f = inspect.currentframe().f_back
    return f"{os.path.abspath(f.f_code.co_filename)}:{f.f_lineno + offset}"


def _check(exc_info, cls, instruction, loc, *fragments):
    e = exc_info.value
    assert type(e) is cls
    assert e.instruction == instruction
    assert e.location == loc
    assert str(e).startswith(f"{instruction} at {loc}: ")
    for fr in fragments:
        assert fr in str(e), str(e)
    assert e.hint


@pytest.fixture
def b():
    return isa.ProgramBuilder("violations", "trn2")


def test_partition_dimension_over_128(b):
    loc = _here()
    with pytest.raises(isa.PartitionError) as ei:
        b.alloc((256, 512), "float32")
    _check(ei, isa.PartitionError, "nl.ndarray", loc, "partition dimension 256 exceeds maximum 128")


def test_partition_start_rule(b):
    t = b.alloc((128, 8), "float32")
    u = b.alloc((128, 8), "float32")
    loc = _here()
    with pytest.raises(isa.PartitionError) as ei:
        b.tensor_copy(u.sub((slice(1, 5),)), t.sub((slice(1, 5),)))
    _check(ei, isa.PartitionError, "tensor_copy", loc, "starting at partition 1")


def test_matmul_moving_free_size_over_512(b):
    s = b.alloc((128, 128), "bfloat16")
    m = b.alloc((128, 1024), "bfloat16")
    ps = b.alloc((128, 1024), "float32", isa.PSUM)
    loc = _here()
    with pytest.raises(isa.ShapeError) as ei:
        b.nc_matmul(ps, s, m)
    _check(ei, isa.ShapeError, "nc_matmul", loc, "moving free size 1024 exceeds maximum 512")


def test_matmul_contraction_mismatch(b):
    s = b.alloc((128, 64), "bfloat16")
    m = b.alloc((96, 256), "bfloat16")
    ps = b.alloc((64, 256), "float32", isa.PSUM)
    loc = _here()
    with pytest.raises(isa.ShapeError) as ei:
        b.nc_matmul(ps, s, m)
    _check(ei, isa.ShapeError, "nc_matmul", loc, "(128 vs 96)")


def test_matmul_mixed_dtypes(b):
    s = b.alloc((128, 128), "float32")
    m = b.alloc((128, 512), "bfloat16")
    ps = b.alloc((128, 512), "float32", isa.PSUM)
    loc = _here()
    with pytest.raises(isa.DTypeError) as ei:
        b.nc_matmul(ps, s, m)
    _check(ei, isa.DTypeError, "nc_matmul", loc, "float32", "bfloat16")


def test_activation_on_integers(b):
    t = b.alloc((128, 8), "int32")
    u = b.alloc((128, 8), "int32")
    loc = _here()
    with pytest.raises(isa.DTypeError) as ei:
        b.activation(u, t, "exp")
    _check(ei, isa.DTypeError, "activation", loc, "int32")


def test_matmul_output_crossing_a_psum_bank(b):
    s = b.alloc((128, 128), "bfloat16")
    m = b.alloc((128, 512), "bfloat16")
    ps = b.alloc((128, 1024), "float32", isa.PSUM)          # two banks
    loc = _here()
    with pytest.raises(isa.BankError) as ei:
        b.nc_matmul(ps.sub((slice(None), slice(256, 768))), s, m)
    _check(ei, isa.BankError, "nc_matmul", loc, "crossing the 2048-byte bank boundary at 2048")


def test_tile_larger_than_sbuf_partition(b):
    loc = _here()
    with pytest.raises(isa.CapacityError) as ei:
        b.alloc((128, 60000), "float32")
    _check(ei, isa.CapacityError, "nl.ndarray", loc, "240000 bytes per partition", "229376")


def test_live_tiles_exceed_sbuf(b):
    X = b.hbm("x", (128, 30000), "float32", "input")
    t = b.alloc((128, 30000), "float32", bufs=1)
    u = b.alloc((128, 30000), "float32", bufs=1)
    b.dma_copy(t, X)
    loc = _here(1)
    b.tensor_copy(u, t)
    with pytest.raises(isa.CapacityError) as ei:
        b.finish()
    _check(ei, isa.CapacityError, "tensor_copy", loc, "SBUF needs 240000 bytes per partition")


def test_psum_banks_exhausted(b):
    # Nine one-bank tiles from one allocation site: the site reserves bufs x 2 KiB from its first use.
    tiles = [b.alloc((128, 512), "float32", isa.PSUM, bufs=9) for _ in range(9)]
    loc = _here(2)
    for t in tiles:
        b.memset(t, 0.0)
    with pytest.raises(isa.CapacityError) as ei:
        b.finish()
    _check(ei, isa.CapacityError, "memset", loc, "PSUM needs 18432 bytes per partition")


def test_reused_rotating_buffer(b):
    tiles = [b.alloc((128, 8), "float32") for _ in range(3)]          # one line, bufs=2
    b.memset(tiles[2], 0.0)
    loc = _here()
    with pytest.raises(isa.CapacityError) as ei:
        b.memset(tiles[0], 1.0)
    _check(ei, isa.CapacityError, "memset", loc, "pass bufs=3")


def test_dma_into_psum(b):
    X = b.hbm("x", (128, 512), "float32", "input")
    ps = b.alloc((128, 512), "float32", isa.PSUM)
    loc = _here()
    with pytest.raises(isa.MemoryKindError) as ei:
        b.dma_copy(ps, X)
    _check(ei, isa.MemoryKindError, "dma_copy", loc, "DMA cannot access PSUM")


def test_compute_on_hbm(b):
    X = b.hbm("x", (128, 512), "float32", "input")
    t = b.alloc((128, 512), "float32")
    loc = _here()
    with pytest.raises(isa.MemoryKindError) as ei:
        b.tensor_copy(t, X)
    _check(ei, isa.MemoryKindError, "tensor_copy", loc, "is in HBM")


def test_elementwise_shape_mismatch(b):
    t = b.alloc((128, 64), "float32")
    u = b.alloc((128, 32), "float32")
    v = b.alloc((128, 64), "float32")
    loc = _here()
    with pytest.raises(isa.ShapeError) as ei:
        b.tensor_tensor(v, t, u, "add")
    _check(ei, isa.ShapeError, "tensor_tensor", loc, "(128, 32)")


def test_dma_shape_mismatch(b):
    X = b.hbm("x", (128, 512), "float32", "input")
    t = b.alloc((128, 256), "float32")
    loc = _here()
    with pytest.raises(isa.ShapeError) as ei:
        b.dma_copy(t, X)
    _check(ei, isa.ShapeError, "dma_copy", loc, "(128, 512)")
