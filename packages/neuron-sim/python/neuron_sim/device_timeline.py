"""Launches and the simulated device timeline."""

from __future__ import annotations

import dataclasses
import enum
import os

from . import _C


class LaunchKind(enum.IntEnum):
    """Mirror of ``nsimLaunchKind``."""

    KERNEL = 0
    FALLBACK = 1
    COLLECTIVE = 2
    MEMCPY = 3
    MEMSET = 4
    HOST_FUNC = 5


class CostModel(enum.IntEnum):
    """Mirror of ``nsimCostModel``: the model that produced a record's duration."""

    UNSPECIFIED = 0
    KERNEL_SCHEDULE = 1
    ROOFLINE = 2
    HOST_ROUND_TRIP = 3
    COPY = 4
    INTERCONNECT = 5


class DtypeClass(enum.IntEnum):
    """Mirror of ``nsimDtypeClass``: the operand precision that selects an engine peak."""

    FP32 = 0
    BF16 = 1
    FP8 = 2
    INT = 3
    NONE = 4


class ComputeClass(enum.IntEnum):
    """Mirror of ``nsimComputeClass``: the engine a roofline divides the flops by."""

    VECTOR = 0
    TENSOR = 1


ENGINES = ("tensor", "vector", "scalar", "gpsimd", "dma")  # order of engine_busy_ns


@dataclasses.dataclass(frozen=True)
class TimelineRecord:
    """One operation placed on a queue's simulated timeline (times in ns since init)."""

    name: str
    kind: LaunchKind
    device: int
    queue_id: int
    start_ns: float
    end_ns: float
    bytes: int
    model: CostModel = CostModel.UNSPECIFIED
    dtype_class: DtypeClass = DtypeClass.NONE
    flops: float = 0.0
    bytes_read: float = 0.0
    bytes_written: float = 0.0
    engine_busy_ns: tuple = (0.0,) * len(ENGINES)
    correlation_id: int = 0
    sequence: int = 0
    host_ns: int = 0  # host wall clock (ns since the Unix epoch) when the launch was placed
    detail: str | None = None  # e.g. a collective's algorithm and bytes

    @property
    def duration_ns(self) -> float:
        return self.end_ns - self.start_ns

    @property
    def engines(self) -> dict[str, float]:
        """Busy ns of each engine (kernel schedules only)."""
        return dict(zip(ENGINES, self.engine_busy_ns))


def timeline(device: int = 0) -> list[TimelineRecord]:
    """The device's recorded operations, oldest first, with names resolved."""
    return [TimelineRecord(name, _kind(kind), dev, queue, start, end, nbytes, _enum(CostModel, model),
                           _enum(DtypeClass, dtc), flops, br, bw, tuple(busy), corr, seq, host, detail)
            for (name, kind, dev, queue, start, end, nbytes, model, dtc, flops, br, bw, busy, corr, seq,
                 host, detail) in _C.timeline(device)]


def model_launch_duration(device: int, model: CostModel, dtype_class: DtypeClass, compute: ComputeClass,
                          flops: float = 0.0, bytes_read: float = 0.0, bytes_written: float = 0.0,
                          duration_ns: float = 0.0) -> float:
    """Modelled ns of a launch with these cost inputs on ``device`` (``nsimModelLaunchDuration``)."""
    return _C.model_launch_duration(device, int(model), int(dtype_class), int(compute), flops, bytes_read,
                                    bytes_written, duration_ns)


def _enum(cls, value):
    return cls(value) if value in cls._value2member_map_ else value


def _kind(value: int):
    return LaunchKind(value) if value in LaunchKind._value2member_map_ else value


def timeline_clear(device: int = -1) -> None:
    """Drops the recorded operations of ``device`` (-1: every device)."""
    _C.timeline_clear(device)


def set_timeline_enabled(enabled: bool) -> None:
    """Turns recording on or off at run time (``NEURON_SIM_TIMELINE`` sets the start value)."""
    _C.timeline_set_enabled(bool(enabled))


def export_chrome_trace(path: str | os.PathLike) -> None:
    """Writes every device's records as a Chrome trace (chrome://tracing, Perfetto)."""
    _C.export_chrome_trace(os.fspath(path))


def register_name(name: str) -> int:
    """Interns a launch name; returns its id."""
    return _C.register_name(name)


def get_name(name_id: int) -> str | None:
    return _C.get_name(name_id)
