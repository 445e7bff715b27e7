# Copyright 2026 The neuron-kernels Authors. Licensed under the Apache License, Version 2.0.
"""Simulator speed: how fast the ISA simulator traces, schedules and executes kernels on this host.

Measured in one run:
* the library's 1024x1024x1024 BF16 matmul kernel: trace, timing-only schedule (targets:
  <= 0.1 s cold, trace included), functional execution (target <= 2 s), each against numpy's
  FP32 matmul of the same size on this host as the baseline;
* simulated instructions per second, functional and timing-only, over a mixed set of kernels;
* the projected device time of the matmul on each profile, as a fraction of TensorE peak.

Run: python packages/neuron-kernels/bench/bench_sim.py
"""

from __future__ import annotations

import os
import sys
import time

import neuron_sim

_SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "neuron-sim", "python", "neuron_sim"))
if os.path.isdir(_SRC) and _SRC not in neuron_sim.__path__:
    neuron_sim.__path__.insert(0, _SRC)

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402

from neuron_kernels import TensorSpec, lookup  # noqa: E402
from neuron_kernels import kernels as K  # noqa: E402
from neuron_kernels.language.jit import specialize, trace  # noqa: E402
from neuron_sim import isa  # noqa: E402


def _best(fn, repeat=3):
    best = float("inf")
    out = None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def main() -> int:
    rng = np.random.default_rng(0)
    n = 1024
    a = rng.standard_normal((n, n)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((n, n)).astype(ml_dtypes.bfloat16)
    sig = specialize((TensorSpec(a.shape, "bfloat16"), TensorSpec(b.shape, "bfloat16")), {}, 1, "trn2")

    t_trace, progs = _best(lambda: trace(K.matmul.fn, sig, "matmul"))
    prog = progs[0]
    t_sched, sched = _best(lambda: isa.schedule(prog))
    t_exec, out = _best(lambda: isa.execute(prog, [a, b]), repeat=2)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    t_np, ref = _best(lambda: a32 @ b32)
    err = float(np.max(np.abs(out[0].astype(np.float32) - ref)) / np.max(np.abs(ref)))

    print(f"1024^3 BF16 matmul kernel ({len(prog)} instructions), this host vs numpy FP32 matmul ({t_np * 1e3:.1f} ms):")
    print(f"  trace                     {t_trace * 1e3:8.1f} ms")
    print(f"  timing-only (schedule)    {t_sched * 1e3:8.1f} ms   trace+schedule {(t_trace + t_sched) * 1e3:.1f} ms "
          f"(target <= 100 ms: {'met' if t_trace + t_sched <= 0.1 else 'MISSED'})")
    print(f"  functional (execute)      {t_exec * 1e3:8.1f} ms   trace+execute {(t_trace + t_exec) * 1e3:.1f} ms "
          f"(target <= 2000 ms: {'met' if t_trace + t_exec <= 2.0 else 'MISSED'}); "
          f"{t_exec / t_np:.1f}x numpy; max rel. error vs FP32 {err:.1e}")
    mm = lookup("aten::mm", "bfloat16")
    t0 = time.perf_counter()
    cold = mm.estimate_ns([a.shape, b.shape], "bfloat16")
    t_cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(1000):
        mm.estimate_ns([a.shape, b.shape], "bfloat16")
    t_warm = (time.perf_counter() - t0) / 1000
    print(f"  lookup('aten::mm').estimate_ns: first call (trace + schedule) {t_cold * 1e3:.1f} ms, "
          f"repeated shape {t_warm * 1e6:.1f} us ({cold / 1e3:.2f} us simulated)")

    print("\nprojected device time of the same kernel (timing-only):")
    for prof in ("trn1", "trn2", "trn3"):
        s = K.matmul.schedule(TensorSpec(a.shape, "bfloat16"), TensorSpec(b.shape, "bfloat16"), profile=prof)
        c = isa.get_costs(prof)
        u = s.utilization()
        print(f"  {prof} ({c.core}): {s.latency_ns / 1e3:8.2f} us = {100 * s.tensor_peak_fraction():5.1f}% of "
              f"{c.tensor_peak_flops() / 1e12:.1f} TFLOPS BF16 peak; TensorE active {100 * u['tensor']:.0f}%, "
              f"DMA active {100 * u['dma']:.0f}%")

    # Instruction throughput over a mix of kernels (shapes large enough to amortise Python overheads).
    x = rng.standard_normal((2048, 2048)).astype(np.float32)
    w = rng.standard_normal((1024, 2048)).astype(np.float32)
    mix = [(K.softmax, (x,), {}), (K.binary, (x, x), {"op": "add"}), (K.linear, (x, w), {}),
           (K.layer_norm, (x,), {}), (K.matmul, (a, b), {})]
    n_instr = t_f = t_t = 0.0
    for kern, args, kw in mix:
        p = kern.programs(*args, **kw)[0]
        n_instr += len(p)
        t_t += _best(lambda: isa.schedule(p), repeat=1)[0]
        t_f += _best(lambda: isa.execute(p, [np.asarray(v) for v in args]), repeat=1)[0]
    print(f"\ninstruction throughput over {len(mix)} kernels ({int(n_instr)} instructions):")
    print(f"  timing-only  {n_instr / t_t:10.0f} instructions/s")
    print(f"  functional   {n_instr / t_f:10.0f} instructions/s  ({t_f / t_t:.1f}x the timing-only wall time)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
