"""neuron_sim: a simulated AWS Trainium device.

Devices are the visible logical NeuronCores of the simulated chips. Memory,
copies, queues, events and launches behave as on a device runtime; every
operation also occupies its queue's simulated timeline for a modelled
duration, so elapsed times report device time, not host time.

The runtime initialises on first use and reads its configuration from the
environment (see ``env_registry()``); ``shutdown()`` then ``init()`` re-reads it.
"""

from __future__ import annotations

from importlib import metadata as _metadata

from . import _C
from ._C import Event, Queue
from .device import (
    DeviceProperties,
    counters,
    device_count,
    device_time_ns,
    get_device_properties,
    host_counters,
    mem_get_info,
    profile_properties,
    profiles,
    reset_peak_counters,
    synchronize,
)
from .env import EnvVar, env_registry, env_values
from .errors import (
    ConfigError,
    DeviceLostError,
    ForkedChildError,
    ErrorCode,
    InvalidCopyError,
    InvalidDeviceError,
    InvalidEventError,
    InvalidPointerError,
    InvalidQueueError,
    InvalidValueError,
    LaunchFailedError,
    NeuronSimError,
    NotInitializedError,
    NotReadyError,
    OutOfMemoryError,
    TimingDisabledError,
)
from . import faults
from .library import get_include, get_library_dir, get_library_path
from .memory import (
    ALIGNMENT,
    DeviceBuffer,
    MemcpyKind,
    MemoryType,
    PointerAttributes,
    alias_array,
    empty_pinned,
    free,
    free_host,
    host_alias,
    malloc,
    malloc_host,
    memcpy,
    memcpy_dtod,
    memcpy_dtoh,
    memcpy_htod,
    memset,
    pointer_attributes,
)
from .device_timeline import (
    ENGINES,
    ComputeClass,
    CostModel,
    DtypeClass,
    LaunchKind,
    TimelineRecord,
    export_chrome_trace,
    get_name,
    model_launch_duration,
    register_name,
    set_timeline_enabled,
    timeline,
    timeline_clear,
)

__version__ = _metadata.version("neuron-sim")  # written once, in pyproject.toml
API_VERSION = _C.API_VERSION


def init() -> None:
    """Initialises the runtime now (otherwise the first call that needs it does)."""
    _C.init()


def shutdown() -> None:
    """Frees every allocation, queue and event; the next call re-reads the environment.

    Queues, events and pointers created before are stale afterwards and raise
    when used.
    """
    _C.shutdown()


def is_initialized() -> bool:
    return _C.is_initialized()


def queue_priority_range() -> tuple[int, int]:
    """``(least, greatest)`` queue priority; lower values run first, as in CUDA."""
    return tuple(_C.queue_priority_range())


def default_queue(device: int = 0) -> Queue:
    """The device's default queue (synchronous copies and memsets run on it)."""
    return Queue.default(device)


def model_copy_duration(device: int, kind: MemcpyKind, nbytes: int) -> float:
    """Modelled duration (ns) of a transfer of ``nbytes`` of the given kind."""
    return _C.model_copy_duration(device, kind, nbytes)

