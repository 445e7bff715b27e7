"""Projection of a profiled region onto a device profile: torch-free aggregation of timeline records.

``summarize`` turns the records of a region (``neuron_sim.timeline``), the device's properties and
its HBM high-water mark into the figures a projection report shows: step time, MFU/HFU, device
time by op, by cost model and native vs host, engine utilisation, communication share and the HBM
fit. Every figure carries the source figures and assumptions it was computed from.
"""
from __future__ import annotations

import collections
import dataclasses

from ..device_timeline import ENGINES, CostModel, DtypeClass, LaunchKind

MODEL_NAMES = {
    CostModel.KERNEL_SCHEDULE: "kernel schedule",
    CostModel.ROOFLINE: "roofline",
    CostModel.HOST_ROUND_TRIP: "host round trip",
    CostModel.COPY: "copy",
    CostModel.INTERCONNECT: "interconnect",
    CostModel.UNSPECIFIED: "given by the caller",
}


@dataclasses.dataclass
class Assumptions:
    """What a projection assumes beyond the simulated timeline; every field is configurable."""

    fit_headroom: float = 0.9   # fraction of HBM a run may use and still count as fitting
    top_ops: int = 12
    # Model flops per step for MFU (e.g. PaLM's 6N + 12*L*H*Q*T per token times tokens); None:
    # the counted flops of the launches (then MFU equals HFU).
    model_flops_per_step: float | None = None
    model_flops_source: str = "counted flops of the launches"


def _peak_for(dtype_flops: dict, props) -> tuple[float, str]:
    """The TensorE peak for the dtype that carries most of the flops."""
    dominant = max(dtype_flops, key=dtype_flops.get) if dtype_flops else DtypeClass.FP32
    if dominant == DtypeClass.BF16:
        return props.peak_flops_bf16, "bf16"
    if dominant == DtypeClass.FP8:
        return props.peak_flops_fp8, "fp8"
    return props.peak_flops_fp32, "fp32"


