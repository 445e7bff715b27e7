"""The fallback warning itself: its text, and the user's line it is attributed to.

``report`` is called by the backend (C++, holding the GIL) from inside the op that fell
back, so the Python stack at that moment is the user's call path. The warning goes to
the innermost frame that is not library code (torch, torch_neuron and the other
workspace packages, the standard library, site-packages), where ``warnings.warn``
with a fixed stacklevel could not reach: the depth between the user's line and the
op differs per op (``torch.randn`` vs a module's forward vs ``loss.backward()``).
"""
from __future__ import annotations

import os
import sys
import sysconfig
import threading
import warnings

__all__ = ["FallbackWarning", "report"]


class FallbackWarning(UserWarning):
    """An op ran on the host instead of on a native neuron kernel."""


_LIBRARY_PACKAGES = frozenset({"torch", "torch_neuron", "neuron_sim", "neuron_kernels", "neuron_ccl"})


def _library_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if paths.get(k)}
    return tuple(os.path.join(os.path.realpath(r), "") for r in roots)


_ROOTS = _library_roots()
_real = {}  # co_filename -> its real path (symlinked venvs, relative paths)


def _is_ours(frame) -> bool:
    """torch and the workspace packages, and the interpreter's frozen modules."""
    name = frame.f_globals.get("__name__") or ""
    return name.partition(".")[0] in _LIBRARY_PACKAGES or frame.f_code.co_filename.startswith("<frozen")


def _is_library(frame) -> bool:
    if _is_ours(frame):
        return True
    filename = frame.f_code.co_filename
    path = _real.get(filename)
    if path is None:
        path = _real.setdefault(filename, os.path.realpath(filename) if os.path.isabs(filename) else filename)
    return path.startswith(_ROOTS)


_FORMATTING = frozenset({"__repr__", "__str__", "__format__"})


def _is_formatting(frame) -> bool:
    """torch's tensor printer (torch/_tensor_str.py) and Tensor's repr/format methods."""
    name = frame.f_globals.get("__name__")
    return name == "torch._tensor_str" or (name == "torch._tensor" and frame.f_code.co_name in _FORMATTING)


def _caller_frames(frame):
    # An op on a thread without Python frames (autograd's device workers) was started
    # by the main thread, which waits in backward(): its stack has the user's line.
    if frame is None:
        frame = sys._current_frames().get(threading.main_thread().ident)
    while frame is not None:
        yield frame
        frame = frame.f_back


def _message(op: str, dtype: str, rejected: bool, per_op: bool) -> str:
    why = (" for this call (its kernel does not cover these shapes, dtypes or attributes; "
           "torch_neuron.native_rejections() says why)") if rejected else ""
    head = (f"neuron: {op} ({dtype}) has no native neuron kernel{why}, so it ran on the host "
            "(a CPU fallback: on a Trainium chip its operands would round-trip through host memory).")
    if per_op:
        return (f"{head} This warning is shown once per op (TORCH_NEURON_FALLBACK_WARN=op); "
                "torch_neuron.get_fallback_ops() counts every fallback. "
                "TORCH_NEURON_FALLBACK_WARN=0 silences these warnings; "
                "TORCH_NEURON_STRICT=1 makes fallbacks errors.")
    return (f"{head} It is the first host fallback in this process; more may follow and are "
            "counted without a warning: torch_neuron.get_fallback_ops() lists them. "
            "TORCH_NEURON_FALLBACK_WARN=op warns once per op as each one first runs, "
            "TORCH_NEURON_FALLBACK_WARN=0 silences this warning, and TORCH_NEURON_STRICT=1 "
            "(or torch_neuron.set_strict(True)) makes fallbacks errors.")


def report(op: str, dtype: str, rejected: bool, per_op: bool) -> bool:
    """Warns about one fallback at the user's line. False when the op ran for tensor
    printing: no warning, and the next fallback is still a candidate."""
    user = other_library = outermost = None
    for frame in _caller_frames(sys._getframe(1)):
        if _is_formatting(frame):
            return False
        outermost = frame
        if not _is_library(frame):
            user = frame
            break
        if other_library is None and not _is_ours(frame):
            other_library = frame
    # A program that is itself installed (a console script) has no frame outside the
    # library roots: the innermost frame outside torch and this backend is its line.
    target = user or other_library or outermost
    message = _message(op, dtype, rejected, per_op)
    if target is None:  # no Python frame anywhere: C++ code at process level
        warnings.warn(message, FallbackWarning, stacklevel=1)
        return True
    # As warnings.warn does: the frame's module registry, and no module_globals (a loader
    # that cannot give source, such as `python -c`'s, would raise).
    registry = target.f_globals.setdefault("__warningregistry__", {})
    warnings.warn_explicit(message, FallbackWarning, target.f_code.co_filename, target.f_lineno,
                           module=target.f_globals.get("__name__"), registry=registry)
    return True
