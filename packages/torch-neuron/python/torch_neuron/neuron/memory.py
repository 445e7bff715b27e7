"""Memory statistics of device ``neuron`` (the caching allocator's, with torch.cuda's keys)."""
from __future__ import annotations

from typing import Any, Union

import torch

from .. import _C

_DeviceLike = Union[torch.device, str, int, None]


def _idx(device: _DeviceLike) -> int:
    from . import _index

    return _index(device)


def memory_stats(device: _DeviceLike = None) -> dict[str, Any]:
    return torch.accelerator.memory_stats(_idx(device))


def memory_allocated(device: _DeviceLike = None) -> int:
    return torch.accelerator.memory_allocated(_idx(device))


def max_memory_allocated(device: _DeviceLike = None) -> int:
    return torch.accelerator.max_memory_allocated(_idx(device))


def memory_reserved(device: _DeviceLike = None) -> int:
    return torch.accelerator.memory_reserved(_idx(device))


def max_memory_reserved(device: _DeviceLike = None) -> int:
    return torch.accelerator.max_memory_reserved(_idx(device))


def reset_peak_memory_stats(device: _DeviceLike = None) -> None:
    torch.accelerator.reset_peak_memory_stats(_idx(device))


def reset_accumulated_memory_stats(device: _DeviceLike = None) -> None:
    torch.accelerator.reset_accumulated_memory_stats(_idx(device))


def empty_cache() -> None:
    torch.accelerator.empty_cache()


def mem_get_info(device: _DeviceLike = None) -> tuple[int, int]:
    return torch.accelerator.get_memory_info(_idx(device))


def _fmt(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n:.2f} GiB"


def memory_summary(device: _DeviceLike = None, abbreviated: bool = False) -> str:
    """A table of the allocator's statistics (current, peak, allocated, freed) per pool."""
    idx = _idx(device)
    stats = memory_stats(idx)
    free, total = mem_get_info(idx)
    rows = [
        ("Allocated memory", "allocated_bytes", True),
        ("Active memory", "active_bytes", True),
        ("Requested memory", "requested_bytes", True),
        ("Reserved memory", "reserved_bytes", True),
        ("Non-releasable memory", "inactive_split_bytes", True),
        ("Allocations", "allocation", False),
        ("Active allocs", "active", False),
        ("Reserved segments", "segment", False),
        ("Non-releasable allocs", "inactive_split", False),
    ]
    pools = ("all",) if abbreviated else ("all", "large_pool", "small_pool")
    width = 86
    lines = ["=" * width,
             f" neuron:{idx} memory summary ({torch.neuron.get_device_name(idx)})".ljust(width),
             f" device capacity {_fmt(total)}, free {_fmt(free)}".ljust(width),
             "-" * width,
             f"{'Metric':<28}{'Cur Usage':>14}{'Peak Usage':>14}{'Tot Alloc':>15}{'Tot Freed':>15}",
             "-" * width]
    for label, key, is_bytes in rows:
        for pool in pools:
            name = label if pool == "all" else f"  from {pool.replace('_', ' ')}"
            vals = [stats.get(f"{key}.{pool}.{m}", 0) for m in ("current", "peak", "allocated", "freed")]
            cells = [_fmt(v) if is_bytes else str(v) for v in vals]
            lines.append(f"{name:<28}{cells[0]:>14}{cells[1]:>14}{cells[2]:>15}{cells[3]:>15}")
        lines.append("-" * width)
    lines.append(f"{'Allocation retries':<28}{stats.get('num_alloc_retries', 0):>14}")
    lines.append(f"{'Out-of-memory errors':<28}{stats.get('num_ooms', 0):>14}")
    lines.append("=" * width)
    return "\n".join(lines)
