# Copyright 2026 The neuron-kernels Authors. Licensed under the Apache License, Version 2.0.
"""Generated fusion kernels: values against numpy float64, schedules, and rejected chains."""
import numpy as np
import pytest

from neuron_kernels.fusion import Chain, ChainError, Operand, Step, generate, kernel_source


def _softmax_chain(rows, cols, dtype="float32"):
    return Chain(rows, cols, (Operand("full", dtype), Operand("row", dtype)), (
        Step("add", (("in", 0), ("in", 1)), dtype),
        Step("max", (("v", 0),), dtype),
        Step("subtract", (("v", 0), ("v", 1)), dtype),
        Step("exp", (("v", 2),), dtype),
        Step("sum", (("v", 3),), dtype),
        Step("divide", (("v", 3), ("v", 4)), dtype),
    ), (5, 4))


@pytest.mark.parametrize("rows", [1, 100, 300])
def test_row_chain_matches_numpy(rows):
    rng = np.random.default_rng(0)
    x, b = rng.standard_normal((rows, 96)).astype(np.float32), rng.standard_normal(96).astype(np.float32)
    probs, denom = generate(_softmax_chain(rows, 96), "softmax_bias").run(x, b)
    y = x.astype(np.float64) + b
    e = np.exp(y - y.max(axis=1, keepdims=True))
    np.testing.assert_allclose(probs, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(denom, e.sum(axis=1, keepdims=True), rtol=1e-5)


def test_flat_chain_matches_numpy_and_moves_each_tensor_once():
    chain = Chain(64, 200, (Operand("full", "float32"), Operand("scalar", "float32")), (
        Step("multiply", (("in", 0), ("in", 1)), "float32"),
        Step("tanh", (("v", 0),), "float32"),
        Step("subtract", (("c", 1.0), ("v", 1)), "float32"),
    ), (2,))
    assert "reshape((128, 100))" in kernel_source(chain, "k")
    k = generate(chain, "k")
    x, s = np.random.default_rng(1).standard_normal((64, 200)).astype(np.float32), np.array([0.3], np.float32)
    np.testing.assert_allclose(k.run(x, s), 1.0 - np.tanh(x.astype(np.float64) * 0.3), rtol=1e-5, atol=1e-6)
    sched = k.schedule(x, s)
    assert sched.latency_ns > 0
    assert sched.dma_bytes <= 2 * x.nbytes + 128 * 4


def test_bf16_steps_round_like_the_unfused_ops():
    import ml_dtypes
    chain = Chain(128, 64, (Operand("full", "bfloat16"),), (
        Step("multiply", (("in", 0), ("c", 3.0)), "bfloat16"),
        Step("exp", (("v", 0),), "bfloat16"),
    ), (1,))
    x = np.random.default_rng(2).standard_normal((128, 64)).astype(ml_dtypes.bfloat16)
    out = generate(chain, "bf16_chain").run(x)
    assert out.dtype == ml_dtypes.bfloat16
    ref = np.exp((x.astype(np.float32) * 3).astype(ml_dtypes.bfloat16).astype(np.float64))
    np.testing.assert_allclose(out.astype(np.float64), ref, rtol=2e-2)


@pytest.mark.parametrize("chain,message", [
    (Chain(4, 8, (Operand("col", "float32"),), (Step("sum", (("in", 0),), "float32"),), (0,)),
     "reduces a full"),
    (Chain(4, 8, (Operand("full", "float32"),), (Step("gather", (("in", 0),), "float32"),), (0,)),
     "has no fused form"),
    (Chain(4, 8, (Operand("full", "float32"),), (Step("exp", (("v", 0),), "float32"),), (0,)),
     "does not precede it"),
    (Chain(4, 8, (Operand("full", "int32"),), (Step("exp", (("in", 0),), "int32"),), (0,)),
     "element type int32"),
])
def test_unsupported_chains_are_rejected(chain, message):
    with pytest.raises(ChainError, match=message):
        kernel_source(chain, "bad")


def _gelu_tanh_chain(rows, cols):
    # aten's tanh-GELU decomposition: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))
    return Chain(rows, cols, (Operand("full", "float32"),), (
        Step("multiply", (("in", 0), ("c", 0.5)), "float32"),
        Step("power", (("in", 0), ("c", 3.0)), "float32"),
        Step("multiply", (("v", 1), ("c", 0.044715)), "float32"),
        Step("add", (("in", 0), ("v", 2)), "float32"),
        Step("multiply", (("v", 3), ("c", 0.7978845608028654)), "float32"),
        Step("tanh", (("v", 4),), "float32"),
        Step("add", (("v", 5), ("c", 1.0)), "float32"),
        Step("multiply", (("v", 0), ("v", 6)), "float32"),
    ), (7,))


def test_scalar_steps_fold_into_their_reader_and_keep_values():
    chain = _gelu_tanh_chain(256, 384)
    src = kernel_source(chain, "gelu_tanh")
    # x * c > tanh is one activation with a scale; x ** 3 > * c is one two-op tensor_scalar.
    assert "nl.activation('tanh', v3_0, bias=None, scale=0.7978845608028654" in src
    assert "op1='multiply', operand1=0.044715" in src
    x = np.random.default_rng(3).standard_normal((256, 384)).astype(np.float32)
    xd = x.astype(np.float64)
    ref = 0.5 * xd * (1 + np.tanh(0.7978845608028654 * (xd + 0.044715 * xd ** 3)))
    k = generate(chain, "gelu_tanh")
    np.testing.assert_allclose(k.run(x), ref, rtol=1e-5, atol=1e-6)
    # Two 512-element chunks of [128, 768]; each: a load, 6 instructions for the 8 steps, a store.
    assert k.schedule(x).n_instructions == 2 * 8


def test_bias_fold_and_activation_reduce_match_numpy():
    chain = Chain(200, 96, (Operand("full", "float32"), Operand("col", "float32")), (
        Step("subtract", (("in", 0), ("in", 1)), "float32"),
        Step("exp", (("v", 0),), "float32"),
        Step("sum", (("v", 1),), "float32"),
        Step("log", (("v", 2),), "float32"),
        Step("add", (("v", 3), ("in", 1)), "float32"),
    ), (1, 4))
    src = kernel_source(chain, "lse")
    assert "reduce_op='add'" in src
    rng = np.random.default_rng(4)
    x, m = rng.standard_normal((200, 96)).astype(np.float32), rng.standard_normal((200, 1)).astype(np.float32)
    e, lse = generate(chain, "lse").run(x, m)
    ed = np.exp(x.astype(np.float64) - m)
    np.testing.assert_allclose(e, ed, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lse, np.log(ed.sum(axis=1, keepdims=True)) + m, rtol=1e-5, atol=1e-6)


def test_sums_over_rows_match_numpy():
    """Bias- and norm-weight-gradient sums (over the rows) beside a pointwise result, in one kernel."""
    R, C = 300, 96
    chain = Chain(R, C, (Operand("full", "float32"), Operand("full", "float32"), Operand("col", "float32")), (
        Step("multiply", (("in", 0), ("in", 1)), "float32"),
        Step("sum_rows", (("v", 0),), "float32"),
        Step("sum_rows", (("in", 0),), "float32"),
        Step("multiply", (("in", 0), ("in", 2)), "float32"),
    ), (1, 2, 3))
    rng = np.random.default_rng(5)
    g, x = rng.standard_normal((R, C)).astype(np.float32), rng.standard_normal((R, C)).astype(np.float32)
    r = rng.standard_normal((R, 1)).astype(np.float32)
    k = generate(chain, "row_sums")
    gw, gb, gx = k.run(g, x, r)
    assert gw.shape == gb.shape == (C,)
    np.testing.assert_allclose(gw, (g.astype(np.float64) * x).sum(axis=0), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gb, g.astype(np.float64).sum(axis=0), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gx, g.astype(np.float64) * r, rtol=1e-6)
    assert "nc_matmul(acc1" in kernel_source(chain, "row_sums")


def test_matmul_epilogue_matches_numpy_and_stores_once():
    """lhs @ rhs + bias > tanh > + residual in one kernel: the product never goes to HBM unless stored."""
    R, K, C = 300, 200, 96
    chain = Chain(R, C, (Operand("lhs", "float32"), Operand("rhs", "float32"), Operand("row", "float32"),
                         Operand("full", "float32")), (
        Step("matmul", (("in", 0), ("in", 1)), "float32"),
        Step("add", (("v", 0), ("in", 2)), "float32"),
        Step("tanh", (("v", 1),), "float32"),
        Step("add", (("v", 2), ("in", 3)), "float32"),
        Step("mean", (("v", 3),), "float32"),
    ), (3, 4), contract=K)
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((R, K)).astype(np.float32), rng.standard_normal((K, C)).astype(np.float32)
    bias, res = rng.standard_normal(C).astype(np.float32), rng.standard_normal((R, C)).astype(np.float32)
    k = generate(chain, "mm_epilogue")
    y, m = k.run(a, b, bias, res)
    ref = np.tanh(a.astype(np.float64) @ b + bias) + res
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(m, ref.mean(axis=1, keepdims=True), rtol=1e-4, atol=1e-4)
    # the row input is broadcast to the partitions of each of the 3 row blocks
    moved = a.nbytes + b.nbytes + bias.nbytes * 128 * 3 + res.nbytes + y.nbytes + m.nbytes
    assert k.schedule(a, b, bias, res).dma_bytes <= moved


@pytest.mark.parametrize("chain,message", [
    (Chain(4, 8, (Operand("full", "float32"),), (Step("sum_rows", (("in", 0),), "float32"),
                                                 Step("exp", (("v", 0),), "float32")), (1,)),
     "complete only after the last row block"),
    (Chain(4, 8, (Operand("full", "float32"), Operand("lhs", "float32"), Operand("rhs", "float32")), (
        Step("exp", (("in", 0),), "float32"), Step("matmul", (("in", 1), ("in", 2)), "float32")), (1,), contract=3),
     "must be step 0"),
])
def test_unsupported_row_sum_and_matmul_chains_are_rejected(chain, message):
    with pytest.raises(ChainError, match=message):
        kernel_source(chain, "bad")
