# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""Custom tile kernels as PyTorch operators on ``neuron``.

Kernels are written in neuron_kernels' tile language (``neuron_kernels.language``, NKI-shaped)
and registered as ``torch.library`` custom ops::

    import neuron_kernels.language as nl
    from torch import Tensor
    from torch_neuron import nki_op

    @nki_op("mylib::scaled_add")
    @nl.jit
    def scaled_add(a: Tensor, b: Tensor, alpha: float) -> Tensor:
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range((a.shape[0] + 127) // 128):
            rows = slice(i * 128, (i + 1) * 128)
            nl.store(out[rows], nl.add(nl.load(a[rows]), nl.multiply(nl.load(b[rows]), alpha)))
        return out

    scaled_add(x, y, 2.0)                          # x, y on neuron
    scaled_add.register_autograd(backward, setup_context=setup_context)

The decorated function is either the tile kernel itself (as above) or an ordinary typed
function whose body calls kernels made callable on tensors with ``wrap_nki`` (TorchNeuron's
form)::

    softmax_kernel = wrap_nki(neuron_kernels.kernels.softmax)

    @nki_op("mylib::softmax")
    def softmax(x: Tensor) -> Tensor:
        return softmax_kernel(x)

On ``neuron`` a kernel runs functionally through the ISA simulator directly on the device
buffers (zero-copy views through the runtime's host alias), and its simulated latency
(timing-only schedule, cached per shape signature) plus the profile's launch overhead is placed
on the current stream's timeline, as for the backend's native ops. On CPU tensors it runs
through the same simulator without a timeline. Under FakeTensor / meta (``torch.compile``) the
kernel is traced for the argument shapes and the outputs it declares are returned as empty
tensors, so the op is one opaque node in compiled graphs.
"""
from __future__ import annotations

import contextlib
import inspect
import threading
import typing
from typing import Callable, Iterable, Sequence

import numpy as np
import torch

from .bridge import account_launch, device_profile, host_view, isa_dtype, torch_of_isa

__all__ = ["NKIKernel", "nki_op", "wrap_nki"]

_state = threading.local()
# Names of the ops nki_op registered: torch.compile(backend="neuron") counts them as kernel nodes.
registered: set[str] = set()


def _lang():
    # neuron_kernels is imported on first use: ``import torch`` must not pay for it.
    import neuron_kernels.language as nl
    return nl


def _is_fake(t: torch.Tensor) -> bool:
    from torch._subclasses.fake_tensor import is_fake
    return t.device.type == "meta" or is_fake(t)


class _OpCall:
    """The nki_op being executed on this thread: its kernels' latencies add up to one launch."""

    def __init__(self, name: str):
        self.name = name
        self.kernel_ns = 0.0
        self.device: int | None = None
        self.dtype: torch.dtype | None = None


@contextlib.contextmanager
def _op_call(name: str):
    prev = getattr(_state, "op", None)
    call = _state.op = _OpCall(name)
    try:
        yield call
    finally:
        _state.op = prev
    if call.device is not None:
        account_launch(call.name, call.dtype, call.device, call.kernel_ns)


class NKIKernel:
    """A tile kernel callable on torch tensors (``neuron``, CPU, or fake/meta under tracing).

    Tensor arguments become the kernel's HBM inputs; every other argument is a trace-time constant
    (part of the kernel's cache key). Returns the kernel's outputs as tensors on the inputs' device:
    one tensor, or a tuple for several. An output that is an input (an in-place kernel) is that
    input tensor, updated in place. ``kernel[n](...)`` launches ``n`` cores.
    """

    def __init__(self, kernel, grid=1):
        nl = _lang()
        if not isinstance(kernel, nl.Kernel):
            if not callable(kernel):
                raise TypeError(f"wrap_nki expects a tile kernel (neuron_kernels.language.jit) or a function, "
                                f"got {type(kernel).__name__}")
            kernel = nl.jit(kernel)
        self.kernel = kernel
        self.grid = grid
        self.name = kernel.name

    def __getitem__(self, grid) -> "NKIKernel":
        return NKIKernel(self.kernel, grid)

    def __repr__(self) -> str:
        return f"NKIKernel({self.name}, grid={self.grid})"

    # -- argument handling ---------------------------------------------------------------------
    def _specs(self, args, kwargs):
        """(spec args, spec kwargs, input tensors in the program's input order)."""
        nl = _lang()
        tensors: list[torch.Tensor] = []

        def spec(x, where):
            if isinstance(x, torch.Tensor):
                tensors.append(x)
                return nl.TensorSpec(tuple(int(s) for s in x.shape), isa_dtype(x.dtype, f"{self.name}: {where}"))
            if isinstance(x, (list, tuple)) and any(isinstance(e, torch.Tensor) for e in x):
                raise TypeError(f"{self.name}: {where} is a sequence of tensors; pass each tensor as its own "
                                "argument (kernel inputs are single HBM tensors)")
            return x

        sargs = tuple(spec(a, f"argument {i}") for i, a in enumerate(args))
        # The tracer creates keyword inputs in sorted-name order after the positional ones.
        skw = {k: spec(kwargs[k], f"argument {k!r}") for k in sorted(kwargs)}
        return sargs, skw, tensors

    def _device(self, tensors: Sequence[torch.Tensor]) -> torch.device:
        if not tensors:
            raise TypeError(f"{self.name}: a kernel call needs at least one tensor argument (its device)")
        dev = tensors[0].device
        for t in tensors[1:]:
            if t.device != dev:
                raise RuntimeError(f"{self.name}: all tensor arguments must be on one device, got {dev} and "
                                   f"{t.device}; move them with .to({dev!s})")
        if dev.type not in ("neuron", "cpu", "meta"):
            raise RuntimeError(f"{self.name}: tile kernels run on neuron (or CPU through the simulator), "
                               f"got a tensor on {dev}")
        return dev

    def _resolve(self, args, kwargs):
        sargs, skw, tensors = self._specs(args, kwargs)
        dev = self._device(tensors)
        profile = device_profile(dev) if dev.type == "neuron" else None
        return sargs, skw, tensors, dev, profile

    def _output(self, buf) -> torch.dtype:
        return torch_of_isa(buf.dtype, f"{self.name}: output {buf.name}")

    # -- entry points --------------------------------------------------------------------------
    def programs(self, *args, **kwargs):
        """The traced ISA programs for these arguments (one per core)."""
        sargs, skw, _, _, profile = self._resolve(args, kwargs)
        return self.kernel.programs(*sargs, grid=self.grid, profile=profile, **skw)

    def schedule(self, *args, **kwargs):
        """Timing-only simulation for these arguments' shapes (cached): ``.latency_ns``, ``.utilization()``."""
        sargs, skw, _, _, profile = self._resolve(args, kwargs)
        return self.kernel.schedule(*sargs, grid=self.grid, profile=profile, **skw)

    # Dynamo must not trace the simulator's numpy writes into device memory: a direct call in a
    # compiled region runs eagerly (a graph break); nki_op makes the call one opaque graph node.
    @torch._disable_dynamo
    def __call__(self, *args, **kwargs):
        sargs, skw, tensors, dev, profile = self._resolve(args, kwargs)
        programs = self.kernel.programs(*sargs, grid=self.grid, profile=profile, **skw)
        prog = programs[0]
        if any(_is_fake(t) for t in tensors):
            outs = [tensors[prog.inputs.index(b)] if b in prog.inputs else
                    torch.empty(b.shape, dtype=self._output(b), device=dev) for b in prog.outputs]
            return outs[0] if len(outs) == 1 else tuple(outs)
        call = getattr(_state, "op", None)
        if call is None and torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
            raise RuntimeError(
                f"{self.name}: a wrapped kernel has no autograd formula, and an input requires grad. Register "
                "the kernel as an op with torch_neuron.nki_op and add its backward with "
                ".register_autograd(...), or call it under torch.no_grad().")
        outs = self._run(programs, tensors, dev)
        if dev.type == "neuron":
            ns = self.kernel.schedule(*sargs, grid=self.grid, profile=profile, **skw).latency_ns
            if call is None:
                account_launch(f"nki::{self.name}", tensors[0].dtype, dev.index, ns)
            else:
                call.kernel_ns += ns
                call.device = dev.index
                call.dtype = call.dtype or tensors[0].dtype
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _run(self, programs, tensors: list[torch.Tensor], dev: torch.device) -> list[torch.Tensor]:
        from neuron_sim.isa import execute
        from neuron_sim.isa.dtypes import FLOAT_TYPES

        prog = programs[0]
        inputs = []
        for i, (t, b) in enumerate(zip(tensors, prog.inputs)):
            if not t.is_contiguous():
                if any(o is b for o in prog.outputs):
                    raise RuntimeError(f"{self.name}: input {i} is updated in place by the kernel and must be "
                                       f"contiguous (shape {tuple(t.shape)}, stride {t.stride()})")
                t = tensors[i] = t.contiguous()
            inputs.append(host_view(t))
        outs: list[torch.Tensor] = []
        views: list[np.ndarray] = []
        for b in prog.outputs:
            if b in prog.inputs:
                k = prog.inputs.index(b)
                outs.append(tensors[k])
                views.append(inputs[k])
                continue
            t = torch.empty(b.shape, dtype=self._output(b), device=dev)
            v = host_view(t)
            # Unwritten output elements read as the simulator's poison (NaN / 4), as on the device.
            v[...] = np.nan if b.dtype in FLOAT_TYPES else 4
            outs.append(t)
            views.append(v)
        for p in programs:
            execute(p, inputs, outputs=views)
        return outs


def wrap_nki(kernel, *, grid=1) -> NKIKernel:
    """Makes a tile kernel (``neuron_kernels.language.jit``, e.g. one of ``neuron_kernels.kernels``,
    or a plain tile function) callable on torch tensors. Register it with ``nki_op`` to use it
    with autograd and inside ``torch.compile``."""
    if isinstance(kernel, NKIKernel):
        return kernel if grid == 1 else kernel[grid]
    return NKIKernel(kernel, grid)


def _resolved_signature(fn: Callable) -> inspect.Signature:
    """``fn``'s signature with string annotations (``from __future__ import annotations``) resolved."""
    sig = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn)
    except Exception as e:  # noqa: BLE001 - the message below names the function and the cause
        raise TypeError(f"nki_op: cannot resolve the type annotations of {fn.__qualname__}: {e}") from e
    params = [p.replace(annotation=hints.get(p.name, p.annotation)) for p in sig.parameters.values()]
    ret = hints.get("return", sig.return_annotation)
    # get_type_hints turns ``-> None`` into NoneType; torch's schema inference wants None.
    return sig.replace(parameters=params, return_annotation=None if ret is type(None) else ret)


def nki_op(name: str, fn: Callable | None = None, /, *, mutates_args: Iterable[str] | str = (),
           schema: str | None = None):
    """Registers a tile kernel as the custom op ``name`` ("namespace::op") on ``neuron`` and CPU.

    ``fn`` is a tile kernel (``@nl.jit``) or a function whose body calls ``wrap_nki`` kernels;
    either way its type annotations give the op's schema (or pass ``schema=``), as for
    ``torch.library.custom_op``. Returns the ``torch.library.CustomOpDef``: call it like a function,
    add a backward with ``.register_autograd(backward, setup_context=...)``, or replace the derived
    fake implementation with ``.register_fake``. ``mutates_args`` names the arguments an in-place
    kernel updates (the op then returns None).
    """

    def register(fn: Callable):
        nl = _lang()
        if isinstance(fn, NKIKernel):
            body, proto = fn, fn.kernel.fn
        elif isinstance(fn, nl.Kernel):
            body, proto = NKIKernel(fn), fn.fn
        elif callable(fn):
            body, proto = fn, fn
        else:
            raise TypeError(f"nki_op({name!r}) decorates a tile kernel or a function, got {type(fn).__name__}")
        sig = _resolved_signature(proto)
        returns_none = schema.replace(" ", "").endswith("->()") if schema else sig.return_annotation is None

        def impl(*args, **kwargs):
            with _op_call(name):
                out = body(*args, **kwargs)
            return None if returns_none else out

        def fake(*args, **kwargs):
            out = body(*args, **kwargs)
            return None if returns_none else out

        impl.__signature__ = sig
        impl.__name__ = impl.__qualname__ = getattr(proto, "__name__", "nki_op")
        impl.__module__ = getattr(proto, "__module__", __name__)
        op = torch.library.custom_op(name, impl, mutates_args=mutates_args, device_types=("neuron", "cpu"),
                                     schema=schema)
        op.register_fake(fake)
        registered.add(name)
        return op

    if fn is not None:
        return register(fn)
    return register
