"""The sanitizer's dispatch mode: every op on neuron tensors is one launch on the current
stream of the tensor's device; its schema says which arguments it reads and writes."""
from __future__ import annotations

import os
import sys
import threading
import traceback
import warnings
from typing import Any, Optional

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .. import _C
from .clocks import StreamClocks, StreamKey
from .memory import Access, Block, DeviceMemory
from .report import StreamRaceError, StreamRaceWarning, format_race

# Kinds of the native log (runtime/SanitizerLog.h).
_ALLOC, _FREE, _RECORD_STREAM, _EV_RECORD, _EV_WAIT, _EV_SYNC, _STREAM_SYNC, _DEV_SYNC, _EV_DESTROY = range(9)
_STACK_LIMIT = 40
# Ops that touch no tensor memory although their schema marks an argument.
_NO_ACCESS = {"aten::record_stream", "aten::_nested_tensor_storage_offsets", "aten::set_"}
# Ops after which the host has waited for the stream (a synchronous copy to the host).
_HOST_READS = {"aten::_local_scalar_dense", "aten::item"}
_COPIES = {"aten::_to_copy", "aten::copy_", "aten::_copy_from", "aten::_copy_from_and_resize", "aten::to"}


class _Plan:
    """Per op overload: which positional/keyword arguments are read, written or only viewed."""

    __slots__ = ("name", "args", "returns_written", "skip")

    def __init__(self, func: Any):
        schema = func._schema
        self.name = schema.name + (f".{schema.overload_name}" if schema.overload_name else "")
        self.skip = schema.name in _NO_ACCESS
        self.args = []  # (position, name, kwarg_only, is_write); view bases are not accesses
        for i, a in enumerate(schema.arguments):
            info = a.alias_info
            if info is not None and not info.is_write:
                continue
            self.args.append((i, a.name, a.kwarg_only, bool(info is not None and info.is_write)))
        # Returns that are fresh memory (no alias annotation) are written by the op.
        self.returns_written = [r.alias_info is None for r in schema.returns]


def _neuron_tensors(v: Any):
    if isinstance(v, torch.Tensor):
        if v.device.type == "neuron":
            yield v
    elif isinstance(v, (list, tuple)):
        for e in v:
            if isinstance(e, torch.Tensor) and e.device.type == "neuron":
                yield e


def _describe(t: torch.Tensor) -> str:
    return f"shape {list(t.shape)}, {str(t.dtype).replace('torch.', '')}"


_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep


def _stack() -> traceback.StackSummary:
    # The program's frames, from the caller of the dispatch mode outwards; torch's own wrappers
    # (dynamo's disable decorators, autograd's Python functions) say nothing about the race.
    frames = ((f, n) for f, n in traceback.walk_stack(sys._getframe(2))
              if not f.f_code.co_filename.startswith(_TORCH_DIR))
    stack = traceback.StackSummary.extract(frames, limit=_STACK_LIMIT, lookup_lines=False)
    stack.reverse()
    return stack


