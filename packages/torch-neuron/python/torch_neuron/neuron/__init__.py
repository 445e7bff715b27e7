"""``torch.neuron``: the device module of device ``neuron``, shaped like ``torch.cuda``."""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Iterable, Optional, Union

import neuron_sim
import torch

from .. import _C
from .memory import (
    empty_cache,
    max_memory_allocated,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_reserved,
    memory_stats,
    memory_summary,
    reset_accumulated_memory_stats,
    reset_peak_memory_stats,
)
from .random import (
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)

_DeviceLike = Union[torch.device, str, int, None]

__all__ = [
    "is_available", "is_initialized", "init", "device_count", "current_device", "set_device",
    "device", "device_of", "get_device_name", "get_device_properties", "get_device_capability",
    "synchronize", "Stream", "Event", "stream", "current_stream", "default_stream", "set_stream",
    "StreamContext", "manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed",
    "get_rng_state", "get_rng_state_all", "set_rng_state", "set_rng_state_all",
    "memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved",
    "memory_stats", "memory_summary", "reset_peak_memory_stats",
    "reset_accumulated_memory_stats", "empty_cache", "mem_get_info",
    "get_amp_supported_dtype", "is_bf16_supported",
]


def is_available() -> bool:
    return _C.device_count() > 0


def is_initialized() -> bool:
    # The backend initialises at import; a child forked after that may not use it (see _lazy_init).
    return not _C._is_in_bad_fork()


def init() -> None:
    _C._init()


def _lazy_init() -> None:
    _C._init()


def _is_in_bad_fork() -> bool:
    return _C._is_in_bad_fork()


def device_count() -> int:
    return _C.device_count()


def _index(device: _DeviceLike, optional: bool = True) -> int:
    if device is None:
        return _C.current_device()
    if isinstance(device, int):
        return device
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "neuron":
            raise ValueError(f"Expected a neuron device, but got: {device}")
        return _C.current_device() if device.index is None else device.index
    # torch.cuda's _get_device_index raises ValueError for an argument of another type.
    raise ValueError("Expected a torch.device with a specified index or an integer, but got: "
                     f"{device!r} ({type(device).__name__})")


def _checked_index(device: _DeviceLike, error: type) -> int:
    idx = _index(device)
    n = _C.device_count()
    if idx < 0 or idx >= n:
        raise error(f"Invalid device id neuron:{idx}: {n} neuron device(s) are visible (valid "
                    f"indices 0..{n - 1}; NEURON_RT_VISIBLE_CORES, NEURON_LOGICAL_NC_CONFIG and "
                    "NEURON_SIM_NUM_CHIPS select them)")
    return idx


def current_device() -> int:
    return _C.current_device()


def set_device(device: _DeviceLike) -> None:
    idx = _index(device)
    if idx >= 0:
        _C.set_device(idx)


class device:
    """Context manager that changes the current neuron device."""

    def __init__(self, device: _DeviceLike):
        self.idx = -1 if device is None else _index(device)
        self.prev_idx = -1

    def __enter__(self):
        self.prev_idx = _C.current_device()
        if self.idx >= 0 and self.idx != self.prev_idx:
            _C.set_device(self.idx)

    def __exit__(self, *exc: Any):
        if self.idx >= 0 and self.idx != self.prev_idx:
            _C.set_device(self.prev_idx)
        return False


class device_of(device):
    """Context manager that makes the device of ``obj`` (a tensor) current."""

    def __init__(self, obj: torch.Tensor):
        super().__init__(obj.get_device() if obj.device.type == "neuron" else None)


class _DeviceProperties:
    """Figures of one logical NeuronCore of the active profile (see neuron-ls).

    Every field of ``neuron_sim.DeviceProperties`` (the runtime's one source of device figures),
    plus the names torch.cuda users read: ``total_memory`` (``hbm_capacity``) and ``major`` /
    ``minor`` (``compute_capability_major`` / ``_minor``)."""

    def __init__(self, props: "neuron_sim.DeviceProperties"):
        self.__dict__.update(dataclasses.asdict(props))
        self.total_memory = props.total_memory
        self.major = props.compute_capability_major
        self.minor = props.compute_capability_minor

    def __repr__(self) -> str:
        return (f"_NeuronDeviceProperties(name='{self.name}', profile='{self.profile}', "
                f"total_memory={self.total_memory // (1 << 20)}MB, lnc={self.lnc}, "
                f"chip={self.chip}, logical_core={self.logical_core})")


