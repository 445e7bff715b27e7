# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""A compiled graph is one launch, as the Neuron compiler turns a graph into one NEFF.

On a lowered graph's first run every native launch in it is recorded with the tile programs
it runs and the graph tensors their HBM buffers are bound to: ``FusedKernel`` calls record
themselves, ATen nodes through a device-numerics observer (the backend's native-call hook).
``neuron_sim.isa.schedule_graph`` places those programs back to back on one NeuronCore: each engine runs them in graph order with no launch between them, and a kernel's loads of
tensors the graph did not write (weights, inputs) overlap the kernels before it. Its latency
is the graph's launch on the stream, with one launch overhead; the kernels' own launches are
counted as executions but not placed (``_C.begin_deferred_launches``). Tensors the graph makes
and uses itself stay in SBUF between its kernels when they fit, as the compiler allocates them;
its inputs and outputs go through HBM (``schedule_graph``'s ``keep``; option ``sbuf_residency``).

A host fallback cuts the graph (on the chip the host computes between two NEFFs): each run of
native kernels between fallbacks is one launch, and the fallback is placed as in eager. A
launch the recorder cannot bind to programs (a runtime op the kernel library does not serve)
enters the schedule as a barrier of its own duration. A later run that issues other launches
than the first (coverage decided by data) is placed launch by launch.
"""
from __future__ import annotations

import threading

import torch
from torch.utils import _pytree as pytree

from .. import _C

_local = threading.local()
ENGINES = ("tensor", "vector", "scalar", "gpsimd", "dma")   # nsimLaunchCost.engine_busy_ns order


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
        self.cursor = 0                             # the next part to match with a launch

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
        """One native ATen call (the observer's arguments): its launches' programs."""
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


_EVERY = object()     # every tensor of a run must reach HBM


def _keys_of(args, out) -> set:
    """Keys (host addresses of storages) of the neuron tensors among a graph's inputs and outputs."""
    keys = set()
    for t in pytree.tree_leaves((list(args), out)):
        if isinstance(t, torch.Tensor) and t.device.type == "neuron" and t.layout == torch.strided:
            keys.add(_host_range(t)[0])
    return keys


def active() -> Recorder | None:
    return getattr(_local, "recorder", None)


_hook_lock = threading.Lock()
_hook_users = 0


def _observe(op, entry_name, c10_dtype, inputs, args, results):
    rec = active()
    if rec is not None:
        rec.native(op, entry_name, c10_dtype, inputs, args, results)


def _install_hook() -> None:
    global _hook_users
    from ..native import numerics
    with _hook_lock:
        if _hook_users == 0:
            numerics.add_observer(_observe)
        _hook_users += 1


def _remove_hook() -> None:
    global _hook_users
    from ..native import numerics
    with _hook_lock:
        _hook_users -= 1
        if _hook_users == 0:
            numerics.remove_observer(_observe)


class GraphLaunch:
    """How one lowering's runs reach the timeline. The launches of its first run, in order, make
    the plan: each run of two or more native kernels between host fallbacks is one launch of
    its modelled latency (a NEFF), a fallback or a lone kernel is placed as it was issued. A
    later run that issues other launches (data-dependent coverage) is placed launch by launch."""

    def __init__(self, name: str, profile: str, sbuf_residency: bool = True):
        self.name = name
        self.profile = profile
        self.sbuf_residency = sbuf_residency
        self.plan: list | None = None     # per step: ("graph", first, last, ns, busy) or ("one", index)
        self.ops: tuple = ()              # (op, native) of every launch the plan was made from
        self.parts = 0
        self.hbm_bytes = 0                # bytes the graph launches' transfers move to or from HBM
        self.resident_bytes = 0           # bytes their kernels name in HBM that SBUF served

    @property
    def latency_ns(self) -> float | None:
        """The modelled latency of the graph's launches (None before the first run, or when
        every launch is placed on its own)."""
        if not self.plan:
            return None
        graphs = [step[3] for step in self.plan if step[0] == "graph"]
        return sum(graphs) if graphs else None

    def run(self, fn, args):
        first = self.plan is None
        rec = Recorder(self.profile) if first else None
        if first:
            _install_hook()
            _local.recorder = rec
        _C.begin_deferred_launches()
        try:
            out = fn(*args)
        except BaseException:
            self._place_each(_C.end_deferred_launches())
            raise
        finally:
            if first:
                _local.recorder = None
                _remove_hook()
        launches = _C.end_deferred_launches()
        ops = tuple((op, native) for op, _, _, native in launches)
        if first:
            self.ops = ops
            self.plan = self._make_plan(rec, launches, _keys_of(args, out) if self.sbuf_residency else None)
        if ops != self.ops or len({d for _, d, _, _ in launches}) > 1:
            self._place_each(launches)
        else:
            self._place(launches)
        return out

    @staticmethod
    def _place_each(launches) -> None:
        for i in range(len(launches)):
            _C.place_deferred_launch(i)
        _C.clear_deferred_launches()

    def _place(self, launches) -> None:
        graphs = sum(1 for step in self.plan if step[0] == "graph")
        k = 0
        for step in self.plan:
            if step[0] == "one":
                _C.place_deferred_launch(step[1])
                continue
            name = f"neuron::{self.name}" if graphs == 1 else f"neuron::{self.name}_part{k}"
            k += 1
            _C.place_graph_launch(name, step[1], step[2], step[3], list(step[4]))
        _C.clear_deferred_launches()

    def _make_plan(self, rec: Recorder, launches, keep) -> list:
        """Runs of native launches (two or more) become graph launches; the rest stay as issued.
        ``keep``: the graph's input and output tensors (keys), which must reach HBM; the other
        tensors of a run stay in SBUF when they fit (None: every tensor passes through HBM)."""
        plan, run = [], []
        later_launch = [False] * (len(launches) + 1)      # some launch outside a run follows i
        for i in range(len(launches) - 1, -1, -1):
            later_launch[i] = later_launch[i + 1] or not launches[i][3]

        def close():
            if len(run) >= 2:
                # A host fallback after the run may read any of its tensors from HBM.
                k = keep if keep is None or not later_launch[run[-1] + 1] else _EVERY
                plan.append(("graph", run[0], run[-1], *self._schedule(rec, launches, run, k)))
            else:
                plan.extend(("one", i) for i in run)
            run.clear()
        for i, (_, _, _, native) in enumerate(launches):
            if native:
                run.append(i)
            else:
                close()
                plan.append(("one", i))
        close()
        return plan

    def _schedule(self, rec: Recorder, launches, indices, keep) -> tuple[float, tuple]:
        """(latency ns, busy ns of tensor, vector, scalar, gpsimd, dma) of launches ``indices``
        scheduled as one."""
        from neuron_sim.isa import schedule_graph

        parts = []
        recorded = rec.parts
        for i in indices:
            op, _, ns, _ = launches[i]
            # Launches and recorded calls are in the same order; a launch nobody recorded (a
            # runtime op outside the kernel library) or recorded without programs is a barrier.
            j = next((k for k in range(rec.cursor, len(recorded)) if recorded[k][0] == op), None)
            if j is None or not recorded[j][1]:
                parts.append(float(ns))
                if j is not None:
                    rec.cursor = j + 1
                continue
            parts.extend(recorded[j][1])
            rec.cursor = j + 1
        self.parts += len(parts)
        if keep is _EVERY:
            keep = {k for p in parts if not isinstance(p, float) for k in p[1].values()}
        g = schedule_graph(parts, self.profile, keep)
        self.hbm_bytes += g.dma_bytes
        self.resident_bytes += g.resident_bytes
        return float(g.latency_ns), tuple(float(g.busy_ns.get(e, 0.0)) for e in ENGINES)
