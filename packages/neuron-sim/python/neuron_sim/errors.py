"""Exceptions raised by neuron_sim: one class per runtime error code.

Every exception carries ``code`` (an :class:`ErrorCode`), ``name`` (the C
enumerator, e.g. ``NSIM_ERROR_OUT_OF_MEMORY``) and ``message`` (the runtime's
last-error message, which names the call, the device, the sizes and what to
change).
"""

from __future__ import annotations

import enum


class ErrorCode(enum.IntEnum):
    """Mirror of ``nsimError`` in neuron_sim.h."""

    SUCCESS = 0
    NOT_INITIALIZED = 1
    INVALID_VALUE = 2
    INVALID_DEVICE = 3
    OUT_OF_MEMORY = 4
    INVALID_POINTER = 5
    INVALID_COPY = 6
    INVALID_QUEUE = 7
    INVALID_EVENT = 8
    NOT_READY = 9
    LAUNCH_FAILED = 10
    DEVICE_LOST = 11
    TIMING_DISABLED = 12
    CONFIG = 13
    FORKED_CHILD = 14


class NeuronSimError(RuntimeError):
    """Base class of every error the simulated device reports."""

    code: ErrorCode = ErrorCode.SUCCESS

    def __init__(self, message: str, code: int | None = None, name: str = ""):
        super().__init__(message)
        if code is not None:
            # A code newer than this package stays a plain int.
            self.code = ErrorCode(code) if code in ErrorCode._value2member_map_ else code
        if not name:
            name = f"NSIM_ERROR_{self.code.name}" if isinstance(self.code, ErrorCode) else f"nsimError({self.code})"
        self.name = name
        self.message = message

    def __str__(self) -> str:
        return f"{self.message} [{self.name}]"


class NotInitializedError(NeuronSimError):
    code = ErrorCode.NOT_INITIALIZED


class InvalidValueError(NeuronSimError, ValueError):
    code = ErrorCode.INVALID_VALUE


class InvalidDeviceError(NeuronSimError, ValueError):
    code = ErrorCode.INVALID_DEVICE


class OutOfMemoryError(NeuronSimError):
    code = ErrorCode.OUT_OF_MEMORY


class InvalidPointerError(NeuronSimError, ValueError):
    code = ErrorCode.INVALID_POINTER


class InvalidCopyError(NeuronSimError, ValueError):
    code = ErrorCode.INVALID_COPY


class InvalidQueueError(NeuronSimError):
    code = ErrorCode.INVALID_QUEUE


class InvalidEventError(NeuronSimError):
    code = ErrorCode.INVALID_EVENT


class NotReadyError(NeuronSimError):
    code = ErrorCode.NOT_READY


class LaunchFailedError(NeuronSimError):
    code = ErrorCode.LAUNCH_FAILED


class DeviceLostError(NeuronSimError):
    code = ErrorCode.DEVICE_LOST


class TimingDisabledError(NeuronSimError):
    code = ErrorCode.TIMING_DISABLED


class ConfigError(NeuronSimError):
    """Invalid environment configuration; the message names the variable."""

    code = ErrorCode.CONFIG


class ForkedChildError(NeuronSimError):
    """Device use in a child forked after the runtime initialised (device memory is the parent's)."""

    code = ErrorCode.FORKED_CHILD


_BY_CODE = {cls.code: cls for cls in (
    NotInitializedError, InvalidValueError, InvalidDeviceError, OutOfMemoryError,
    InvalidPointerError, InvalidCopyError, InvalidQueueError, InvalidEventError,
    NotReadyError, LaunchFailedError, DeviceLostError, TimingDisabledError, ConfigError,
    ForkedChildError,
)}


def _from_code(code: int, name: str, message: str) -> NeuronSimError:
    """Builds the exception for a failed runtime call (used by neuron_sim._C)."""
    cls = _BY_CODE.get(code, NeuronSimError)
    return cls(message, code, name)
