# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""Shape-only execution: a program runs on ``neuron`` with every op decided and costed as when it
executes, without computing values, so full-size models run here.

    with torch_neuron.projection.shape_only() as run:
        train(model_at_full_size)
    print(run.text())

``TORCH_NEURON_SHAPE_ONLY=1`` turns it on for a whole process (any script, any launcher) and prints
the report when the process ends; ``python -m torch_neuron.projection --shape-only`` runs a script
so and writes the report per profile.

Which tensors carry values: host-to-device copies, factory ops (arange, full, zeros, ones, tensors
from Python data), and results of at most 64 KiB whose neuron operands all carry values; every
other tensor is valueless: device memory is reserved through the caching allocator and never
written, and it reads as zeros (a fill's constant after fill_/zeros/full). ``.item()``,
``.cpu()``, ``.tolist()``, printing and comparisons of valueless tensors give zeros; each such read
is listed with its origin. Data-dependent sizes (nonzero, masked_select, boolean-mask indexing,
unique) take their upper bound unless the mask deciding them carries values; an op with no meta
kernel and a valueless operand raises NotImplementedError naming the op.

Steps: a step ends at each optimizer step (a global optimizer post-hook) or at
``torch.profiler.profile.step()``; a run with neither is one step. The first step is reported
apart; the figures use the steady state (the steps after the first).
"""
from __future__ import annotations

import collections
import os
import sys
import threading

import torch

from .. import _C

__all__ = ["ShapeOnlyRun", "shape_only", "active_run", "PHASES"]

# The allocator's phases (runtime/NeuronAllocator.h): what memory held at the peak is split by.
PHASES = ("parameters, buffers and inputs", "activations and forward temporaries",
          "gradients and backward temporaries", "optimizer state and step temporaries")
SETUP, FORWARD, BACKWARD, OPTIMIZER = range(4)

_PACKAGE_DIRS = tuple(os.path.dirname(m.__file__) + os.sep for m in (torch, sys.modules["torch_neuron"]))


def user_frame(skip_dirs: tuple[str, ...] = _PACKAGE_DIRS):
    """The innermost frame outside torch and torch_neuron: the line that asked for the op."""
    f = sys._getframe(1)
    while f is not None:
        name = f.f_code.co_filename
        if not name.startswith(skip_dirs) and not name.startswith("<frozen"):
            return f
        f = f.f_back
    return None


def _where(frame) -> str:
    if frame is None:
        return "?"
    return f"{os.path.relpath(frame.f_code.co_filename)}:{frame.f_lineno}"


def _what(kind: str) -> str:
    """A host read as the user wrote it: item, cpu/tolist, print."""
    f = sys._getframe(2)
    while f is not None:
        name = f.f_code.co_filename
        if name.endswith(os.path.join("torch", "_tensor_str.py")):
            return "print"
        if not name.startswith(_PACKAGE_DIRS):
            break
        f = f.f_back
    return {"item": "item", "copy to host": "cpu"}.get(kind, kind)


class ShapeOnlyRun:
    """One shape-only run on one neuron device: host reads, step boundaries and memory."""

    def __init__(self, device: int | None = None):
        self.device = torch.neuron.current_device() if device is None else int(device)
        self.host_reads: collections.Counter = collections.Counter()
        self.boundaries: list[tuple[int, float]] = []  # (timeline sequence, device clock ns) at step ends
        self.start: tuple[int, float] | None = None
        self.summary: dict | None = None
        self._hooks: list = []
        self._saved: dict = {}
        self._lock = threading.Lock()

    # ---------------------------------------------------------------- recording
    def _read(self, kind: str, tensor) -> None:
        where = _where(user_frame())
        with self._lock:
            self.host_reads[(where, _what(kind))] += 1

    def _clock(self) -> tuple[int, float]:
        import neuron_sim

        torch.neuron.synchronize(self.device)
        records = neuron_sim.timeline(self.device)
        seq = records[-1].sequence if records else -1
        return seq, float(_C.device_time_ns(self.device))

    def mark_step(self, *_args, **_kwargs) -> None:
        """Ends one step (called by the optimizer post-hook and profiler.step)."""
        if _C.shape_only() or self.start is not None:
            self.boundaries.append(self._clock())
        _C.set_allocation_phase(FORWARD)

    # ---------------------------------------------------------------- hooks
    def _install(self) -> None:
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook
        from torch.nn.modules.module import register_module_forward_pre_hook

        # The first module call ends the setup phase; the hook then removes itself, so compiled
        # modules trace no hook of ours.
        first_forward = None

        def forward_pre(module, args):
            if torch.compiler.is_compiling():
                return
            if _C.allocation_phase() == SETUP:
                _C.set_allocation_phase(FORWARD)
            first_forward.remove()

        first_forward = register_module_forward_pre_hook(forward_pre)
        self._hooks = [
            register_optimizer_step_pre_hook(lambda *a: _C.set_allocation_phase(OPTIMIZER)),
            register_optimizer_step_post_hook(self.mark_step),
            first_forward,
        ]
        import torch.autograd
        import torch.autograd.graph as graph
        import torch.profiler

        run_backward = graph._engine_run_backward

        def engine_run_backward(*args, **kwargs):
            prev = _C.allocation_phase()
            _C.set_allocation_phase(BACKWARD)
            try:
                return run_backward(*args, **kwargs)
            finally:
                _C.set_allocation_phase(prev if prev != SETUP else FORWARD)

        profiler_step = torch.profiler.profile.step

        def step(prof, *a, **k):
            self.mark_step()
            return profiler_step(prof, *a, **k)

        self._saved = {"run_backward": run_backward, "profiler_step": profiler_step,
                       "autograd_had": hasattr(torch.autograd, "_engine_run_backward")}
        graph._engine_run_backward = engine_run_backward
        if self._saved["autograd_had"]:
            torch.autograd._engine_run_backward = engine_run_backward
        torch.profiler.profile.step = step

    def _uninstall(self) -> None:
        import torch.autograd
        import torch.autograd.graph as graph
        import torch.profiler

        for h in self._hooks:
            h.remove()
        self._hooks = []
        if self._saved:
            graph._engine_run_backward = self._saved["run_backward"]
            if self._saved["autograd_had"]:
                torch.autograd._engine_run_backward = self._saved["run_backward"]
            torch.profiler.profile.step = self._saved["profiler_step"]
            self._saved = {}

    # ---------------------------------------------------------------- on / off
    def begin(self) -> "ShapeOnlyRun":
        if _C.native_executor_set():
            raise RuntimeError("torch_neuron: shape-only execution computes no values, and device numerics "
                               "(TORCH_NEURON_DEVICE_NUMERICS=1 / torch_neuron.set_device_numerics(True)) "
                               "recomputes them: turn device numerics off first")
        torch.neuron.synchronize(self.device)
        torch.neuron.reset_peak_memory_stats(self.device)
        import neuron_sim

        neuron_sim.reset_peak_counters(self.device)
        self.start = self._clock()
        _C.set_allocation_phase(SETUP)
        self._install()
        _C.set_host_read_reporter(self._read)
        _C.set_shape_only(True)
        return self

    def end(self, exc: BaseException | None = None) -> dict:
        _C.set_shape_only(False)
        _C.set_host_read_reporter(None)
        self._uninstall()
        end = self._clock()
        self.summary = self.summarize(end, exc)
        return self.summary

    def __enter__(self) -> "ShapeOnlyRun":
        return self.begin()

    def __exit__(self, exc_type, exc, tb) -> None:
        self.end(exc)

    # ---------------------------------------------------------------- figures
    def steps(self, end: tuple[int, float]) -> list[tuple[tuple[int, float], tuple[int, float]]]:
        """(start, end) of each step: between optimizer/profiler steps, the run when there is none."""
        marks = [self.start] + [b for b in self.boundaries if b[0] > self.start[0]]
        if len(marks) == 1:
            marks.append(end)
        return list(zip(marks, marks[1:]))

    def summarize(self, end: tuple[int, float], exc: BaseException | None = None,
                  assumptions=None) -> dict:
        import neuron_sim
        from neuron_sim.projection import summarize

        props = neuron_sim.get_device_properties(self.device)
        steps = self.steps(end)
        records = neuron_sim.timeline(self.device)
        first = steps[0]
        steady = steps[1:] or steps[:1]
        lo, hi = steady[0][0][0], steady[-1][1][0]
        steady_records = [r for r in records if lo < r.sequence <= hi]
        steady_ns = steady[-1][1][1] - steady[0][0][1]
        usage = _C.memory_usage(self.device)
        peak = int(neuron_sim.counters(self.device)["peak_bytes_in_use"])
        if assumptions is None:
            from neuron_sim.projection import Assumptions

            flops = os.environ.get("TORCH_NEURON_MODEL_FLOPS")
            assumptions = (Assumptions(model_flops_per_step=float(flops), model_flops_source="--model-flops")
                           if flops else Assumptions())
        s = summarize(steady_records, props, steps=len(steady), peak_bytes=peak, region_ns=steady_ns,
                      assumptions=assumptions)
        s["shape_only"] = True
        s["first_step_ms"] = (first[1][1] - first[0][1]) / 1e6
        s["steps_total"] = len(steps)
        s["tensor_peak_bytes"] = int(usage["tensor_peak"])
        s["host_scratch_bytes"] = int(usage["scratch_peak"])
        s["memory_at_peak"] = {PHASES[i]: int(b) for i, b in enumerate(usage["at_peak"])}
        s["host_reads"] = [{"where": w, "what": k, "count": n}
                           for (w, k), n in sorted(self.host_reads.items(), key=lambda kv: -kv[1])]
        oom = exc is not None and isinstance(exc, torch.OutOfMemoryError)
        if oom:
            s["fits"] = False
            s["out_of_memory"] = str(exc).splitlines()[0]
            s["out_of_memory_at"] = _where(_user_frame_of(exc.__traceback__))
        s["num_ooms"] = int(torch.neuron.memory_stats(self.device).get("num_ooms", 0))
        return s

    def text(self) -> str:
        from .report import terminal_lines

        return "\n".join(terminal_lines(self.summary)) if self.summary else "(shape-only run not ended)"


def _user_frame_of(tb):
    """The innermost traceback frame outside torch and torch_neuron."""
    found = None
    while tb is not None:
        if not tb.tb_frame.f_code.co_filename.startswith(_PACKAGE_DIRS):
            found = tb
        tb = tb.tb_next
    if found is None:
        return None

    class _F:  # the frame with the traceback's line
        f_code = found.tb_frame.f_code
        f_lineno = found.tb_lineno
    return _F


_active: ShapeOnlyRun | None = None


def active_run() -> ShapeOnlyRun | None:
    """The process-wide run started by TORCH_NEURON_SHAPE_ONLY=1, if any."""
    return _active


def shape_only(device: int | None = None) -> ShapeOnlyRun:
    """A context manager that runs its body without values (see the module's docstring)."""
    return ShapeOnlyRun(device)


def _enable_from_environment() -> None:
    """TORCH_NEURON_SHAPE_ONLY=1: the whole process runs shape-only; the report is printed at exit
    (and appended to TORCH_NEURON_PROJECTION_OUT when the projection CLI runs the process)."""
    global _active
    from .. import env

    if not env.get_bool("TORCH_NEURON_SHAPE_ONLY") or _active is not None:
        return
    _active = ShapeOnlyRun().begin()

    def report_at_exit():
        if _active.summary is None:
            _active.end()
            print(_active.text(), file=sys.stderr)

    import atexit

    atexit.register(report_at_exit)