def get_device_properties(device: _DeviceLike = None) -> _DeviceProperties:
    # torch.cuda.get_device_properties raises AssertionError("Invalid device id"); the
    # figures are neuron_sim's dictionary.
    index = _checked_index(device, AssertionError)
    return _DeviceProperties(neuron_sim.DeviceProperties(**_C.get_device_properties(index)))


def get_device_name(device: _DeviceLike = None) -> str:
    return get_device_properties(device).name


def get_device_capability(device: _DeviceLike = None) -> tuple[int, int]:
    p = get_device_properties(device)
    return (p.major, p.minor)


def synchronize(device: _DeviceLike = None) -> None:
    torch.accelerator.synchronize(_index(device))


def get_amp_supported_dtype() -> list[torch.dtype]:
    return [torch.float16, torch.bfloat16, torch.float32]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


class Stream(torch.Stream):
    """A neuron stream (a neuron_sim queue with its own simulated timeline)."""

    def __new__(cls, device: _DeviceLike = None, priority: int = 0, **kwargs):
        if "stream_id" in kwargs:
            return super().__new__(cls, **kwargs)
        return super().__new__(cls, device=torch.device("neuron", _index(device)), priority=priority)

    @property
    def priority(self) -> int:
        return _C.stream_priority(self.device_index, self.stream_id)

    def wait_event(self, event: "Event") -> None:
        event.wait(self)

    def wait_stream(self, stream: torch.Stream) -> None:
        super().wait_stream(stream)

    def record_event(self, event: Optional["Event"] = None) -> "Event":
        event = Event() if event is None else event
        event.record(self)
        return event

    def __repr__(self) -> str:
        return f"<torch.neuron.Stream device=neuron:{self.device_index} stream_id={self.stream_id}>"


def _wrap_stream(s: torch.Stream) -> Stream:
    return Stream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)


class Event(torch.Event):
    """A neuron event; elapsed_time reports simulated device milliseconds."""

    def __new__(cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        return super().__new__(cls, device=torch.device("neuron", _C.current_device()),
                               enable_timing=enable_timing, blocking=blocking, interprocess=interprocess)

    def record(self, stream: Optional[torch.Stream] = None) -> None:
        super().record(current_stream() if stream is None else stream)

    def wait(self, stream: Optional[torch.Stream] = None) -> None:
        super().wait(current_stream() if stream is None else stream)

    def elapsed_time(self, end_event: torch.Event) -> float:
        # torch.Event.elapsed_time accepts only the exact torch.Event type.
        return _C.event_elapsed_ms(self.event_id, end_event.event_id)


def current_stream(device: _DeviceLike = None) -> Stream:
    return _wrap_stream(torch.accelerator.current_stream(_index(device)))


def default_stream(device: _DeviceLike = None) -> Stream:
    idx = _index(device)
    cur = torch.accelerator.current_stream(idx)
    return Stream(stream_id=0, device_index=idx, device_type=cur.device_type)


def set_stream(stream: Optional[torch.Stream]) -> None:
    if stream is not None:
        torch.accelerator.set_stream(stream)


class StreamContext:
    """Makes ``stream`` current on its device (and that device current) in a with-block."""

    def __init__(self, stream: Optional[torch.Stream]):
        self.stream = stream
        self.prev_device = -1
        self.prev_stream: Optional[torch.Stream] = None
        self.prev_dst_stream: Optional[torch.Stream] = None

    def __enter__(self):
        if self.stream is None:
            return
        self.prev_device = _C.current_device()
        self.prev_stream = torch.accelerator.current_stream(self.prev_device)
        if self.stream.device_index != self.prev_device:
            self.prev_dst_stream = torch.accelerator.current_stream(self.stream.device_index)
            _C.set_device(self.stream.device_index)
        torch.accelerator.set_stream(self.stream)

    def __exit__(self, *exc: Any):
        if self.stream is None:
            return False
        if self.prev_dst_stream is not None:
            torch.accelerator.set_stream(self.prev_dst_stream)
        _C.set_device(self.prev_device)
        torch.accelerator.set_stream(self.prev_stream)
        return False


def stream(stream: Optional[torch.Stream]) -> StreamContext:
    return StreamContext(stream)
