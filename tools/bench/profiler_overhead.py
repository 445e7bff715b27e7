"""Wall-time overhead of torch.profiler (CPU + PrivateUse1) on the demo's training step.

Runs the char-GPT step of tools/demo/train_char_gpt.py on device "neuron" in alternating blocks
without and with a profiler session, and prints the median step wall time of each and their
ratio. The trace is processed (key_averages) outside the timed steps, as a user's
on_trace_ready would run after the step.

    .venv/bin/python tools/bench/profiler_overhead.py --steps 10 --blocks 3
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "demo"))
import train_char_gpt as demo  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402


def timed_steps(model, opt, x, y, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        demo.train_step(model, opt, x, y, amp=False)
        torch.neuron.synchronize()
        out.append(time.perf_counter() - t0)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=10, help="steps per block")
    ap.add_argument("--blocks", type=int, default=3, help="alternating (plain, profiled) block pairs")
    args = ap.parse_args(argv)

    import torch_neuron  # noqa: F401

    cfg = demo.GPTConfig()  # the demo's defaults
    _, model = demo.build_pair(cfg, 1234, "neuron")
    opt = demo.make_optimizer(model)
    x = torch.randint(0, cfg.vocab_size, (16, cfg.seq_len), device="neuron")
    y = torch.randint(0, cfg.vocab_size, (16, cfg.seq_len), device="neuron")
    timed_steps(model, opt, x, y, 3)  # warm: kernel decisions cached, optimizer state made

    # CPU-only profiling separates torch's own per-op recording from the device activity's cost.
    plain, cpu_only, profiled = [], [], []
    for _ in range(args.blocks):
        plain += timed_steps(model, opt, x, y, args.steps)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            cpu_only += timed_steps(model, opt, x, y, args.steps)
        prof.key_averages()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            profiled += timed_steps(model, opt, x, y, args.steps)
        prof.key_averages()
    p, c, q = statistics.median(plain), statistics.median(cpu_only), statistics.median(profiled)
    print(f"median step wall time: plain {p * 1e3:.1f} ms, CPU profiler {c * 1e3:.1f} ms "
          f"(ratio {c / p:.3f}), CPU + PrivateUse1 profiler {q * 1e3:.1f} ms (ratio {q / p:.3f}, "
          f"overhead {100 * (q / p - 1):.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
