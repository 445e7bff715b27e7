# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""Cost of the stream-race sanitizer (TORCH_NEURON_SANITIZE) on the demo's training step, as
the ratio sanitized / plain measured in this run.

Each repeat times one demo train step (tools/demo, default model size, loss.item() at the
end) with the sanitizer on and one with it off, in alternating order; the ratio printed is
the median of the per-repeat ratios, so drift on a shared machine cancels out. The same ratio
of process CPU time is printed beside it: on a loaded machine it moves less than wall time.

    python tools/bench/sanitizer_overhead.py              # 15 repeats
    python tools/bench/sanitizer_overhead.py --repeats 5
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
from torch_neuron import sanitizer

warnings.filterwarnings("ignore", category=torch_neuron.FallbackWarning)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "demo"))
import train_char_gpt as demo  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args(argv)
    if sanitizer.enabled():
        raise SystemExit("run without TORCH_NEURON_SANITIZE: the script switches the sanitizer itself")
    cfg = demo.GPTConfig()
    ids, _ = demo.load_corpus()
    _, model = demo.build_pair(cfg, 1234, "neuron")
    opt = demo.make_optimizer(model)
    x, y = next(iter(demo.make_loader(ids, cfg, 16, 1234, pin=False)))
    x, y = x.to("neuron"), y.to("neuron")

    def step(sanitized: bool) -> tuple[float, float]:
        if sanitized:
            sanitizer.enable()
        try:
            t0, c0 = time.perf_counter(), time.process_time()
            demo.train_step(model, opt, x, y, amp=False).item()
            return time.perf_counter() - t0, time.process_time() - c0
        finally:
            if sanitized:
                sanitizer.disable()

    step(False), step(True)  # warm-up: first-call costs on both sides
    ratios, cpu_ratios, plain, sanitized = [], [], [], []
    for i in range(args.repeats):
        if i % 2:
            s, p = step(True), step(False)
        else:
            p, s = step(False), step(True)
        plain.append(p[0])
        sanitized.append(s[0])
        ratios.append(s[0] / p[0])
        cpu_ratios.append(s[1] / p[1])
    print(f"sanitizer overhead on the demo train step (batch 16, seq {cfg.seq_len}, {cfg.n_layers} layers): "
          f"sanitized/plain = {statistics.median(ratios):.2f}x wall, {statistics.median(cpu_ratios):.2f}x process CPU "
          f"(median of {args.repeats} interleaved repeats; "
          f"plain {statistics.median(plain) * 1e3:.1f} ms, sanitized {statistics.median(sanitized) * 1e3:.1f} ms "
          f"for context)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
