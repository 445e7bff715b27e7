# Copyright 2026 The neuron-kernels Authors. Licensed under the Apache License, Version 2.0.
"""``@jit``: kernels traced once per shape signature into ISA programs, then run or scheduled.

The pipeline is three pure stages with a dumpable form between each:

1. ``specialize(args, kwargs, grid, profile) -> Signature``: shapes, dtypes and static values;
   the cache key.
2. ``trace(fn, signature) -> tuple[Program, ...]``: runs the Python kernel once per program id
   with trace-time values; loops unroll, every operator appends ISA instructions
   (``Program.dump()`` prints the result), and the builder checks SBUF/PSUM capacity.
3. a back end: ``neuron_sim.isa.execute`` (values) or ``neuron_sim.isa.schedule`` (time).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from typing import Any, Callable

import numpy as np

from neuron_sim.isa import DEFAULT_PROFILE, Program, ProgramBuilder, Schedule, execute, schedule
from neuron_sim.isa.dtypes import dtype_name

from . import core


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """Shape and dtype of an HBM argument, for tracing and timing without data."""
    shape: tuple
    dtype: str

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(s) for s in self.shape))
        object.__setattr__(self, "dtype", dtype_name(self.dtype))


@dataclasses.dataclass(frozen=True)
class Signature:
    args: tuple
    kwargs: tuple
    grid: tuple
    profile: str


def _spec(x):
    if isinstance(x, TensorSpec):
        return x
    if isinstance(x, np.ndarray):
        return TensorSpec(x.shape, x.dtype)
    if isinstance(x, (list, dict, set)):
        raise TypeError(f"kernel arguments must be arrays, TensorSpecs or hashable constants, got {type(x).__name__}")
    return x


def specialize(args, kwargs, grid=(1,), profile=None) -> Signature:
    grid = (grid,) if isinstance(grid, int) else tuple(grid)
    return Signature(tuple(_spec(a) for a in args), tuple(sorted((k, _spec(v)) for k, v in kwargs.items())),
                     grid, profile or DEFAULT_PROFILE)


def trace(fn: Callable, sig: Signature, name: str, default_bufs: int = 2) -> tuple[Program, ...]:
    programs = []
    for pid in itertools.product(*(range(g) for g in sig.grid)):
        b = ProgramBuilder(name if len(sig.grid) == 1 and sig.grid[0] == 1 else f"{name}{list(pid)}",
                           sig.profile, default_bufs)
        args = [core.Tensor(b.hbm(f"arg{i}", a.shape, a.dtype, role="input")) if isinstance(a, TensorSpec) else a
                for i, a in enumerate(sig.args)]
        kwargs = {}
        for k, v in sig.kwargs:
            kwargs[k] = core.Tensor(b.hbm(k, v.shape, v.dtype, role="input")) if isinstance(v, TensorSpec) else v
        prev = getattr(core._state, "ctx", None)
        core._state.ctx = core.TraceContext(b, pid, sig.grid)
        try:
            out = fn(*args, **kwargs)
        finally:
            core._state.ctx = prev
        outs = out if isinstance(out, (tuple, list)) else (() if out is None else (out,))
        for o in outs:
            if not isinstance(o, core.Tensor) or not o.acc.is_whole():
                raise TypeError(f"kernel {name} must return whole HBM tensors (nl.ndarray(..., buffer=nl.shared_hbm)),"
                                f" got {o!r}")
        b.set_outputs([o.acc for o in outs])
        programs.append(b.finish())
    return tuple(programs)


class LaunchSchedule:
    """Schedules of a multi-core launch: the cores run in parallel, so latency is the slowest core's."""

    def __init__(self, schedules: list[Schedule]):
        self.cores = schedules
        self.latency_ns = max(s.latency_ns for s in schedules)
        self.dma_bytes = sum(s.dma_bytes for s in schedules)
        self.flops = sum(s.flops for s in schedules)
        self.n_instructions = sum(s.n_instructions for s in schedules)

    def utilization(self) -> dict[str, float]:
        keys = self.cores[0].busy_ns.keys()
        return {k: sum(s.busy_ns[k] for s in self.cores) / (self.latency_ns * len(self.cores) or 1.0) for k in keys}

    def chrome_trace(self) -> dict:
        ev = []
        for i, s in enumerate(self.cores):
            ev.extend(s.chrome_trace(pid=i)["traceEvents"])
        return {"traceEvents": ev, "displayTimeUnit": "ns"}


