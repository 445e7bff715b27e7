"""Allocator soak: millions of mixed allocations, frees and copies on several neuron streams.

Each operation is one of: allocate a tensor (sizes from 1 byte to tens of MiB, skewed small)
on a random stream, free a random live tensor, copy between two live tensors on a random
stream, `record_stream` a live tensor on another stream, or (rarely) `empty_cache()`. Every
stream switch goes through `torch.neuron.stream`, so blocks are cached per stream as the
caching allocator keeps them. At the end every tensor is freed, the streams synchronise and
`empty_cache()` runs: allocated, active and reserved bytes and the segment count must all be
back to zero, and the peak reserved memory must stay within a bound of the peak live bytes
(the peaks of the first and second half are reported: a leak shows as a growing second half).

    python tools/bench/allocator_soak.py                 # 10 million operations
    python tools/bench/allocator_soak.py --ops 50000 --json

Exit status 1 when a counter is not back to zero or reserved memory exceeds the bound.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import time

import torch

KIB, MIB = 1 << 10, 1 << 20


def _size(rng: random.Random) -> int:
    r = rng.random()
    if r < 0.70:
        return rng.randint(1, 64 * KIB)        # small pool
    if r < 0.97:
        return rng.randint(64 * KIB, 4 * MIB)  # large pool, split blocks
    return rng.randint(4 * MIB, 24 * MIB)      # big segments


def _stat(stats: dict, key: str) -> int:
    return int(stats.get(key, 0))


def run(ops: int, streams: int, max_live: int, seed: int, device: int,
        live_bytes_cap: int, progress: bool) -> dict:
    rng = random.Random(seed)
    dev = torch.device("neuron", device)
    torch.neuron.set_device(device)
    torch.neuron.empty_cache()
    torch.neuron.reset_peak_memory_stats(device)
    pool = [torch.neuron.current_stream(device)] + [torch.neuron.Stream(device=device)
                                                     for _ in range(streams - 1)]
    live: list[torch.Tensor] = []
    live_bytes = 0
    peak_live = 0
    frag_samples: list[float] = []
    counts = {"alloc": 0, "free": 0, "copy": 0, "record_stream": 0, "empty_cache": 0}
    started = time.perf_counter()
    done = 0
    half_peak = None
    while done < ops:
        stream = rng.choice(pool)
        batch = min(ops - done, rng.randint(1, 64))  # operations issued on this stream
        with torch.neuron.stream(stream):
            for _ in range(batch):
                r = rng.random()
                if (r < 0.45 and len(live) < max_live and live_bytes < live_bytes_cap) or not live:
                    n = _size(rng)
                    live.append(torch.empty(n, dtype=torch.uint8, device=dev))
                    live_bytes += n
                    peak_live = max(peak_live, live_bytes)
                    counts["alloc"] += 1
                elif r < 0.85:
                    t = live.pop(rng.randrange(len(live)))
                    live_bytes -= t.numel()
                    del t
                    counts["free"] += 1
                elif r < 0.95:
                    a, b = rng.choice(live), rng.choice(live)
                    n = min(a.numel(), b.numel(), 256 * KIB)
                    if a is not b:
                        a[:n].copy_(b[:n], non_blocking=True)
                    del a, b
                    counts["copy"] += 1
                elif r < 0.99995:
                    other = rng.choice(pool)
                    rng.choice(live).record_stream(other)
                    counts["record_stream"] += 1
                else:
                    torch.neuron.empty_cache()
                    counts["empty_cache"] += 1
        done += batch
        if half_peak is None and done >= ops // 2:
            half_peak = torch.neuron.max_memory_reserved(device)
            torch.neuron.reset_peak_memory_stats(device)  # the end's peak is the second half's
        if done % 4096 < batch:
            s = torch.neuron.memory_stats(device)
            reserved = _stat(s, "reserved_bytes.all.current")
            if reserved:
                frag_samples.append(1.0 - _stat(s, "allocated_bytes.all.current") / reserved)
            if progress and done % (1 << 20) < batch:
                print(f"  {done:>10,} ops  {time.perf_counter() - started:7.1f} s  reserved "
                      f"{reserved / MIB:8.1f} MiB  live {live_bytes / MIB:8.1f} MiB", flush=True)
    live.clear()
    for s in pool:
        s.synchronize()
    before_empty = torch.neuron.memory_stats(device)
    torch.neuron.empty_cache()
    after = torch.neuron.memory_stats(device)
    elapsed = time.perf_counter() - started
    second_half_peak = _stat(after, "reserved_bytes.all.peak")
    peak_reserved = max(second_half_peak, half_peak or 0)
    # Bound: blocks are cached per stream, so each stream may hold up to the peak live bytes
    # (rounded up to the allocator's block sizes) plus one big segment, and blocks freed after
    # record_stream wait for their streams' events: one more such share.
    bound = (streams + 1) * (peak_live + 32 * MIB)
    residual = {k: _stat(after, k) for k in (
        "allocated_bytes.all.current", "active_bytes.all.current", "reserved_bytes.all.current",
        "segment.all.current", "allocation.all.current", "active.all.current")}
    return {
        "ops": ops, "streams": streams, "seed": seed, "device": f"neuron:{device}",
        "counts": counts, "seconds": round(elapsed, 2),
        "ops_per_second": round(ops / elapsed),
        "peak_live_bytes": peak_live, "peak_reserved_bytes": peak_reserved,
        "peak_reserved_bytes_first_half": half_peak,
        "peak_reserved_bytes_second_half": second_half_peak,
        "reserved_bound_bytes": bound,
        "fragmentation_mean": round(sum(frag_samples) / max(1, len(frag_samples)), 4),
        "fragmentation_max": round(max(frag_samples, default=0.0), 4),
        "inactive_split_bytes_before_empty_cache": _stat(
            before_empty, "inactive_split_bytes.all.current"),
        "num_alloc_retries": _stat(after, "num_alloc_retries"),
        "num_ooms": _stat(after, "num_ooms"),
        "num_device_alloc": _stat(after, "num_device_alloc"),
        "num_device_free": _stat(after, "num_device_free"),
        "residual_after_empty_cache": residual,
        "ok": all(v == 0 for v in residual.values()) and peak_reserved <= bound,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ops", type=int, default=10_000_000)
    p.add_argument("--streams", type=int, default=4)
    p.add_argument("--max-live", type=int, default=2048, help="live tensors at most")
    p.add_argument("--live-cap", type=int, default=1024, help="live MiB at most")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = p.parse_args(argv)
    result = run(args.ops, args.streams, args.max_live, args.seed, args.device,
                 args.live_cap * MIB, progress=not args.json)
    if args.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k:42s} {v}")
    if not result["ok"]:
        print("allocator soak FAILED: counters not back to zero or reserved memory above the "
              "bound", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
