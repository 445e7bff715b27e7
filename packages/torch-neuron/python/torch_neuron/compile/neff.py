# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""A compiled graph is one launch, as the Neuron compiler turns a graph into one NEFF.

On a lowered graph's first run every native launch in it is recorded with the tile programs
it runs and the graph tensors their HBM buffers are bound to: ``FusedKernel`` calls record
themselves, ATen nodes are recorded through the native-executor hook that device numerics
uses. ``neuron_sim.isa.schedule_graph`` places those programs back to back on one NeuronCore:
each engine runs them in graph order with no launch between them, and a kernel's loads of
tensors the graph did not write (weights, inputs) overlap the kernels before it. Its latency
is the graph's launch on the stream, with one launch overhead; the kernels' own launches are
counted as executions but not placed (``_C.begin_deferred_launches``).

A run that executes a host fallback is not one NEFF on the chip (the host computes between
two of them): its launches are placed one by one, as in eager, and so are those of every
later run of that graph. A launch the recorder cannot bind to programs (a runtime op the
kernel library does not serve) enters the graph schedule as a barrier of its own duration.
"""
from __future__ import annotations

import threading

import torch

from .. import _C

_local = threading.local()


def _host_range(t: torch.Tensor) -> tuple[int, int]:
    """Host address range of the storage under ``t`` (its host alias for a neuron tensor)."""
    st = t.untyped_storage()
    n = st.nbytes()
    if t.device.type == "neuron":
        from neuron_sim.memory import host_alias
        return (host_alias(st.data_ptr(), n), n) if n else (st.data_ptr(), 0)
    return st.data_ptr(), n


class _Ranges:
    """Host address ranges of the graph tensors a launch touches -> the key naming the tensor."""

    def __init__(self):
        self.ranges: list[tuple[int, int, int]] = []

    def add(self, lo: int, n: int, key: int) -> None:
        if n:
            self.ranges.append((lo, lo + n, key))

    def add_tensor(self, t) -> int | None:
        if not isinstance(t, torch.Tensor) or t.layout != torch.strided:
            return None
        lo, n = _host_range(t)
        self.add(lo, n, lo)
        return lo

    def key_of(self, address: int) -> int | None:
        for lo, hi, key in self.ranges:
            if lo <= address < hi:
                return key
        return None


def _array_address(a) -> int | None:
    import numpy as np
    if isinstance(a, np.ndarray) and a.size:
        return a.__array_interface__["data"][0]
    return None


def _hbm_arguments(call) -> list:
    """A kernel call's HBM arguments in the order its programs list their input buffers:
    positional arrays, then keyword arrays by name (``neuron_kernels.language.jit.specialize``)."""
    import numpy as np
    from neuron_kernels.language import TensorSpec
    hbm = (np.ndarray, TensorSpec)
    return [a for a in call.args if isinstance(a, hbm)] + \
        [v for _, v in sorted(call.kwargs.items()) if isinstance(v, hbm)]


class Recorder:
    """The programs of one run of a lowered graph, in launch order."""

    def __init__(self, profile: str):
        self.profile = profile
        self.parts: list[tuple[str, list]] = []    # (op, [(program, hbm keys), ...])

    def fused(self, name: str, programs, inputs, outputs) -> None:
        keys_in = [_host_range(t)[0] for t in inputs if isinstance(t, torch.Tensor)]
        keys_out = [_host_range(t)[0] for t in outputs]
        bound = []
        for p in programs:
            keys = {b.phys: k for b, k in zip(p.inputs, keys_in)}
            keys.update({b.phys: k for b, k in zip(p.outputs, keys_out) if b.phys not in keys})
            bound.append((p, keys))
        self.parts.append((f"neuron::{name}", bound))

    def native(self, op: str, entry_name: str, c10_dtype: str, inputs, args, results) -> None:
        """One native ATen call (the executor hook's arguments): its launches' programs."""
        import neuron_kernels

        from ..native import binders, estimate
        from ..native.bridge import name_of_c10
        from ..native.numerics import _operand

        bound = []
        try:
            dtype = name_of_c10(c10_dtype)
            entry = neuron_kernels.lookup(entry_name, dtype)
            with torch.no_grad():
                for ln in binders.bind(op, entry, dtype, inputs, results, args):
                    kernel = binders.kernel_of(ln, entry, dtype)
                    ranges = _Ranges()
                    arrays = []
                    for t in ln.tensors:
                        if t is None:
                            arrays.append(None)
                            continue
                        key = ranges.add_tensor(binders.unwrap(t))
                        arr = _operand(t)
                        a = _array_address(arr)
                        if a is not None and key is not None and ranges.key_of(a) is None:
                            ranges.add(a, arr.nbytes, key)     # a converted copy stands for its tensor
                        arrays.append(arr)
                    call = kernel.launch(*arrays, **estimate.attrs(ln, True))
                    hbm_args = _hbm_arguments(call)
                    keys_out = [ranges.add_tensor(t) if isinstance(t, torch.Tensor) else None for t in ln.targets]
                    for p in call.kernel.programs(*call.args, profile=self.profile, **call.kwargs):
                        keys = {}
                        for b, a in zip(p.inputs, hbm_args):
                            addr = _array_address(a)
                            k = ranges.key_of(addr) if addr is not None else None
                            if k is not None:
                                keys[b.phys] = k
                        for b, k in zip(p.outputs, keys_out):
                            if k is not None and b.phys not in keys:
                                keys[b.phys] = k
                        bound.append((p, keys))
        except Exception:  # noqa: BLE001 - an unbound launch enters the schedule by its duration
            bound = []
        self.parts.append((op, bound))


def active() -> Recorder | None:
    return getattr(_local, "recorder", None)


_hook_lock = threading.Lock()
_hook_users = 0


def _executor(op, entry_name, c10_dtype, inputs, args, results):
    rec = active()
    if rec is not None:
        rec.native(op, entry_name, c10_dtype, inputs, args, results)
    from ..native import numerics
    if numerics.device_numerics_enabled():
        numerics.execute(op, entry_name, c10_dtype, inputs, args, results)


def _install_hook() -> None:
    global _hook_users
    with _hook_lock:
        if _hook_users == 0:
            _C.set_native_executor(_executor)
        _hook_users += 1


def _remove_hook() -> None:
    global _hook_users
    from ..native import numerics
    with _hook_lock:
        _hook_users -= 1
        if _hook_users == 0:
            _C.set_native_executor(numerics.execute if numerics.device_numerics_enabled() else None)


class GraphLaunch:
    """How one lowering's runs reach the timeline: one launch of ``latency_ns`` (None until
    the first run was recorded), or each kernel's own launch (``per_op``)."""

    def __init__(self, name: str, profile: str):
        self.name = name
        self.profile = profile
        self.latency_ns: float | None = None
        self.ops: tuple = ()
        self.per_op = False
        self.parts = 0

    def run(self, fn, args):
        if self.per_op:
            return fn(*args)
        from .. import get_fallback_ops
        first = self.latency_ns is None
        before = get_fallback_ops() if first else None
        rec = Recorder(self.profile) if first else None
        if first:
            _install_hook()
            _local.recorder = rec
        _C.begin_deferred_launches()
        try:
            out = fn(*args)
        except BaseException:
            _C.end_deferred_launches()
            _C.settle_deferred_launches(True)
            raise
        finally:
            if first:
                _local.recorder = None
                _remove_hook()
        launches = _C.end_deferred_launches()
        ops = tuple(op for op, _, _ in launches)
        devices = {d for _, d, _ in launches}
        if first:
            fell_back = any(n > before.get(op, 0) for op, n in get_fallback_ops().items())
            if fell_back or len(devices) > 1 or not launches:
                self.per_op = True
            else:
                self.ops = ops
                self.latency_ns = self._schedule(rec, launches)
        elif ops != self.ops or len(devices) > 1:
            self.per_op = True       # the graph ran other kernels (a fallback): not one launch
        _C.settle_deferred_launches(self.per_op)
        if not self.per_op:
            from ..native.bridge import account_launch
            account_launch(f"neuron::{self.name}", torch.float32, devices.pop(), self.latency_ns)
        return out

    def _schedule(self, rec: Recorder, launches) -> float:
        from neuron_sim.isa import schedule_graph

        parts, i = [], 0
        recorded = rec.parts
        for op, _, ns in launches:
            # Launches and recorded calls are in the same order; a launch nobody recorded (a
            # runtime op outside the kernel library) or recorded without programs is a barrier.
            j = next((k for k in range(i, len(recorded)) if recorded[k][0] == op), None)
            if j is None or not recorded[j][1]:
                parts.append(float(ns))
                if j is not None:
                    i = j + 1
                continue
            parts.extend(recorded[j][1])
            i = j + 1
        self.parts = len(parts)
        return float(schedule_graph(parts, self.profile).latency_ns)