def summarize(records, props, *, steps: int, peak_bytes: int, region_ns: float | None = None,
              assumptions: Assumptions | None = None) -> dict:
    """Figures of a region of ``steps`` steps whose device records are ``records``.

    ``region_ns``: the region's simulated time (Event.elapsed_time); default the sum of the
    record durations on the busiest queue.
    """
    a = assumptions or Assumptions()
    steps = max(1, steps)
    by_queue = collections.Counter()
    by_op = collections.Counter()
    by_model = collections.Counter()
    by_origin = collections.Counter()
    engines = collections.Counter()
    dtype_flops = collections.Counter()
    flops = 0.0
    kernel_ns = 0.0
    for r in records:
        d = r.duration_ns
        by_queue[(r.device, r.queue_id)] += d
        by_op[r.name] += d
        by_model[MODEL_NAMES.get(r.model, str(r.model))] += d
        if r.kind == LaunchKind.KERNEL:
            by_origin["native kernel"] += d
        elif r.kind == LaunchKind.FALLBACK:
            by_origin["host fallback"] += d
        else:
            by_origin[{LaunchKind.COLLECTIVE: "collective", LaunchKind.MEMCPY: "copy",
                       LaunchKind.MEMSET: "memset"}.get(r.kind, "other")] += d
        flops += r.flops
        if r.flops:
            dtype_flops[r.dtype_class] += r.flops
        if r.model == CostModel.KERNEL_SCHEDULE:
            kernel_ns += d
            for name, busy in zip(ENGINES, r.engine_busy_ns):
                engines[name] += busy
    device_ns = sum(by_model.values())
    total_ns = region_ns if region_ns is not None else (max(by_queue.values()) if by_queue else 0.0)
    step_ns = total_ns / steps
    peak, peak_dtype = _peak_for(dtype_flops, props)
    hfu = (flops / (total_ns * 1e-9) / peak) if total_ns and peak else 0.0
    model_flops = a.model_flops_per_step * steps if a.model_flops_per_step else flops
    mfu = (model_flops / (total_ns * 1e-9) / peak) if total_ns and peak else 0.0
    capacity = int(props.hbm_capacity)
    fits = peak_bytes <= a.fit_headroom * capacity
    comm_ns = by_model.get("interconnect", 0.0)
    return {
        "profile": props.profile,
        "device": props.name,
        "steps": steps,
        "step_time_ms": step_ns / 1e6,
        "steps_per_s": 1e9 / step_ns if step_ns else 0.0,
        "device_time_ms": device_ns / 1e6,
        "counted_flops_per_step": flops / steps,
        "model_flops_per_step": model_flops / steps,
        "peak_flops": peak,
        "peak_dtype": peak_dtype,
        "mfu": mfu,
        "hfu": hfu,
        "by_op_ms": {k: v / 1e6 for k, v in by_op.most_common(a.top_ops)},
        "other_ops_ms": sum(v for k, v in by_op.most_common()[a.top_ops:]) / 1e6,
        "by_model_ms": {k: v / 1e6 for k, v in by_model.most_common()},
        "by_origin_ms": {k: v / 1e6 for k, v in by_origin.most_common()},
        "engine_utilisation": {k: (engines[k] / kernel_ns if kernel_ns else 0.0) for k in ENGINES},
        "kernel_schedule_ms": kernel_ns / 1e6,
        "communication_share": comm_ns / device_ns if device_ns else 0.0,
        "hbm_peak_bytes": int(peak_bytes),
        "hbm_capacity_bytes": capacity,
        "fits": bool(fits),
        "sources": {
            "step time": "simulated device time of the region (torch.neuron.Event elapsed time) / steps",
            "peak": f"{peak_dtype.upper()} TensorE peak of profile {props.profile}: {peak / 1e12:.1f} TFLOP/s "
                    "(neuron_sim profiles.cpp; calibration C §4.2)",
            "MFU": f"model flops per step ({a.model_flops_source}) / step time / peak",
            "HFU": "counted flops of every launch (matmul 2*M*N*K, one per element otherwise) / step time / peak",
            "engine utilisation": "busy time of each engine in the simulated kernel schedules / their duration "
                                  "(roofline and host launches have no engine schedule)",
            "HBM": f"allocator high-water mark vs the core's HBM share {capacity / 2**30:.1f} GiB; fits when "
                   f"<= {a.fit_headroom:.0%} of it (assumption fit_headroom)",
            "durations": "kernel schedule: the ISA simulator's engine schedule + launch overhead "
                         f"{props.launch_overhead_ns:.0f} ns (C §4.6); roofline: launch overhead + "
                         f"max(flops / peak, bytes / {props.hbm_bandwidth / 1e9:.0f} GB/s HBM); host round trip: "
                         f"roofline + bytes / {props.host_link_bandwidth / 1e9:.1f} GB/s host link (assumed PCIe) + "
                         f"2 x {props.dma_fixed_overhead_ns:.0f} ns DMA setup (C §4.5); interconnect: neuron_ccl",
            "compiled graphs": _graph_source(props.profile),
        },
    }


def _graph_source(profile: str) -> str:
    from ..isa import costs
    try:
        c = costs.get_costs(profile)
    except ValueError:
        return "a graph launch is its kernels' programs scheduled as one (neuron_sim.isa.schedule_graph)"
    return ("a graph launch is its kernels' programs scheduled as one (neuron_sim.isa.schedule_graph), "
            f"transfers at {c.graph_dma_bytes_per_ns:g} B/ns per DMA engine (costs.graph_dma_bytes_per_ns; "
            f"kernels alone {c.dma_bytes_per_ns:g}), intermediates of at most {c.graph_resident_fraction:.0%} "
            f"of SBUF ({c.graph_resident_fraction * c.sbuf_bytes / 2**20:.0f} MiB) kept on chip "
            "(assumption costs.graph_resident_fraction)")


def transformer_flops_per_token(n_params: int, n_layers: int, n_heads: int, head_dim: int, seq_len: int) -> float:
    """Training flops per token by the PaLM convention (arXiv 2204.02311 App. B): 6N + 12*L*H*Q*T."""
    return 6.0 * n_params + 12.0 * n_layers * n_heads * head_dim * seq_len
