"""Lets autograd's neuron worker threads go idle before the interpreter finalizes.

Backward on a neuron tensor runs on autograd's worker thread for that device. The
thread releases its graph task only after the waiting Python thread has been
woken, so a script that ends right after ``loss.backward()`` can reach interpreter
finalization while the worker still holds the graph; the graph's last release then
needs the GIL of a finalizing interpreter, and the process aborts. At exit, a
trivial backward is queued on each used device: the worker finishes its previous
task (dropping that graph) before it takes the new one, and the new graph holds
only tensors that stay alive until the end.
"""
from __future__ import annotations

import atexit

import torch

from . import _C

_keepalive: list[torch.Tensor] = []


def _drain_autograd_workers() -> None:
    try:
        for i in range(_C.device_count()):
            if _C.device_time_ns(i) <= 0:
                continue  # the device was never used
            x = torch.zeros((), device=f"neuron:{i}", requires_grad=True)
            _keepalive.append(x)
            (x * 1.0).backward()
    except Exception:  # noqa: BLE001 - exit must not fail because of the drain
        pass


def install() -> None:
    atexit.register(_drain_autograd_workers)
