"""Lets autograd's neuron worker threads go idle before the interpreter finalizes.

Backward on a neuron tensor runs on autograd's worker thread for that device. Each
backward's graph task carries a Python object (the ``contextvars`` context that
``torch.autograd`` stashes for device threads), and the worker drops its reference
to the graph task only after the waiting Python thread has been woken. A script
that ends right after ``loss.backward()`` can therefore reach interpreter
finalization while the worker still holds the task; releasing the task then needs
the GIL of a finalizing interpreter, Python ends the thread with a forced unwind
through a destructor, and the process aborts ("terminate called without an active
exception").

At exit, one trivial backward is queued on each used device with a context object
of our own. The worker runs tasks in order, so the user's last task is released
before ours; when our context object's reference count is back to where it was,
the worker has released our task too and sits idle in its queue, holding no
Python object. Nothing is queued when no op ran off the main thread: then
autograd's workers were never started, and starting them during exit would
itself be unsafe.
"""
from __future__ import annotations

import atexit
import contextvars
import sys
import time
import warnings

import torch

from . import _C

_DRAIN_TIMEOUT_S = 10.0


def _drain_device(index: int) -> bool:
    """Runs a trivial backward on neuron:index; True once the worker released it."""
    x = torch.zeros((), device=f"neuron:{index}", requires_grad=True)
    y = x * 1.0
    ctx = contextvars.copy_context()
    baseline = sys.getrefcount(ctx)
    torch._C._stash_obj_in_tls("context", ctx)
    try:
        torch.autograd.Variable._execution_engine.run_backward(
            (y,), (torch.ones_like(y),), False, False, (), True, True)
    finally:
        torch._C._remove_obj_from_tls("context")
    del y
    deadline = time.monotonic() + _DRAIN_TIMEOUT_S
    while sys.getrefcount(ctx) > baseline:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.0005)  # releases the GIL the worker needs to drop its reference
    return True


def _drain_autograd_workers() -> None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the drain's own ops are not the user's
            if not _C.ops_ran_off_main_thread():
                return  # no backward ran on neuron: autograd's workers were never started
            for i in range(_C.device_count()):
                if _C.device_time_ns(i) > 0 and not _drain_device(i):
                    print(f"torch_neuron: autograd's worker for neuron:{i} did not go idle within "
                          f"{_DRAIN_TIMEOUT_S:.0f} s at exit; the process may abort while finalizing",
                          file=sys.stderr)
    except Exception:  # noqa: BLE001 - exit must not fail because of the drain
        pass


def install() -> None:
    atexit.register(_drain_autograd_workers)
