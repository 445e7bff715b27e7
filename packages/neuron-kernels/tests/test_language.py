# Copyright 2026 The neuron-kernels Authors. Licensed under the Apache License, Version 2.0.
"""The tile language: tracing and caching, assignment semantics, launches, errors, timing-only mode."""

import inspect
import os

import numpy as np
import pytest

import neuron_kernels.language as nl
from neuron_kernels import TensorSpec
from neuron_sim import isa


@nl.jit
def scaled_exp(x, scale=1.0):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range((x.shape[0] + 127) // 128):
        rows = slice(i * 128, (i + 1) * 128)
        t = nl.ndarray((min(128, x.shape[0] - i * 128), x.shape[1]), x.dtype)
        t[...] = nl.exp(nl.load(x[rows]), dtype=x.dtype)
        nl.store(out[rows], nl.multiply(t, scale))
    return out


def test_traced_once_per_signature_and_cached():
    x = np.random.default_rng(0).standard_normal((300, 40)).astype(np.float32)
    p1 = scaled_exp.programs(x, scale=2.0)
    assert scaled_exp.programs(x.copy(), scale=2.0) is p1                    # same shapes: cached
    assert scaled_exp.programs(x[:200], scale=2.0) is not p1                 # new shape: retraced
    assert scaled_exp.programs(x, scale=3.0) is not p1                       # new constant: retraced
    np.testing.assert_allclose(scaled_exp(x, scale=2.0), 2 * np.exp(x), rtol=1e-6)
    text = scaled_exp.dump(x, scale=2.0)
    assert "activation" in text and "dma_copy" in text and "[44, 40]" in text     # ragged last tile


def test_assignment_redirects_the_producing_instruction():
    x = TensorSpec((128, 40), "float32")
    ops = [i.op for i in scaled_exp.programs(x)[0].instrs]
    # load -> exp -> multiply -> store: the assignment t[...] = exp(...) added no copy
    assert ops == ["dma_copy", "activation", "tensor_scalar", "dma_copy"]


@nl.jit
def mm_accumulate(a, b):
    out = nl.ndarray((a.shape[1], b.shape[1]), nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((a.shape[1], b.shape[1]), nl.float32, buffer=nl.psum)
    for k in nl.affine_range(a.shape[0] // 128):
        acc += nl.matmul(nl.load(a[k * 128:(k + 1) * 128]), nl.load(b[k * 128:(k + 1) * 128]), transpose_x=True)
    nl.store(out, nl.copy(acc))
    return out


def test_psum_accumulation_with_iadd():
    r = np.random.default_rng(1)
    a, b = r.standard_normal((384, 64)).astype(np.float32), r.standard_normal((384, 96)).astype(np.float32)
    np.testing.assert_allclose(mm_accumulate(a, b), a.T @ b, rtol=1e-4, atol=1e-4)
    mms = [i for i in mm_accumulate.programs(a, b)[0].instrs if i.op == "nc_matmul"]
    assert len(mms) == 3 and all(i.attrs["accumulate"] for i in mms)


@nl.jit
def halves(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    n = x.shape[0] // nl.num_programs()
    rows = slice(nl.program_id() * n, (nl.program_id() + 1) * n)
    nl.store(out[rows], nl.add(nl.load(x[rows]), float(nl.program_id())))
    return out


def test_multi_core_launch_with_program_id():
    x = np.arange(256 * 8, dtype=np.float32).reshape(256, 8)
    out = halves[2](x)
    np.testing.assert_array_equal(out[:128], x[:128])
    np.testing.assert_array_equal(out[128:], x[128:] + 1)
    s = halves[2].schedule(x)
    assert len(s.cores) == 2 and s.latency_ns == max(c.latency_ns for c in s.cores)
    assert s.latency_ns < 1.5 * halves.schedule(x[:128]).latency_ns          # the cores run in parallel


def _line_of(fn, text):
    src, start = inspect.getsourcelines(fn)
    for i, line in enumerate(src):
        if text in line:
            return f"{os.path.abspath(__file__)}:{start + i}"
    raise AssertionError(text)


@nl.jit
def bad_matmul(a, b):
    out = nl.ndarray((128, 1024), nl.float32, buffer=nl.shared_hbm)
    acc = nl.matmul(nl.load(a), nl.load(b), transpose_x=True)  # moving 1024 > 512
    nl.store(out, acc)
    return out


@nl.jit
def bad_partitions(x):
    t = nl.load(x)  # 256 rows on partitions
    nl.store(x, t)
    return x


def test_errors_name_instruction_and_kernel_line():
    with pytest.raises(isa.ShapeError) as ei:
        bad_matmul.programs(TensorSpec((128, 128), "bfloat16"), TensorSpec((128, 1024), "bfloat16"))
    assert ei.value.instruction == "nc_matmul"
    assert ei.value.location == _line_of(bad_matmul, "moving 1024 > 512")
    with pytest.raises(isa.PartitionError) as ei:
        bad_partitions.programs(TensorSpec((256, 64), "float32"))
    assert ei.value.location == _line_of(bad_partitions, "256 rows on partitions")
    assert "partition dimension 256 exceeds maximum 128" in str(ei.value)


@nl.jit
def stream(x, bufs=2):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        t = nl.ndarray((128, x.shape[1]), x.dtype, bufs=bufs)
        t[...] = nl.load(x[i * 128:(i + 1) * 128])
        t[...] = nl.exp(t)
        nl.store(out[i * 128:(i + 1) * 128], t)
    return out


def test_timing_only_matches_functional_signature_and_double_buffering_overlaps():
    spec = TensorSpec((1024, 2048), "float32")
    one = stream.schedule(spec, bufs=1)
    two = stream.schedule(spec, bufs=2)
    assert two.latency_ns < 0.8 * one.latency_ns
    serial = sum(c.occupancy_ns + c.latency_ns + c.fixed_ns for c in two.cost)
    assert two.latency_ns < serial
    x = np.zeros((1024, 2048), np.float32)
    assert stream.schedule(x, bufs=2) is two                         # arrays and specs share the cache
    np.testing.assert_array_equal(stream(x, bufs=2), np.ones_like(x))
