"""Fault injection: drives reliability tests of everything above the device."""

from __future__ import annotations

from . import _C


def fail_nth_alloc(n: int) -> None:
    """The n-th (1-based) ``malloc`` from now on, on any device, raises
    OutOfMemoryError; ``n = 0`` disarms."""
    _C.fault_fail_nth_alloc(n)


def fail_kernel(name: str, count: int = 1) -> None:
    """The next ``count`` launches named ``name`` raise LaunchFailedError
    without running (``count < 0``: every launch)."""
    _C.fault_fail_kernel(name, count)


def set_device_lost(device: int) -> None:
    """Marks ``device`` lost: every later call that uses it raises
    DeviceLostError until ``neuron_sim.shutdown()``."""
    _C.fault_set_device_lost(device)


def clear() -> None:
    """Disarms allocation and kernel faults (a lost device stays lost)."""
    _C.fault_clear()
