# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""torch.compile(backend=BACKEND) against eager on the demo char-GPT, as ratios measured in one run.

Four copies of one model train on the same batches: eager; with the forward + loss compiled
(the optimizer step and gradient clipping eager); and with the optimizer step compiled too, as
PyTorch documents it (``torch.compile`` of a function calling ``opt.step()``; clipping stays
eager); and, for scale, the forward + loss under torch's own ``backend="aot_eager"`` (Dynamo and
AOTAutograd running the unfused ATen graph), whose host time is the floor torch.compile's
runtime sets for any backend. Steps alternate between the three after warm-up; per step it reads the simulated device time (device clock), the launches placed
on the timeline (neuron-sim's launch counter) and the host wall time. At the end the optimizer
step alone, eager against compiled, is timed on the host (calls alternating).

    python tools/bench/bench_compile.py            # demo size, 8 measured steps
    python tools/bench/bench_compile.py --quick    # 3 measured steps
    python tools/bench/bench_compile.py --strict   # exit 1 when a target is missed
"""
from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import time
import warnings

import torch
import torch.nn.functional as F
import torch_neuron

warnings.filterwarnings("ignore", category=torch_neuron.FallbackWarning)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "demo"))
import train_char_gpt as demo  # noqa: E402

BACKEND = "neuron"
TARGETS = {"device": 0.6, "wall": 1.1, "compile_s": 60.0}


def loss_of(model, x, y):
    logits = model(x)
    return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.view(-1))


def step(loss_fn, model, opt, x, y, amp, opt_step=None):
    with torch.autocast("neuron", dtype=torch.bfloat16, enabled=amp):
        loss = loss_fn(model, x, y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    (opt_step or opt.step)()
    return loss


def measure(fn, device):
    import neuron_sim
    torch.neuron.synchronize()
    t0, l0 = torch_neuron.device_time_ns(device), neuron_sim.counters(device.index)["launches"]
    w = time.perf_counter()
    loss = fn().item()
    torch.neuron.synchronize()
    wall = time.perf_counter() - w
    return loss, torch_neuron.device_time_ns(device) - t0, neuron_sim.counters(device.index)["launches"] - l0, wall


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--amp", action="store_true")
    ap.add_argument("--strict", action="store_true")
    args = ap.parse_args(argv)
    steps = 3 if args.quick else args.steps
    device = torch.device("neuron", 0)
    torch.neuron.set_device(device)
    cfg = demo.GPTConfig()
    batch = 16
    ids, _ = demo.load_corpus()
    torch.manual_seed(1234)
    base = demo.CharGPT(cfg)
    m_e, m_c, m_o, m_a = (copy.deepcopy(base).to(device) for _ in range(4))
    o_e, o_c, o_o, o_a = (demo.make_optimizer(m) for m in (m_e, m_c, m_o, m_a))
    # One compiled function per compiled model, as in a user's loop: Dynamo caches per code
    # object, and one function compiled for two models would test the other model's guards first
    # on every call.
    compiled = torch.compile(loss_of, backend=BACKEND)
    compiled_o = torch.compile(lambda model, x, y: loss_of(model, x, y), backend=BACKEND)
    compiled_a = torch.compile(lambda model, x, y: loss_of(model, x, y), backend="aot_eager")

    @torch.compile(backend=BACKEND)
    def opt_step():
        o_o.step()
    loader = demo.make_loader(ids, cfg, batch, 1234, pin=True)
    it = iter(loader)
    torch_neuron.clear_compile_stats()

    batches = [next(it) for _ in range(args.warmup + steps)]
    rows = []
    compile_s = None
    for i, (x, y) in enumerate(batches):
        x, y = x.to(device), y.to(device)
        e = measure(lambda x=x, y=y: step(loss_of, m_e, o_e, x, y, args.amp), device)
        c = measure(lambda x=x, y=y: step(compiled, m_c, o_c, x, y, args.amp), device)
        o = measure(lambda x=x, y=y: step(compiled_o, m_o, o_o, x, y, args.amp, opt_step), device)
        a = measure(lambda x=x, y=y: step(compiled_a, m_a, o_a, x, y, args.amp), device)
        if i == 0:
            compile_s = c[3]   # the first compiled step: Dynamo + AOT + lowering + kernel generation
            compile_opt_s = o[3]  # its own Dynamo pass over opt.step, plus the model's graph for m_o
        if i >= args.warmup:
            rows.append((e, c, o, a))
    med = statistics.median
    # The optimizer step alone (after the last step's backward), host time: eager's against the
    # compiled one, called alternately.
    opt_e, opt_c = [], []
    for _ in range(3 if args.quick else 15):
        for fn, acc in ((o_e.step, opt_e), (opt_step, opt_c)):
            torch.neuron.synchronize()
            t = time.perf_counter()
            fn()
            torch.neuron.synchronize()
            acc.append(time.perf_counter() - t)
    dev_e, dev_c = med(r[0][1] for r in rows), med(r[1][1] for r in rows)
    dev_o = med(r[2][1] for r in rows)
    la_e, la_c, la_o = (med(r[k][2] for r in rows) for k in range(3))
    wall_ratio = med(r[1][3] / r[0][3] for r in rows)
    wall_o = med(r[2][3] / r[0][3] for r in rows)
    wall_a = med(r[3][3] / r[0][3] for r in rows)
    loss_diff = max(abs(r[0][0] - r[1][0]) for r in rows)
    loss_diff_o = max(abs(r[0][0] - r[2][0]) for r in rows)
    s = torch_neuron.compile_stats()
    per_step_hbm = (s["fused_hbm_bytes"], s["fused_eager_hbm_bytes"])
    print(f"char-GPT {cfg.n_layers} layers, d_model {cfg.d_model}, seq {cfg.seq_len}, batch {batch}, "
          f"{'bf16 autocast' if args.amp else 'fp32'}; {steps} steps after {args.warmup} warm-up")
    print(f"{'figure':<44} {'eager':>12} {'compiled':>12} {'ratio':>8} {'target':>8} {'+opt.step':>12} {'ratio':>8}")
    print(f"{'projected device time per step (ms)':<44} {dev_e / 1e6:>12.3f} {dev_c / 1e6:>12.3f} "
          f"{dev_c / dev_e:>8.3f} {'<= 0.6':>8} {dev_o / 1e6:>12.3f} {dev_o / dev_e:>8.3f}")
    print(f"{'launches per step':<44} {la_e:>12.0f} {la_c:>12.0f} {la_c / la_e:>8.3f} {'':>8} {la_o:>12.0f} "
          f"{la_o / la_e:>8.3f}")
    print(f"{'host wall time per step (median ratio)':<44} {med(r[0][3] for r in rows) * 1e3:>10.1f}ms "
          f"{med(r[1][3] for r in rows) * 1e3:>10.1f}ms {wall_ratio:>8.3f} {'<= 1.1':>8} "
          f"{med(r[2][3] for r in rows) * 1e3:>10.1f}ms {wall_o:>8.3f}")
    print(f"{'  same step, backend=aot_eager (median ratio)':<44} {'':>12} "
          f"{med(r[3][3] for r in rows) * 1e3:>10.1f}ms {wall_a:>8.3f}")
    print(f"{'host time of opt.step alone (median ratio)':<44} {med(opt_e) * 1e3:>10.2f}ms {'':>12} {'':>8} "
          f"{'':>8} {med(opt_c) * 1e3:>10.2f}ms {med(c / e for c, e in zip(opt_c, opt_e)):>8.3f}")
    print(f"{'HBM bytes of the fused chains (all steps)':<44} {per_step_hbm[1]:>12} {per_step_hbm[0]:>12} "
          f"{per_step_hbm[0] / max(per_step_hbm[1], 1):>8.3f} {'':>8}")
    print(f"{'compile time, first step (s)':<44} {'':>12} {compile_s:>12.1f} {'':>8} {'<= 60':>8}")
    print(f"{'first step with opt.step compiled (s)':<44} {'':>12} {'':>12} {'':>8} {'':>8} "
          f"{compile_opt_s:>12.1f}")
    print(f"max |loss eager - loss compiled|: {loss_diff:.2e}; with opt.step compiled: {loss_diff_o:.2e}")
    print(f"fused kernels: {len(s['fused_kernels'])}, eager nodes: {s['eager_nodes']}, fallback nodes: "
          f"{s['fallback_nodes']}, stage seconds: " +
          ", ".join(f"{k} {v:.2f}" for k, v in s["stage_seconds"].items()))
    ok = dev_c / dev_e <= TARGETS["device"] and wall_ratio <= TARGETS["wall"] and compile_s <= TARGETS["compile_s"]
    return 0 if ok or not args.strict else 1


if __name__ == "__main__":
    sys.exit(main())