class Kernel:
    """A traced tile kernel. Call it on numpy arrays to run it; ``kernel[n](...)`` launches n cores."""

    def __init__(self, fn: Callable, default_bufs: int = 2, name: str | None = None):
        self.fn = fn
        self.name = name or fn.__name__
        self.default_bufs = default_bufs
        self._programs: dict[Signature, tuple[Program, ...]] = {}
        self._schedules: dict[Signature, Any] = {}
        functools.update_wrapper(self, fn)

    def __getitem__(self, grid):
        return GridLaunch(self, grid)

    # stage 1+2 ------------------------------------------------------------------------------
    def programs(self, *args, grid=1, profile=None, **kwargs) -> tuple[Program, ...]:
        sig = specialize(args, kwargs, grid, profile)
        return self._programs_for(sig)

    def _programs_for(self, sig: Signature) -> tuple[Program, ...]:
        p = self._programs.get(sig)
        if p is None:
            p = self._programs[sig] = trace(self.fn, sig, self.name, self.default_bufs)
        return p

    def dump(self, *args, grid=1, profile=None, **kwargs) -> str:
        return "\n\n".join(p.dump() for p in self.programs(*args, grid=grid, profile=profile, **kwargs))

    # stage 3 --------------------------------------------------------------------------------
    def run(self, *args, grid=1, profile=None, **kwargs):
        """Execute functionally on numpy arrays; returns the kernel's outputs as numpy arrays."""
        sig = specialize(args, kwargs, grid, profile)
        progs = self._programs_for(sig)
        # Copies: kernels may update their inputs in place, the caller's arrays stay untouched.
        arrays = [np.array(a) for a in args if isinstance(a, np.ndarray)] + \
                 [np.array(v) for _, v in sorted(kwargs.items()) if isinstance(v, np.ndarray)]
        outs = None
        for p in progs:
            outs = execute(p, arrays, outputs=outs)
        # Outputs that alias inputs (in-place kernels) are the updated input copies.
        res = list(outs)
        return res[0] if len(res) == 1 else tuple(res)

    __call__ = run

    def schedule(self, *args, grid=1, profile=None, **kwargs):
        """Timing-only simulation (no data); cached per shape signature and profile."""
        sig = specialize(args, kwargs, grid, profile)
        s = self._schedules.get(sig)
        if s is None:
            progs = self._programs_for(sig)
            ss = [schedule(p) for p in progs]
            s = self._schedules[sig] = ss[0] if len(ss) == 1 else LaunchSchedule(ss)
        return s

    def estimate_ns(self, *args, grid=1, profile=None, **kwargs) -> float:
        return self.schedule(*args, grid=grid, profile=profile, **kwargs).latency_ns


class GridLaunch:
    """``kernel[grid]``: the kernel bound to a launch grid, run or scheduled with it."""

    def __init__(self, kernel: Kernel, grid):
        self.kernel = kernel
        self.grid = grid

    def __call__(self, *args, **kwargs):
        return self.kernel.run(*args, grid=self.grid, **kwargs)

    def schedule(self, *args, **kwargs):
        return self.kernel.schedule(*args, grid=self.grid, **kwargs)


def jit(fn: Callable | None = None, *, default_bufs: int = 2):
    """Decorate a tile kernel. Tiles allocated in a loop rotate over ``default_bufs`` buffers unless
    the allocation passes ``bufs=``."""
    if fn is None:
        return lambda f: Kernel(f, default_bufs)
    return Kernel(fn, default_bufs)
