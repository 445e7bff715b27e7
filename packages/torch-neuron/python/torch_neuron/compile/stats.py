# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""What the backend compiled and ran: ``torch_neuron.compile_stats()``."""
from __future__ import annotations

import collections
import copy
import threading

_lock = threading.Lock()


def _empty() -> dict:
    return {
        "graphs": 0,                 # Dynamo graphs handed to the backend
        "partitions": 0,             # AOT graphs lowered (forward, backward, inference), per shape signature
        "specializations": 0,        # (graph, input shape signature) pairs lowered
        "foreach_split": 0,          # _foreach_* nodes split into one op chain per list element
        "foreach_inplace": 0,        # functional list ops copied back into their inputs, run in place instead
        "foreach_stacked": 0,        # list ops over 0-d tensors run as one op over their stacked values
        "noop_copies": 0,            # clone/alias nodes of computed values dropped (drop_noops)
        "host_recomposed": 0,        # decomposed (log-)softmax ops a fused kernel's host values run whole
        "recomposed_nodes": 0,       # decomposed (log-)softmax ops left unfused, run as the one ATen op
        "batched_kernels": 0,        # fused kernels whose host references run as one batch of _foreach_* ops
        "inplace_results": 0,        # fused results written straight into the graph input they update
        "fused_kernels": [],         # per generated kernel: name, ops (the chain), latency_ns, hbm bytes
        "eager_nodes": 0,            # ATen nodes run as eager ops with a native kernel (on their first run)
        "kernel_nodes": 0,           # of those: matmul / attention / norm nodes served by library kernels
        "fallback_nodes": 0,         # ATen nodes whose op ran as a host fallback (on their first run)
        "fallback_reasons": {},      # op -> why
        "unfused_chains": [],        # chains the generator could not turn into a kernel, with the reason
        "stage_seconds": collections.defaultdict(float),
        "cache": {"hits": 0, "misses": 0, "dir": None},
        "fused_launches": 0,
        "fused_hbm_bytes": 0,        # HBM bytes of the fused launches (their programs' schedules)
        "fused_eager_hbm_bytes": 0,  # what the same ops move as separate eager kernels
        "numerics_launches": 0,      # fused launches whose values the generated program computed
        "graph_launches": {},        # lowering -> {"latency_ns", "parts", "hbm_bytes", "resident_bytes"} (neff)
    }


_stats = _empty()


def get() -> dict:
    with _lock:
        out = copy.deepcopy(_stats)
    out["stage_seconds"] = dict(out["stage_seconds"])
    return out


def count(key: str) -> int:
    """How many entries the list ``key`` holds (no copy of the stats)."""
    with _lock:
        return len(_stats[key])


def clear() -> None:
    global _stats
    with _lock:
        _stats = _empty()


def add(key: str, n: int = 1) -> None:
    with _lock:
        _stats[key] += n


def stage(name: str, seconds: float) -> None:
    with _lock:
        _stats["stage_seconds"][name] += seconds


def cache_event(hit: bool, directory: str) -> None:
    with _lock:
        _stats["cache"]["hits" if hit else "misses"] += 1
        _stats["cache"]["dir"] = directory


def fused(entry: dict) -> None:
    with _lock:
        _stats["fused_kernels"].append(entry)


def unfused(entry: dict) -> None:
    with _lock:
        _stats["unfused_chains"].append(entry)


def fallback(op: str, reason: str) -> None:
    with _lock:
        _stats["fallback_nodes"] += 1
        _stats["fallback_reasons"][op] = reason


def record_launch(k) -> None:
    record_launches(1, k.dma_bytes, k.eager_bytes)


def record_launches(n: int, hbm_bytes: int, eager_hbm_bytes: int) -> None:
    with _lock:
        _stats["fused_launches"] += n
        _stats["fused_hbm_bytes"] += hbm_bytes
        _stats["fused_eager_hbm_bytes"] += eager_hbm_bytes


def record_numerics(k) -> None:
    with _lock:
        _stats["numerics_launches"] += 1


def graph_launch(name: str, latency_ns: float, parts: int, hbm_bytes: int = 0, resident_bytes: int = 0) -> None:
    """One lowering as graph launches: their latency, the kernel programs in them, the bytes
    their transfers move to or from HBM and those served from SBUF instead (resident tensors)."""
    with _lock:
        _stats["graph_launches"][name] = {"latency_ns": latency_ns, "parts": parts, "hbm_bytes": hbm_bytes,
                                          "resident_bytes": resident_bytes}


def graph_launches() -> dict:
    with _lock:
        return dict(_stats["graph_launches"])
