# Copyright 2026 The neuron-kernels Authors. Licensed under the Apache License, Version 2.0.
"""Matrix multiplication kernels: matmul, batched matmul, linear (+bias).

Tiling follows the NKI GEMM pattern (F §7): stationary tiles [K<=128, M<=128], moving tiles
[K<=128, N<=512], FP32 accumulation over K in one PSUM bank, eviction PSUM->SBUF with the
output cast (a 16-bit bias joins the accumulation as a rank-1 matmul, a 32-bit one is added on
the way out). The moving operand is loaded once per column block and
reused for every row tile; row-major operands that TensorE needs K-major arrive through DMA
transposes (up to 90% of DMA throughput on trn2, C §4.5), leaving TensorE to the matmuls.
"""

from __future__ import annotations

from .. import language as nl

P = 128          # partitions / contraction per matmul
NT = 512         # moving free size per matmul (one PSUM bank of fp32)
# SBUF budget per partition for the resident moving block: leaves room for the stationary
# tiles, the evicted outputs and double buffering within 224 KiB (trn2).
MOVING_BUDGET = 64 * 1024


def _cdiv(a, b):
    return -(-a // b)


def _itemsize(dtype):
    return {"float32": 4, "float16": 2, "bfloat16": 2}.get(dtype, 1)


def _compute_dtype(a_dtype, b_dtype):
    return "float32" if "float32" in (a_dtype, b_dtype) else a_dtype


def broadcast_rows(vec, rows):
    """A 1-D HBM vector (C,) in ``rows`` partitions (fp32): one row loaded, then copied to every
    partition on TensorE (a ones [1, rows] stationary against it, into PSUM, 512 columns at a
    time). A stride-0 DMA would move the row ``rows`` times through the DMA engines."""
    C = vec.shape[0]
    row = nl.load(vec.broadcast_partitions(1), dtype="float32")                  # [1, C]
    ones = nl.full((1, rows), 1.0, "float32")
    out = nl.ndarray((rows, C), "float32", bufs=1)
    for c0 in range(0, C, NT):
        cs = min(NT, C - c0)
        ps = nl.ndarray((rows, cs), "float32", buffer=nl.psum, bufs=1)
        nl.isa.nc_matmul(ps, ones, row[:, c0:c0 + cs])
        out[:, c0:c0 + cs] = nl.copy(ps)
    return out


def mm_2d(a, b, out, transpose_a=False, transpose_b=False, bias=None):
    """out[M, N] = op(a) @ op(b) (+ bias[N]) for 2-D HBM views; op transposes when asked.

    a is [M, K] (or [K, M] when transpose_a); b is [K, N] (or [N, K] when transpose_b).
    """
    M, K = (a.shape[1], a.shape[0]) if transpose_a else a.shape
    N = b.shape[0] if transpose_b else b.shape[1]
    cdt = _compute_dtype(a.dtype, b.dtype)
    KT = _cdiv(K, P)
    # Column block width: as many 512-wide tiles as the moving budget allows.
    per_col = KT * _itemsize(cdt)
    nb = max(NT, min(_cdiv(N, NT) * NT, (MOVING_BUDGET // per_col) // NT * NT))
    for n0 in range(0, N, nb):
        nbw = min(nb, N - n0)
        rhs = nl.ndarray((P, KT, nbw), cdt, buffer=nl.sbuf, bufs=1)
        for kt in nl.affine_range(KT):
            k0, ks = kt * P, min(P, K - kt * P)
            if transpose_b:
                for j in range(0, nbw, NT):
                    js = min(NT, nbw - j)
                    rhs[:ks, kt, j:j + js] = nl.load_transpose2d(b[n0 + j:n0 + j + js, k0:k0 + ks], dtype=cdt)
            else:
                rhs[:ks, kt, :] = nl.load(b[k0:k0 + ks, n0:n0 + nbw], dtype=cdt)
        # A 16-bit bias of 16-bit operands enters the accumulator as one more matmul, a ones
        # column against the bias row (exact: the products are the bias values); the outputs then
        # leave PSUM as plain copies, split between ScalarE and VectorE. Otherwise the bias block
        # is put in every row of a row tile, once per column block, and added on VectorE.
        bias_mm = bias is not None and cdt == bias.dtype and cdt in ("bfloat16", "float16")
        if bias_mm:
            bias_row = nl.load(bias[n0:n0 + nbw].broadcast_partitions(1), dtype=cdt)     # [1, nbw]
            ones = nl.full((1, P), 1.0, cdt, bufs=1)
        bias_t = broadcast_rows(bias[n0:n0 + nbw], min(M, P)) if bias is not None and not bias_mm else None
        for m in nl.affine_range(_cdiv(M, P)):
            m0, ms = m * P, min(P, M - m * P)
            lhsT = nl.ndarray((P, KT, P), cdt, buffer=nl.sbuf)
            for kt in nl.affine_range(KT):
                k0, ks = kt * P, min(P, K - kt * P)
                if transpose_a:
                    lhsT[:ks, kt, :ms] = nl.load(a[k0:k0 + ks, m0:m0 + ms], dtype=cdt)
                else:
                    lhsT[:ks, kt, :ms] = nl.load_transpose2d(a[m0:m0 + ms, k0:k0 + ks], dtype=cdt)
            for j in nl.affine_range(_cdiv(nbw, NT)):
                j0, js = j * NT, min(NT, nbw - j * NT)
                acc = nl.ndarray((ms, js), nl.float32, buffer=nl.psum)
                for kt in nl.affine_range(KT):
                    ks = min(P, K - kt * P)
                    nl.isa.nc_matmul(acc, lhsT[:ks, kt, :ms], rhs[:ks, kt, j0:j0 + js], accumulate=kt > 0)
                if bias_t is not None:
                    res = nl.add(acc, bias_t[:ms, j0:j0 + js], dtype=out.dtype)
                else:
                    if bias_mm:
                        nl.isa.nc_matmul(acc, ones[:, :ms], bias_row[:, j0:j0 + js], accumulate=True)
                    res = nl.copy(acc, dtype=out.dtype, engine="scalar" if (m + j) % 2 else "vector")
                nl.store(out[m0:m0 + ms, n0 + j0:n0 + j0 + js], res)


@nl.jit
def matmul(a, b, transpose_a=False, transpose_b=False, out_dtype=None):
    """C = op(a) @ op(b) for 2-D inputs."""
    M = a.shape[1] if transpose_a else a.shape[0]
    N = b.shape[0] if transpose_b else b.shape[1]
    out = nl.ndarray((M, N), out_dtype or _compute_dtype(a.dtype, b.dtype), buffer=nl.shared_hbm)
    mm_2d(a, b, out, transpose_a, transpose_b)
    return out


@nl.jit
def bmm(a, b, transpose_a=False, transpose_b=False, out_dtype=None):
    """C[i] = op(a[i]) @ op(b[i]) for 3-D inputs with a common batch dimension."""
    B = a.shape[0]
    M = a.shape[2] if transpose_a else a.shape[1]
    N = b.shape[1] if transpose_b else b.shape[2]
    out = nl.ndarray((B, M, N), out_dtype or _compute_dtype(a.dtype, b.dtype), buffer=nl.shared_hbm)
    for i in nl.affine_range(B):
        mm_2d(a[i], b[i], out[i], transpose_a, transpose_b)
    return out


@nl.jit
def linear(x, weight, bias=None, transpose_weight=True):
    """y = x @ weight.T + bias, with weight [out_features, in_features] as in torch.nn.Linear
    (``transpose_weight=False``: weight is [in_features, out_features], as in aten::addmm)."""
    N = weight.shape[0] if transpose_weight else weight.shape[1]
    out = nl.ndarray((x.shape[0], N), x.dtype, buffer=nl.shared_hbm)
    mm_2d(x, weight, out, transpose_b=transpose_weight, bias=bias)
    return out
