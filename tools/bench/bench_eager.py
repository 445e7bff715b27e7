# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""Eager-mode host overhead of the `neuron` backend, as ratios against CPU eager.

Every figure is a ratio neuron/CPU measured in this run: each repeat times a
block of iterations on CPU and the same block on neuron back to back (the order
alternates between repeats), and the table shows the median of the per-repeat
ratios. Blocks are short (about a millisecond) so that a scheduler preemption
spoils few of them and the median discards those. Absolute times are printed
only for context; on a shared machine they drift, the interleaved ratios less so.

    python tools/bench/bench_eager.py            # full run (about a minute)
    python tools/bench/bench_eager.py --quick    # fewer repeats
    python tools/bench/bench_eager.py --strict   # exit 1 when a target is missed
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings

import torch
import torch_neuron

# The default fallback policy is what is measured; its one warning would print amid the table.
warnings.filterwarnings("ignore", category=torch_neuron.FallbackWarning)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "demo"))
import train_char_gpt as demo

OP_TARGET = 1.5
STEP_TARGET = 1.10


def small_op_cases(device: torch.device):
    """(name, callable) pairs over small tensors that live on `device`."""
    torch.manual_seed(0)
    a, b = torch.randn(100), torch.randn(100)
    m = torch.randn(16, 16)
    idx = torch.randint(0, 100, (10,))
    a, b, m, idx = (t.to(device) for t in (a, b, m, idx))
    return [
        ("add", lambda: a + b),
        ("mul", lambda: a * b),
        ("sum", lambda: a.sum()),
        ("index", lambda: a[idx]),
        ("matmul 16x16", lambda: m @ m),
        ("view+contiguous", lambda: a.view(10, 10).t().contiguous()),
    ]


def synchronizer(device: torch.device):
    if device.type == "cpu":
        return lambda: None
    return lambda: torch.accelerator.synchronize(device)


def time_block(fn, iters: int, sync) -> float:
    t = time.perf_counter()
    for _ in range(iters):
        fn()
    sync()
    return time.perf_counter() - t


def interleaved_ratio(cpu_fn, dev_fn, iters: int, repeats: int, dev_sync):
    """Median over repeats of t_dev / t_cpu, with the per-iteration times of that repeat."""
    no_sync = lambda: None
    for _ in range(2):  # warm-up: first calls pay one-time dispatch and allocator costs
        time_block(cpu_fn, max(1, iters // 10), no_sync)
        time_block(dev_fn, max(1, iters // 10), dev_sync)
    ratios, t_cpu, t_dev = [], [], []
    for r in range(repeats):
        if r % 2 == 0:
            c = time_block(cpu_fn, iters, no_sync)
            d = time_block(dev_fn, iters, dev_sync)
        else:
            d = time_block(dev_fn, iters, dev_sync)
            c = time_block(cpu_fn, iters, no_sync)
        ratios.append(d / c)
        t_cpu.append(c / iters)
        t_dev.append(d / iters)
    mid = sorted(range(repeats), key=ratios.__getitem__)[repeats // 2]
    return statistics.median(ratios), t_cpu[mid], t_dev[mid]


def bench_small_ops(device, iters, repeats):
    sync = synchronizer(device)
    rows = []
    for (name, cpu_fn), (_, dev_fn) in zip(small_op_cases(torch.device("cpu")), small_op_cases(device)):
        ratio, c, d = interleaved_ratio(cpu_fn, dev_fn, iters, repeats, sync)
        rows.append((f"op: {name}", ratio, c * 1e6, d * 1e6, "us", OP_TARGET))
    return rows


def bench_train_step(device, repeats):
    cfg = demo.GPTConfig()
    ids, _ = demo.load_corpus()
    cpu_model, dev_model = demo.build_pair(cfg, 1234, str(device))
    cpu_opt, dev_opt = demo.make_optimizer(cpu_model), demo.make_optimizer(dev_model)
    loader = demo.make_loader(ids, cfg, 16, 1234, pin=False)
    x, y = next(iter(loader))
    xd, yd = x.to(device), y.to(device)
    sync = synchronizer(device)
    ratio, c, d = interleaved_ratio(
        lambda: demo.train_step(cpu_model, cpu_opt, x, y, amp=False).item(),
        lambda: demo.train_step(dev_model, dev_opt, xd, yd, amp=False).item(),
        iters=2, repeats=repeats, dev_sync=sync,
    )
    return [("demo train step", ratio, c * 1e3, d * 1e3, "ms", STEP_TARGET)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="neuron")
    ap.add_argument("--iters", type=int, default=200, help="iterations per timed block (small ops)")
    ap.add_argument("--repeats", type=int, default=101)
    ap.add_argument("--step-repeats", type=int, default=15)
    ap.add_argument("--quick", action="store_true", help="fewer iterations and repeats")
    ap.add_argument("--strict", action="store_true", help="exit 1 when any target is missed")
    args = ap.parse_args(argv)
    if args.quick:
        args.iters, args.repeats, args.step_repeats = 200, 31, 5
    device = torch.device(args.device)

    print(f"eager overhead, {device} vs cpu (interleaved; median of {args.repeats} repeats x "
          f"{args.iters} iterations per op, {args.step_repeats} x 2 training steps); "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(f"{'benchmark':<22} {'ratio':>7} {'target':>8} {'result':>7}   {'cpu':>9} {device.type:>9}")
    rows, missed, errors = [], 0, 0

    def report(new_rows):
        nonlocal missed
        for name, ratio, c, d, unit, target in new_rows:
            ok = ratio <= target
            missed += not ok
            print(f"{name:<22} {ratio:>7.2f} {'<= ' + format(target, '.2f'):>8} {'PASS' if ok else 'MISS':>7}   "
                  f"{c:>7.2f}{unit} {d:>7.2f}{unit}", flush=True)
        rows.extend(new_rows)

    report(bench_small_ops(device, args.iters, args.repeats))
    try:
        report(bench_train_step(device, args.step_repeats))
    except Exception as e:  # noqa: BLE001 -- a backend failure is a result to print, not a reason to lose the table
        errors += 1
        print(f"{'demo train step':<22} {'-':>7} {'<= ' + format(STEP_TARGET, '.2f'):>8} {'ERROR':>7}   "
              f"{type(e).__name__}: {str(e).splitlines()[0][:120]}")
    op_ratios = [r[1] for r in rows if r[0].startswith("op: ")]
    print(f"median over small ops: {statistics.median(op_ratios):.2f} (target <= {OP_TARGET:.2f}); "
          f"{missed} of {len(rows) + errors} targets missed, {errors} failed to run")
    if errors:
        return 1
    return 1 if (args.strict and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
