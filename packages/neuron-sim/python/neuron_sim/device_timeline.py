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

    @property
    def duration_ns(self) -> float:
        return self.end_ns - self.start_ns


def timeline(device: int = 0) -> list[TimelineRecord]:
    """The device's recorded operations, oldest first, with names resolved."""
    return [TimelineRecord(name, _kind(kind), dev, queue, start, end, nbytes)
            for name, kind, dev, queue, start, end, nbytes in _C.timeline(device)]


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
