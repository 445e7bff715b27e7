"""Stream-race sanitizer for device ``neuron`` (``TORCH_NEURON_SANITIZE``).

Every op on neuron tensors is a launch on the current stream of its device; the op's
schema says which memory it reads and writes. A read of memory last written on another
stream, or a write of memory last read or written on another stream, with no event
record/wait, wait_stream or synchronize ordering the two launches, is a race: it is
reported with both ops, both streams, the tensor, its allocation and both Python stacks.
The allocator's frees (with the streams named by ``record_stream``) and reuse are followed,
so freeing a tensor still in use on another stream and reusing its memory is a race too.

Off (the default), nothing is installed: each allocator, event and stream hook costs one
relaxed atomic load. The mode covers the thread that enabled it (backward runs there by
default, TORCH_NEURON_BACKWARD_ON_CALLER); ops inside a tensor subclass's own dispatch
(DTensor's local shards) are not seen.
"""
from __future__ import annotations

from typing import Optional

from .. import _C
from .mode import SanitizerMode
from .report import StreamRaceError, StreamRaceWarning

__all__ = ["enable", "disable", "enabled", "reports", "StreamRaceError", "StreamRaceWarning"]

_mode: Optional[SanitizerMode] = None


def enable(raise_errors: bool = True) -> None:
    """Starts the sanitizer on this thread. ``raise_errors=False`` warns
    (:class:`StreamRaceWarning`) instead of raising :class:`StreamRaceError`."""
    global _mode
    if _mode is not None:
        _mode.raise_errors = raise_errors
        return
    _C._set_sanitizing(True)
    _mode = SanitizerMode(raise_errors)
    _mode.__enter__()


def disable() -> None:
    global _mode
    if _mode is None:
        return
    mode, _mode = _mode, None
    mode.__exit__(None, None, None)
    _C._set_sanitizing(False)


def enabled() -> bool:
    return _mode is not None


def reports() -> list[str]:
    """Every race reported since the sanitizer started (also the ones that were warnings)."""
    return list(_mode.reports) if _mode is not None else []


def _enable_from_environment() -> None:
    from .. import env

    choice = env.get_choice("TORCH_NEURON_SANITIZE", {"1": "raise", "true": "raise", "on": "raise",
                                                      "false": "0", "off": "0", "": "0"})
    if choice != "0":
        enable(raise_errors=choice == "raise")
