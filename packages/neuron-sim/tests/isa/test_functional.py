# Copyright 2026 The neuron-sim Authors. Licensed under the Apache License, Version 2.0.
"""Functional semantics of each instruction class against numpy float64 references."""

import ml_dtypes
import numpy as np
import pytest

from neuron_sim import isa

BF16 = ml_dtypes.bfloat16
rng = np.random.default_rng(1234)


def _run(build, inputs):
    b = isa.ProgramBuilder("t", "trn2")
    build(b)
    return isa.execute(b.finish(), inputs)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("K,M,N", [(128, 128, 512), (300, 70, 130), (64, 128, 1)])
def test_matmul_accumulates_over_k_in_fp32_psum(dtype, K, M, N):
    npdt = np.float32 if dtype == "float32" else BF16
    a = rng.standard_normal((K, M)).astype(npdt)
    bm = rng.standard_normal((K, N)).astype(npdt)

    def build(b):
        A = b.hbm("a", (K, M), dtype, "input")
        B = b.hbm("b", (K, N), dtype, "input")
        C = b.hbm("c", (M, N), "float32", "output")
        ps = b.alloc((M, N), "float32", isa.PSUM)
        for i, k0 in enumerate(range(0, K, 128)):
            ks = min(128, K - k0)
            ta = b.alloc((ks, M), dtype)
            tb = b.alloc((ks, N), dtype)
            b.dma_copy(ta, A.sub((slice(k0, k0 + ks),)))
            b.dma_copy(tb, B.sub((slice(k0, k0 + ks),)))
            b.nc_matmul(ps, ta, tb, accumulate=i > 0)
        sb = b.alloc((M, N), "float32")
        b.tensor_copy(sb, ps)
        b.dma_copy(C, sb)

    out, = _run(build, [a, bm])
    ref = a.astype(np.float64).T @ bm.astype(np.float64)
    # Inputs are exact in fp32; only the fp32 accumulation rounds.
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-4 * np.sqrt(K))


def test_bf16_output_rounds_to_nearest_even():
    x = rng.standard_normal((128, 64)).astype(np.float32)

    def build(b):
        X = b.hbm("x", x.shape, "float32", "input")
        Y = b.hbm("y", x.shape, "bfloat16", "output")
        t = b.alloc(x.shape, "float32")
        u = b.alloc(x.shape, "bfloat16")
        b.dma_copy(t, X)
        b.tensor_copy(u, t)
        b.dma_copy(Y, u)

    y, = _run(build, [x])
    assert y.dtype == BF16
    np.testing.assert_array_equal(y.view(np.uint16), x.astype(BF16).view(np.uint16))
    assert not np.array_equal(y.astype(np.float32), x)      # bf16 really loses precision


def test_fp8_e4m3_emulation_saturates_like_ml_dtypes():
    x = np.linspace(-300, 300, 128 * 8, dtype=np.float32).reshape(128, 8)

    def build(b):
        X = b.hbm("x", x.shape, "float32", "input")
        Y = b.hbm("y", x.shape, "float32", "output")
        t = b.alloc(x.shape, "float8_e4m3")
        u = b.alloc(x.shape, "float32")
        b.dma_copy(t, X)
        b.tensor_copy(u, t)
        b.dma_copy(Y, u)

    y, = _run(build, [x])
    np.testing.assert_array_equal(y, x.astype(ml_dtypes.float8_e4m3).astype(np.float32))


def test_uninitialised_sbuf_reads_are_nan():
    def build(b):
        Y = b.hbm("y", (128, 4), "float32", "output")
        t = b.alloc((128, 4), "float32")
        b.dma_copy(Y, t)

    y, = _run(build, [])
    assert np.isnan(y).all()


def test_strided_broadcast_transpose_and_gather_dma():
    src = rng.standard_normal((64, 96)).astype(np.float32)
    idx = rng.integers(0, 64, size=(40, 1)).astype(np.int32)

    def build(b):
        S = b.hbm("s", src.shape, "float32", "input")
        I = b.hbm("i", idx.shape, "int32", "input")
        O1 = b.hbm("o1", (32, 48), "float32", "output")
        O2 = b.hbm("o2", (16, 96), "float32", "output")
        O3 = b.hbm("o3", (96, 64), "float32", "output")
        O4 = b.hbm("o4", (40, 96), "float32", "output")
        t1 = b.alloc((32, 48), "float32")
        b.dma_copy(t1, S.sub((slice(0, 64, 2), slice(1, 96, 2))))          # strided rows and columns
        b.dma_copy(O1, t1)
        t2 = b.alloc((16, 96), "float32")
        b.dma_copy(t2, S.sub(5).broadcast_partitions(16))                    # row 5 on 16 partitions
        b.dma_copy(O2, t2)
        t3 = b.alloc((96, 64), "float32")
        b.dma_transpose(t3, S)
        b.dma_copy(O3, t3)
        ti = b.alloc((40, 1), "int32")
        b.dma_copy(ti, I)
        t4 = b.alloc((40, 96), "float32")
        b.dma_gather(t4, S, ti)
        b.dma_copy(O4, t4)

    o1, o2, o3, o4 = _run(build, [src, idx])
    np.testing.assert_array_equal(o1, src[0:64:2, 1:96:2])
    np.testing.assert_array_equal(o2, np.broadcast_to(src[5], (16, 96)))
    np.testing.assert_array_equal(o3, src.T)
    np.testing.assert_array_equal(o4, src[idx[:, 0]])