class SanitizerMode(TorchDispatchMode):
    def __init__(self, raise_errors: bool = True):
        super().__init__()
        self.raise_errors = raise_errors
        self.clocks = StreamClocks()
        self.memory = DeviceMemory()
        self.reports: list[str] = []
        self._plans: dict[Any, _Plan] = {}
        self._lock = threading.RLock()

    # --------------------------------------------------------------- native log
    def _apply_log(self, op: str, stack: Optional[traceback.StackSummary]) -> None:
        for kind, ptr, size, device, stream, streams in _C._sanitizer_drain():
            key = (device, stream)
            if kind == _ALLOC:
                self.memory.allocate(ptr, size, device, key, op, stack)
            elif kind == _FREE:
                self.memory.free(ptr, size, device, key, streams)
            elif kind == _EV_RECORD:
                self.clocks.event_record(ptr, key)
            elif kind == _EV_WAIT:
                self.clocks.event_wait(ptr, key)
            elif kind == _EV_SYNC:
                self.clocks.event_synchronize(ptr)
            elif kind == _STREAM_SYNC:
                self.clocks.stream_synchronize(key)
            elif kind == _DEV_SYNC:
                self.clocks.device_synchronize(device)
                self.memory.forget_history(device)
            elif kind == _EV_DESTROY:
                self.clocks.event_destroy(ptr)
            # _RECORD_STREAM: the free that follows carries the recorded streams.

    def sync(self) -> None:
        """Applies what happened since the last op (frees, events, synchronisation)."""
        with self._lock:
            self._apply_log("", None)

    # --------------------------------------------------------------- accesses
    def _report(self, cur: Access, prev: Access, block: Block) -> None:
        msg = format_race(cur, prev, block)
        self.reports.append(msg)
        if self.raise_errors:
            raise StreamRaceError(msg)
        warnings.warn(msg, StreamRaceWarning, stacklevel=4)

    def _check(self, accesses: dict[int, tuple[Block, Access]]) -> None:
        clocks = self.clocks
        races = []
        for block, cur in accesses.values():
            prev = block.write
            if prev is not None and not clocks.ordered(prev.stream, prev.seq, cur.stream):
                races.append((cur, prev, block))
            if cur.is_write:
                races.extend((cur, r, block) for r in block.reads.values()
                             if not clocks.ordered(r.stream, r.seq, cur.stream))
                block.write = cur
                block.reads.clear()
            else:
                block.reads[cur.stream] = cur
        for cur, prev, block in races:
            self._report(cur, prev, block)

    def _collect(self, tensors, is_write: bool, plan: _Plan, seqs: dict, stack, out: dict) -> None:
        for t in tensors:
            try:
                st = t.untyped_storage()
                ptr = st.data_ptr()
            except (RuntimeError, NotImplementedError):
                continue  # a wrapper subclass (DTensor, ...): its inner tensors are the ops' operands
            if ptr == 0:
                continue
            dev = t.device.index
            key = (dev, _C.current_stream_id(dev))
            seq = seqs.get(key)
            if seq is None:
                seq = seqs[key] = self.clocks.launch(key)
            prev = out.get(ptr)
            if prev is not None and (prev[1].is_write or not is_write):
                continue
            block = self.memory.block(ptr, st.nbytes(), dev)
            out[ptr] = (block, Access(plan.name, key, seq, is_write, _describe(t), stack))

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        plan = self._plans.get(func)
        if plan is None:
            plan = self._plans[func] = _Plan(func)
        inputs = []
        if not plan.skip:
            for pos, name, kwarg_only, is_write in plan.args:
                v = kwargs.get(name) if kwarg_only or pos >= len(args) else args[pos]
                if v is not None and any(True for _ in _neuron_tensors(v)):
                    inputs.append((v, is_write))
        accesses: dict[int, tuple[Block, Access]] = {}
        seqs: dict[StreamKey, int] = {}
        stack = None
        if inputs:
            stack = _stack()
            with self._lock:
                self._apply_log(plan.name, stack)
                for v, is_write in inputs:
                    self._collect(_neuron_tensors(v), is_write, plan, seqs, stack, accesses)
                self._check(accesses)
        else:
            with self._lock:
                self._apply_log(plan.name, None)
        result = func(*args, **kwargs)
        res = result if isinstance(result, tuple) else (result,)
        outs = [r for r, w in zip(res, plan.returns_written) if w] if not plan.skip else []
        if stack is None and any(True for r in outs for _ in _neuron_tensors(r)):
            stack = _stack()
        with self._lock:
            self._apply_log(plan.name, stack)
            if stack is None:
                return result
            written: dict[int, tuple[Block, Access]] = {}
            for r in outs:
                self._collect(_neuron_tensors(r), True, plan, seqs, stack, written)
            # An input and an output sharing memory (out= written in place) count once.
            self._check({p: v for p, v in written.items() if p not in accesses})
            # A synchronous copy to the host waits for the stream it ran on.
            if plan.name in _HOST_READS or (plan.name in _COPIES and not any(
                    isinstance(r, torch.Tensor) and r.device.type == "neuron" for r in res)):
                for key in seqs:
                    self.clocks.stream_synchronize(key)
        return result
