"""Device memory, pinned host memory and copies.

Device pointers are plain Python ints. They are device addresses: the host
cannot dereference them (a stray access faults at once and the runtime reports
the allocation it hit). Copies take numpy arrays (or any C-contiguous buffer)
on the host side and check sizes against the live allocations.
"""

from __future__ import annotations

import ctypes
import dataclasses
import enum
import weakref

import numpy as np

from . import _C
from .errors import InvalidPointerError, NeuronSimError

ALIGNMENT = _C.ALIGNMENT


class MemcpyKind(enum.IntEnum):
    """Mirror of ``nsimMemcpyKind``."""

    HOST_TO_HOST = 0
    HOST_TO_DEVICE = 1
    DEVICE_TO_HOST = 2
    DEVICE_TO_DEVICE = 3
    DEFAULT = 4


class MemoryType(enum.IntEnum):
    """Mirror of ``nsimMemoryType``."""

    UNREGISTERED = 0
    HOST = 1
    DEVICE = 2
    DEVICE_UNALLOCATED = 3


@dataclasses.dataclass(frozen=True)
class PointerAttributes:
    type: MemoryType
    device: int
    base: int
    size: int


def malloc(size: int, device: int = 0) -> int:
    """Allocates ``size`` bytes on ``device``; returns the device address."""
    return _C.malloc(size, device)


def free(ptr: int) -> None:
    _C.free(ptr)


def memcpy_htod(dst: int, src, queue: _C.Queue | None = None) -> int:
    """Copies the bytes of the C-contiguous buffer ``src`` to device address ``dst``.

    With ``queue`` the copy is placed on that queue's timeline, otherwise on
    the device's default queue. Returns the number of bytes copied.
    """
    return _C.memcpy_htod(dst, src, queue)


def memcpy_dtoh(dst, src: int, queue: _C.Queue | None = None) -> int:
    """Fills the writable C-contiguous buffer ``dst`` from device address ``src``."""
    return _C.memcpy_dtoh(dst, src, queue)


def memcpy_dtod(dst: int, src: int, size: int, queue: _C.Queue | None = None) -> None:
    """Device-to-device copy; the devices may differ (peer copy)."""
    _C.memcpy(dst, src, size, MemcpyKind.DEVICE_TO_DEVICE, queue)


def memcpy(dst: int, src: int, size: int, kind: MemcpyKind = MemcpyKind.DEFAULT,
           queue: _C.Queue | None = None) -> None:
    """Raw copy between addresses (device, pinned host or any host memory)."""
    _C.memcpy(dst, src, size, kind, queue)


def memset(ptr: int, value: int, size: int, queue: _C.Queue | None = None) -> None:
    """Sets ``size`` bytes at device address ``ptr`` to ``value & 0xff``."""
    _C.memset(ptr, value, size, queue)


def pointer_attributes(ptr: int) -> PointerAttributes:
    kind, device, base, size = _C.pointer_attributes(ptr)
    return PointerAttributes(MemoryType(kind), device, base, size)


def host_alias(ptr: int, size: int) -> int:
    """The runtime's private host address of device range ``[ptr, ptr + size)``.

    For runtime components (kernel simulators, host execution) that work on the
    bytes in place; the range must lie in one live allocation.
    """
    return _C.device_to_host(ptr, size)


def alias_array(ptr: int, shape, dtype) -> np.ndarray:
    """A numpy view of device memory through its host alias (no copy).

    The view does not keep the allocation alive: using it after ``free(ptr)``
    reads freed memory, as a raw pointer would.
    """
    shape, dtype, nbytes = _layout(shape, dtype)
    raw = (ctypes.c_uint8 * nbytes).from_address(host_alias(ptr, max(nbytes, 1)))
    return np.frombuffer(raw, dtype=dtype).reshape(shape)


def _layout(shape, dtype) -> tuple[tuple[int, ...], np.dtype, int]:
    shape = (int(shape),) if np.isscalar(shape) else tuple(int(n) for n in shape)
    dtype = np.dtype(dtype)
    return shape, dtype, int(np.prod(shape, dtype=np.int64)) * dtype.itemsize


def malloc_host(size: int) -> int:
    """Allocates pinned host memory; returns its address (free with free_host)."""
    return _C.malloc_host(size)


def free_host(ptr: int) -> None:
    _C.free_host(ptr)


def empty_pinned(shape, dtype=np.float32) -> np.ndarray:
    """A numpy array over new pinned host memory, freed when the array is collected."""
    shape, dtype, nbytes = _layout(shape, dtype)
    address = _C.malloc_host(max(nbytes, 1))
    generation = _C.generation()
    raw = (ctypes.c_uint8 * max(nbytes, 1)).from_address(address)
    # The ctypes object is the array's base: free the memory when it goes away.
    weakref.finalize(raw, _free_host_if_current, address, generation)
    return np.frombuffer(raw, dtype=np.uint8, count=nbytes).view(dtype).reshape(shape)


def _free_host_if_current(address: int, generation: int) -> None:
    if _C.generation() == generation and _C.is_initialized():
        _C.free_host(address)


class DeviceBuffer:
    """An owning device allocation: freed by ``free()``, ``with`` or garbage collection."""

    def __init__(self, size: int, device: int = 0):
        self.ptr = _C.malloc(size, device)
        self.size = size
        self.device = device
        self._generation = _C.generation()

    @classmethod
    def from_array(cls, array, device: int = 0, queue: _C.Queue | None = None) -> "DeviceBuffer":
        array = np.ascontiguousarray(array)
        buf = cls(array.nbytes, device)
        buf.copy_from(array, queue)
        return buf

    def _live(self, call: str) -> int:
        if self.ptr == 0:
            raise InvalidPointerError(
                f"DeviceBuffer.{call}: buffer of {self.size} bytes on device {self.device} was freed")
        if self._generation != _C.generation():
            raise InvalidPointerError(
                f"DeviceBuffer.{call}: buffer of {self.size} bytes on device {self.device} "
                "belongs to a runtime that neuron_sim.shutdown() ended")
        return self.ptr

    def copy_from(self, array, queue: _C.Queue | None = None) -> None:
        _C.memcpy_htod(self._live("copy_from"), array, queue)

    def copy_to(self, out, queue: _C.Queue | None = None):
        _C.memcpy_dtoh(out, self._live("copy_to"), queue)
        return out

    def to_numpy(self, dtype=np.uint8, shape=None) -> np.ndarray:
        """A host copy of the buffer's bytes as an array of ``dtype`` and ``shape``."""
        out = np.empty(self.size // np.dtype(dtype).itemsize, dtype=dtype)
        self.copy_to(out)
        return out if shape is None else out.reshape(shape)

    def free(self) -> None:
        _C.free(self._live("free"))
        self.ptr = 0

    def __int__(self) -> int:
        return self.ptr

    def __enter__(self) -> "DeviceBuffer":
        return self

    def __exit__(self, *exc) -> None:
        if self.ptr:
            self.free()

    def __del__(self):
        if self.ptr and self._generation == _C.generation() and _C.is_initialized():
            try:
                _C.free(self.ptr)
            except NeuronSimError:
                pass  # a lost device; nothing left to release

    def __repr__(self) -> str:
        return f"DeviceBuffer(ptr={self.ptr:#x}, size={self.size}, device={self.device})"
