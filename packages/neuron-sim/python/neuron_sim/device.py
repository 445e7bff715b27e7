"""Devices (visible logical NeuronCores), their properties and hardware profiles."""

from __future__ import annotations

import dataclasses

from . import _C


@dataclasses.dataclass(frozen=True)
class DeviceProperties:
    """Mirror of ``nsimDeviceProperties``: one logical NeuronCore.

    Rates are per second, capacities in bytes, and every figure is this logical
    core's share of its chip (see the profile table in the package README for
    the published figures behind each profile).
    """

    name: str
    profile: str
    device: int
    chip: int
    logical_core: int
    lnc: int
    physical_cores_per_chip: int
    logical_cores_per_chip: int
    hbm_capacity: int
    hbm_bandwidth: float
    host_link_bandwidth: float
    peak_flops_bf16: float
    peak_flops_fp32: float
    peak_flops_fp8: float
    vector_flops_fp32: float
    tensor_clock_hz: float
    vector_clock_hz: float
    scalar_clock_hz: float
    gpsimd_clock_hz: float
    sbuf_partitions: int
    sbuf_bytes_per_partition: int
    psum_bytes_per_partition: int
    psum_banks: int
    dma_engines: int
    dma_engine_bandwidth: float
    dma_fixed_overhead_ns: float
    launch_overhead_ns: float
    chip_link_bandwidth: float
    compute_capability_major: int
    compute_capability_minor: int

    @property
    def total_memory(self) -> int:
        """Same as ``hbm_capacity`` (the name torch.cuda and TorchNeuron use)."""
        return self.hbm_capacity

    @property
    def physical_cores(self) -> list[int]:
        """Global ids of the physical NeuronCores this logical core groups."""
        first = self.logical_core * self.lnc
        return list(range(first, first + self.lnc))


def device_count() -> int:
    """Number of visible logical NeuronCores (initialises the runtime)."""
    return _C.device_count()


def get_device_properties(device: int = 0) -> DeviceProperties:
    return DeviceProperties(**_C.device_properties(device))


def profiles() -> list[str]:
    """Names of the built-in hardware profiles."""
    return list(_C.profiles())


def profile_properties(name: str, lnc: int = 0) -> DeviceProperties:
    """Properties of logical core 0 of profile ``name`` with the given LNC
    (0: the profile's default), independent of the active configuration."""
    return DeviceProperties(**_C.profile_properties(name, lnc))


def mem_get_info(device: int = 0) -> tuple[int, int]:
    """``(free_bytes, total_bytes)`` of the device's memory."""
    return tuple(_C.mem_get_info(device))


def synchronize(device: int = 0) -> None:
    """Waits for every queue of the device (work is already complete on the host)."""
    _C.device_synchronize(device)


def device_time_ns(device: int = 0) -> float:
    """Simulated time at which every queue of the device is idle."""
    return _C.device_time_ns(device)


def counters(device: int = 0) -> dict[str, int]:
    """The device's runtime counters (allocations, copies, launches ...)."""
    return dict(_C.counters(device))


def reset_peak_counters(device: int = 0) -> None:
    _C.reset_peak_counters(device)


def host_counters() -> dict[str, int]:
    """Pinned host memory counters (process-wide)."""
    return dict(_C.host_counters())
