# Copyright 2026 The neuron-kernels Authors. Licensed under the Apache License, Version 2.0.
"""Calibration: the timing model against published kernel-level figures.

Each published kernel is written in the tile language the way its tutorial writes it, then
simulated timing-only at the tutorial's shape. Figures (C = shared/facts/trainium-calibration.md):

* C §1.1  NKI matmul tutorial, trn1, BF16, [4096, 8192] @ [8192, 8192]: latency per optimisation step.
* C §1.2  kernel-optimisation tutorial, trn2, FP32, same shape: total time and engine-active percentages.
* C §1.6  one DMA engine moving 32 KiB (A[4, 4096] bf16) in 1416 ns on trn2.
* C §1.7  ~189 ns issue interval of dependent 1-element ScalarE activations on NC-v2.
* C §1.8  ~3.0-4.1 us device time of a tiny add kernel (two loads, one add, one store).

Run: python packages/neuron-kernels/bench/calibrate.py [--quick]
(--quick scales the matmul shapes down 4x in M and N for a fast smoke run; errors are then not meaningful.)
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import neuron_sim

# Prefer the checkout's ISA simulator over an older installed copy (pure Python, no rebuild needed).
_SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "neuron-sim", "python", "neuron_sim"))
if os.path.isdir(_SRC) and _SRC not in neuron_sim.__path__:
    neuron_sim.__path__.insert(0, _SRC)

import neuron_kernels.language as nl  # noqa: E402
from neuron_kernels import TensorSpec  # noqa: E402

TILE_K, TILE_M, TILE_N = 128, 128, 512


# -- the matmul tutorial's kernels (C §1.1 / §1.2), lhsT [K, M] @ rhs [K, N] ----------------------------
# The tutorial leaves buffer counts to the compiler; loop-local tiles here get 4 buffers, enough
# to cover the ~1300 ns DMA start latency (C §4.5) while a transfer of ~1 us is in flight.
@nl.jit(default_bufs=4)
def mm_tiled(lhsT, rhs):
    """Loads both tiles inside the k loop (tutorial `nki_matmul_tiled_`, kernel-optimisation v2)."""
    K, M = lhsT.shape
    N = rhs.shape[1]
    result = nl.ndarray((M, N), lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TILE_M):
        for n in nl.affine_range(N // TILE_N):
            res_psum = nl.zeros((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TILE_K):
                lhsT_tile = nl.load(lhsT[k * TILE_K:(k + 1) * TILE_K, m * TILE_M:(m + 1) * TILE_M])
                rhs_tile = nl.load(rhs[k * TILE_K:(k + 1) * TILE_K, n * TILE_N:(n + 1) * TILE_N])
                res_psum += nl.matmul(lhsT_tile, rhs_tile, transpose_x=True)
            nl.store(result[m * TILE_M:(m + 1) * TILE_M, n * TILE_N:(n + 1) * TILE_N],
                     nl.copy(res_psum, dtype=result.dtype))
    return result


@nl.jit
def mm_hoisted(lhsT, rhs):
    """Optimisation 1 / v3: a column of lhsT tiles per m and a column of rhs tiles per n, loaded once."""
    K, M = lhsT.shape
    N = rhs.shape[1]
    KT = K // TILE_K
    result = nl.ndarray((M, N), lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TILE_M):
        lhsT_tiles = nl.ndarray((TILE_K, KT, TILE_M), lhsT.dtype, bufs=1)
        for k in nl.affine_range(KT):
            lhsT_tiles[:, k, :] = nl.load(lhsT[k * TILE_K:(k + 1) * TILE_K, m * TILE_M:(m + 1) * TILE_M])
        for n in nl.affine_range(N // TILE_N):
            rhs_tiles = nl.ndarray((TILE_K, KT, TILE_N), rhs.dtype, bufs=1)
            for k in nl.affine_range(KT):
                rhs_tiles[:, k, :] = nl.load(rhs[k * TILE_K:(k + 1) * TILE_K, n * TILE_N:(n + 1) * TILE_N])
            res_psum = nl.zeros((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(KT):
                res_psum += nl.matmul(lhsT_tiles[:, k, :], rhs_tiles[:, k, :], transpose_x=True)
            nl.store(result[m * TILE_M:(m + 1) * TILE_M, n * TILE_N:(n + 1) * TILE_N],
                     nl.copy(res_psum, dtype=result.dtype))
    return result


@nl.jit
def mm_block_free(lhsT, rhs, TBM=2, TBN=2, hoist_rhs=True):
    """Optimisation 2 / v4: block M and N (TBM x TBN result tiles share each loaded tile).

    ``hoist_rhs``: keep the whole K column of the rhs block resident (the trn1 BF16 tutorial); the
    FP32 block does not fit trn2's SBUF, so there rhs tiles stream per k inside the block.
    """
    K, M = lhsT.shape
    N = rhs.shape[1]
    KT = K // TILE_K
    BM, BN = TILE_M * TBM, TILE_N * TBN
    result = nl.ndarray((M, N), lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // BM):
        lhsT_tiles = nl.ndarray((TILE_K, KT, BM), lhsT.dtype, bufs=1)
        for k in nl.affine_range(KT):
            lhsT_tiles[:, k, :] = nl.load(lhsT[k * TILE_K:(k + 1) * TILE_K, m * BM:(m + 1) * BM])
        for n in nl.affine_range(N // BN):
            if hoist_rhs:
                rhs_tiles = nl.ndarray((TILE_K, KT, BN), rhs.dtype, bufs=1)
                for k in nl.affine_range(KT):
                    rhs_tiles[:, k, :] = nl.load(rhs[k * TILE_K:(k + 1) * TILE_K, n * BN:(n + 1) * BN])
            res = [nl.zeros((TILE_M, TILE_N), nl.float32, buffer=nl.psum, bufs=2 * TBM * TBN)
                   for _ in range(TBM * TBN)]
            for k in nl.affine_range(KT):
                if not hoist_rhs:
                    rhs_k = nl.load(rhs[k * TILE_K:(k + 1) * TILE_K, n * BN:(n + 1) * BN])
                for bm in nl.affine_range(TBM):
                    for bn in nl.affine_range(TBN):
                        mv = rhs_tiles[:, k, bn * TILE_N:(bn + 1) * TILE_N] if hoist_rhs else \
                            rhs_k[:, bn * TILE_N:(bn + 1) * TILE_N]
                        nl.isa.nc_matmul(res[bm * TBN + bn], lhsT_tiles[:, k, bm * TILE_M:(bm + 1) * TILE_M], mv,
                                         accumulate=True)
            for bm in nl.affine_range(TBM):
                for bn in nl.affine_range(TBN):
                    r0, c0 = m * BM + bm * TILE_M, n * BN + bn * TILE_N
                    nl.store(result[r0:r0 + TILE_M, c0:c0 + TILE_N], nl.copy(res[bm * TBN + bn], dtype=result.dtype))
    return result


@nl.jit
def mm_block_all(lhsT, rhs, TBM=16, TBN=2, TBK=8, bufs=2):
    """Optimisation 3 / v5: block M, N and K; K blocks accumulate into SBUF result tiles on VectorE.

    As in the tutorial, the SBUF accumulators have the input dtype (BF16 on trn1, FP32 on trn2).
    """
    K, M = lhsT.shape
    N = rhs.shape[1]
    BM, BN, BK = TILE_M * TBM, TILE_N * TBN, TILE_K * TBK
    NBM, NBK = M // BM, K // BK
    result = nl.ndarray((M, N), lhsT.dtype, buffer=nl.shared_hbm)
    for n in nl.affine_range(N // BN):
        result_tiles = nl.zeros((TILE_M, NBM * TBM * TBN, TILE_N), lhsT.dtype, bufs=1)
        for k in nl.sequential_range(NBK):
            rhs_tiles = nl.ndarray((TILE_K, TBK, BN), rhs.dtype, bufs=bufs)
            for bk in nl.affine_range(TBK):
                k0 = (k * TBK + bk) * TILE_K
                rhs_tiles[:, bk, :] = nl.load(rhs[k0:k0 + TILE_K, n * BN:(n + 1) * BN])
            for m in nl.affine_range(NBM):
                lhsT_tiles = nl.ndarray((TILE_K, TBK, BM), lhsT.dtype, bufs=bufs)
                for bk in nl.affine_range(TBK):
                    k0 = (k * TBK + bk) * TILE_K
                    lhsT_tiles[:, bk, :] = nl.load(lhsT[k0:k0 + TILE_K, m * BM:(m + 1) * BM])
                for bn in nl.affine_range(TBN):
                    for bm in nl.affine_range(TBM):
                        res = nl.ndarray((TILE_M, TILE_N), nl.float32, buffer=nl.psum, bufs=4)
                        for bk in nl.affine_range(TBK):
                            nl.isa.nc_matmul(res, lhsT_tiles[:, bk, bm * TILE_M:(bm + 1) * TILE_M],
                                             rhs_tiles[:, bk, bn * TILE_N:(bn + 1) * TILE_N], accumulate=bk > 0)
                        acc = result_tiles[:, (m * TBM + bm) * TBN + bn, :]
                        nl.isa.tensor_tensor(acc, acc, res, "add")
        for m in nl.affine_range(NBM):
            for bm in nl.affine_range(TBM):
                packed = nl.ndarray((TILE_M, BN), result.dtype)
                for bn in nl.affine_range(TBN):
                    packed[:, bn * TILE_N:(bn + 1) * TILE_N] = nl.copy(result_tiles[:, (m * TBM + bm) * TBN + bn, :],
                                                                      dtype=result.dtype)
                r0 = (m * TBM + bm) * TILE_M
                nl.store(result[r0:r0 + TILE_M, n * BN:(n + 1) * BN], packed)
    return result


# -- micro kernels -------------------------------------------------------------------------------------
@nl.jit
def dma_4x4096(a):
    out = nl.ndarray((1, 1), nl.float32, buffer=nl.shared_hbm)
    t = nl.load(a)
    nl.store(out, nl.copy(t[0:1, 0:1], dtype=nl.float32))
    return out


@nl.jit
def scalar_chain(x, n=64):
    out = nl.ndarray((128, 1), nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    for _ in nl.sequential_range(n):
        t[...] = nl.activation("identity", t, bias=0.5, scale=1.0)
    nl.store(out, t)
    return out


@nl.jit
def tiny_add(a, b):
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.add(nl.load(a), nl.load(b)))
    return out


# -- the table -------------------------------------------------------------------------------------------
def _mm_row(label, kernel, profile, dtype, M, K, N, published_ms, extra=None, **kw):
    t0 = time.perf_counter()
    s = kernel.schedule(TensorSpec((K, M), dtype), TensorSpec((K, N), dtype), profile=profile, **kw)
    wall = time.perf_counter() - t0
    ms = s.latency_ns / 1e6
    rows = [(label, "latency (ms)", published_ms, ms)]
    u = s.utilization()
    for eng, pub in (extra or {}).items():
        rows.append((label, f"{eng} active (%)", pub, 100 * u[eng]))
    info = f"{s.n_instructions} instrs, {wall:.1f} s, TensorE {100 * s.tensor_peak_fraction():.1f}% of peak"
    return rows, info


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="scale M and N down 4x (smoke run)")
    args = ap.parse_args(argv)
    M, K, N = 4096, 8192, 8192
    scale = 1.0
    if args.quick:
        M, N, scale = M // 4, N // 4, 1 / 16
    rows, notes = [], []

    def add(r_i):
        r, i = r_i
        rows.extend(r)
        notes.append(f"{r[0][0]}: {i}")
        print(f"  simulated {r[0][0]} ({i})", file=sys.stderr)

    # C §1.1: trn1 BF16. The tiled row is the fit of costs.py's trn1 DMA rate; the others are predictions.
    add(_mm_row("trn1 bf16 tiled (C 1.1)", mm_tiled, "trn1", "bfloat16", M, K, N, 51.80 * scale))
    add(_mm_row("trn1 bf16 opt1 hoist (C 1.1)", mm_hoisted, "trn1", "bfloat16", M, K, N, 42.96 * scale))
    add(_mm_row("trn1 bf16 opt2 block M,N (C 1.1)", mm_block_free, "trn1", "bfloat16", M, K, N, 22.07 * scale))
    add(_mm_row("trn1 bf16 opt3 block M,N,K (C 1.1)", mm_block_all, "trn1", "bfloat16", M, K, N, 6.97 * scale,
                TBM=16 if not args.quick else 4))
    # C §1.2: trn2 FP32, with the engine-active percentages stated in the text.
    add(_mm_row("trn2 fp32 v2 tiled (C 1.2)", mm_tiled, "trn2", "float32", M, K, N, 39.89 * scale,
                {"dma": 99.93, "tensor": 87.28}))
    add(_mm_row("trn2 fp32 v3 hoist (C 1.2)", mm_hoisted, "trn2", "float32", M, K, N, 28.20 * scale,
                {"dma": 99.73, "tensor": 99.85}))
    add(_mm_row("trn2 fp32 v4 block M,N (C 1.2)", mm_block_free, "trn2", "float32", M, K, N, 28.41 * scale,
                {"tensor": 99.52, "dma": 95.70}, hoist_rhs=False))
    # [I] v5 blocking: TBM=8 and single buffers so the FP32 accumulators (128 KiB per partition),
    # lhsT and rhs blocks fit trn2's 224 KiB per partition.
    add(_mm_row("trn2 fp32 v5 block M,N,K (C 1.2)", mm_block_all, "trn2", "float32", M, K, N, 28.30 * scale,
                {"dma": 21.54, "tensor": 99.50, "vector": 10.55}, TBM=8 if not args.quick else 4, bufs=1))

    s = dma_4x4096.schedule(TensorSpec((4, 4096), "bfloat16"), profile="trn2")
    dma = next(i for i in s.program.instrs if i.op == "dma_copy")
    rows.append(("trn2 DMA 32 KiB, one engine (C 1.6)", "transfer (ns)", 1416.0, s.cost[dma.idx].occupancy_ns))
    s = scalar_chain.schedule(TensorSpec((128, 1), "float32"), profile="trn1")
    acts = [i.idx for i in s.program.instrs if i.op == "activation"]
    ii = (s.start[acts[-1]] - s.start[acts[1]]) / (len(acts) - 2)
    rows.append(("trn1 dependent ScalarE activation (C 1.7)", "issue interval (ns)", 189.0, ii))
    s = tiny_add.schedule(TensorSpec((4, 3), "float16"), TensorSpec((4, 3), "float16"), profile="trn2")
    rows.append(("tiny add kernel, trn2 [I] (C 1.8)", "device time (us)", 3.2, s.latency_ns / 1000))

    w = max(len(r[0]) for r in rows)
    print(f"{'figure'.ljust(w)}  {'metric':22s} {'published':>10s} {'simulated':>10s} {'error':>7s}")
    worst = 0.0
    for label, metric, pub, sim in rows:
        err = (sim - pub) / pub
        worst = max(worst, abs(err))
        print(f"{label.ljust(w)}  {metric:22s} {pub:10.3f} {sim:10.3f} {100 * err:+6.1f}%")
    print(f"worst |error|: {100 * worst:.1f}%")
    for n in notes:
        print("  " + n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
