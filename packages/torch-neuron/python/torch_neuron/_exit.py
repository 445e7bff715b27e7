"""Lets autograd's neuron worker threads go idle before the interpreter finalizes.

Backward on a neuron tensor runs on autograd's worker thread for that device. The
thread releases its graph task only after the waiting Python thread has been
woken, so a script that ends right after ``loss.backward()`` can reach interpreter
finalization while the worker still holds the graph; the graph's last release then
needs the GIL of a finalizing interpreter, and the process aborts. At exit, a
trivial backward is queued on each used device: the worker finishes its previous
task (dropping that graph) before it takes the new one; then the exit waits
(bounded) until the worker has dropped the new graph too, which it sees from the
reference count of the graph's only leaf. Nothing is queued when no op ran off
the main thread: then autograd's workers were never started, and starting them
during exit would itself be unsafe.
"""
from __future__ import annotations

import atexit
import time
import warnings

import torch

from . import _C

_keepalive: list[torch.Tensor] = []


_DRAIN_TIMEOUT_S = 2.0


def _drain_autograd_workers() -> None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the drain's own ops are not the user's
            if not _C.ops_ran_off_main_thread():
                return  # no backward ran on neuron: autograd's workers were never started
            for i in range(_C.device_count()):
                if _C.device_time_ns(i) <= 0:
                    continue  # the device was never used
                x = torch.zeros((), device=f"neuron:{i}", requires_grad=True)
                _keepalive.append(x)
                (x * 1.0).backward()
                deadline = time.monotonic() + _DRAIN_TIMEOUT_S
                # While the worker holds the graph, the graph's AccumulateGrad holds x too.
                while x._use_count() > 1 and time.monotonic() < deadline:
                    time.sleep(0.0005)
    except Exception:  # noqa: BLE001 - exit must not fail because of the drain
        pass


def install() -> None:
    atexit.register(_drain_autograd_workers)