def test_gather_index_out_of_range_names_instruction_and_line():
    idx = np.array([[0], [7]], dtype=np.int32)
    b = isa.ProgramBuilder("t", "trn2")
    S = b.hbm("s", (4, 8), "float32", "input")
    I = b.hbm("i", (2, 1), "int32", "input")
    ti = b.alloc((2, 1), "int32")
    b.dma_copy(ti, I)
    t = b.alloc((2, 8), "float32")
    b.dma_gather(t, S, ti)
    import inspect
    line = inspect.currentframe().f_lineno - 2
    with pytest.raises(isa.IsaError, match=r"dma_gather at .*test_functional.py:%d: index 7 at row 1" % line):
        isa.execute(b.finish(), [np.zeros((4, 8), np.float32), idx])


def test_vector_scalar_engine_ops():
    x = rng.standard_normal((100, 3, 20)).astype(np.float32)
    y = rng.standard_normal((100, 60)).astype(np.float32)
    s = rng.standard_normal((100, 1)).astype(np.float32)

    def build(b):
        X = b.hbm("x", x.shape, "float32", "input")
        Y = b.hbm("y", y.shape, "float32", "input")
        S = b.hbm("s", s.shape, "float32", "input")
        outs = [b.hbm(f"o{i}", shp, "float32", "output") for i, shp in
                enumerate([(100, 60), (100, 60), (100, 60), (100, 1), (100, 3), (100, 60), (100, 60), (60, 100)])]
        tx, ty, ts = b.alloc(x.shape, "float32"), b.alloc(y.shape, "float32"), b.alloc(s.shape, "float32")
        b.dma_copy(tx, X), b.dma_copy(ty, Y), b.dma_copy(ts, S)
        r = [b.alloc(o.shape, "float32", bufs=len(outs)) for o in outs]
        b.tensor_tensor(r[0], tx, ty, "subtract")
        b.tensor_scalar(r[1], ty, "multiply", ts, op1="add", operand1=0.5)
        red = b.alloc((100, 1), "float32")
        b.activation(r[2], ty, "exp", bias=ts, scale=0.5, reduce_op="add", reduce_dst=red)
        b.tensor_copy(r[3], red)
        b.tensor_reduce(r[4], tx, "max", axes=2)
        b.iota(r[5], base=3, partition_step=100, free_step=1)
        b.memset(r[6], 2.5)
        tt = b.alloc((60, 100), "float32", isa.PSUM)
        b.nc_transpose(tt, ty)
        b.tensor_copy(r[7], tt)
        for o, t in zip(outs, r):
            b.dma_copy(o, t)

    o = _run(build, [x, y, s])
    e = np.exp(y.astype(np.float64) * 0.5 + s)
    np.testing.assert_allclose(o[0], x.reshape(100, 60) - y, rtol=1e-6)
    np.testing.assert_allclose(o[1], y * s + 0.5, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(o[2], e, rtol=1e-5)
    np.testing.assert_allclose(o[3][:, 0], e.sum(1), rtol=1e-5)
    np.testing.assert_array_equal(o[4], x.max(axis=2))
    np.testing.assert_array_equal(o[5], 3 + 100 * np.arange(100)[:, None] + np.arange(60)[None, :])
    np.testing.assert_array_equal(o[6], np.full((100, 60), 2.5))
    np.testing.assert_array_equal(o[7], y.T)


@pytest.mark.parametrize("func,ref", [
    ("tanh", np.tanh), ("sigmoid", lambda x: 1 / (1 + np.exp(-x))), ("relu", lambda x: np.maximum(x, 0)),
    ("silu", lambda x: x / (1 + np.exp(-x))), ("softplus", lambda x: np.log1p(np.exp(x))),
    ("gelu", lambda x: 0.5 * x * (1 + np.vectorize(__import__("math").erf)(x / np.sqrt(2)))),
])
def test_activation_functions(func, ref):
    x = np.linspace(-6, 6, 128 * 16).reshape(128, 16).astype(np.float32)

    def build(b):
        X = b.hbm("x", x.shape, "float32", "input")
        Y = b.hbm("y", x.shape, "float32", "output")
        t, u = b.alloc(x.shape, "float32"), b.alloc(x.shape, "float32")
        b.dma_copy(t, X)
        b.activation(u, t, func)
        b.dma_copy(Y, u)

    y, = _run(build, [x])
    np.testing.assert_allclose(y, ref(x.astype(np.float64)), rtol=2e-6, atol=2e-6)
