# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""Generated kernels at run time, and which graph nodes the kernel library serves.

``FusedKernel`` is one chain's generated tile program as a graph node: on ``neuron`` its launch
goes on the stream's timeline through the bridge's launch accounting with the program's simulated
schedule as duration. Its values come from the chain's ATen ops run on the device tensors in
values-only mode (each computes on the host as its eager op does, but launches and counts
nothing), or, for a kernel that writes results into its inputs, from its out=/in-place host
reference on zero-copy host views of the device buffers; with device numerics on, from the
generated program itself run by the ISA simulator.

Matmul and attention nodes outside chains, and norms no chain takes, stay ATen calls: the backend
dispatches them to their library kernels through the one torch-to-kernel bridge
(``torch_neuron.native``), exactly as in eager;
``library_entry`` asks that bridge whether it covers a node, for the reports.
"""
from __future__ import annotations

import functools
import math

import torch
import torch.fx as fx

from .. import _C
from ..native import binders, numerics
from ..native.bridge import NotCovered, account_launch, host_view, table_name
from . import neff, stats
from .lowering import _nbytes

# Op-table kernels the reports list as library kernels (the rest of the table is eager pointwise work).
LIBRARY_KINDS = ("mm", "matmul", "bmm", "linear", "addmm", "softmax", "layer_norm", "layer_norm_backward",
                 "rms_norm", "embedding", "cross_entropy", "sdpa", "sdpa_backward")


@functools.cache
def _entries() -> dict:
    """Executed overload ("aten::add.out") -> op-table entry, as torch_neuron.native.install registers them."""
    try:
        import neuron_kernels
    except ImportError:
        return {}
    from ..native.install import executed_as
    out = {}
    for entry in neuron_kernels.table().values():
        for name in executed_as(entry):
            out[name] = entry
    return out


def _schema_args(node: fx.Node) -> list:
    sch = node.target._schema
    vals = []
    for i, a in enumerate(sch.arguments):
        if i < len(node.args):
            v = node.args[i]
        elif a.name in node.kwargs:
            v = node.kwargs[a.name]
        else:
            v = a.default_value if a.has_default_value() else None
        vals.append(fx.node.map_arg(v, lambda n: n.meta.get("val")))
    return vals


def library_entry(node: fx.Node) -> tuple[str, str | None]:
    """("kernel" | "eager" | "fallback", reason): how the backend will run this ATen node."""
    target = node.target
    if not isinstance(target, torch._ops.OpOverload):
        return "eager", None
    from ..native.custom_ops import registered
    if target._schema.name in registered:
        return "kernel", None      # an nki_op: its tile kernel runs on the device
    name = f"{target._schema.name}" + (f".{target._schema.overload_name}" if target._schema.overload_name else "")
    entry = _entries().get(name)
    if entry is None:
        return "fallback", f"{name} has no entry in neuron_kernels' op table"
    val = node.meta.get("val")
    ref = val[0] if isinstance(val, (tuple, list)) and val else val
    if not isinstance(ref, torch.Tensor):
        ref = next((a.meta.get("val") for a in node.all_input_nodes
                    if isinstance(a.meta.get("val"), torch.Tensor)), None)
    if ref is None:
        return "fallback", f"{name}: no tensor result"
    import neuron_kernels
    dtype = table_name(ref.dtype)
    if neuron_kernels.lookup(entry.aten, dtype) is None:
        return "fallback", f"{name}: no kernel for dtype {dtype}"
    try:
        binders.bind(name, entry, dtype, _schema_args(node))
    except NotCovered as e:
        return "fallback", f"{name}: {e}"
    except Exception as e:  # noqa: BLE001 - any binding failure means the backend runs it as fallback
        return "fallback", f"{name}: {type(e).__name__}: {e}"
    return ("kernel" if entry.columns.get("binder") in LIBRARY_KINDS else "eager"), None


def eager_kernel_ns(node: fx.Node, profile: str) -> float | None:
    """The simulated schedule of the op-table kernel that runs ``node`` in eager mode (launch
    overhead not included), or None when eager would not run it as a table kernel."""
    target = node.target
    if not isinstance(target, torch._ops.OpOverload):
        return None
    name = f"{target._schema.name}" + (f".{target._schema.overload_name}" if target._schema.overload_name else "")
    entry = _entries().get(name)
    val = node.meta.get("val")
    if isinstance(val, (tuple, list)) and val:   # several results (layer norm): the first one's dtype
        val = val[0]
    if entry is None or not isinstance(val, torch.Tensor):
        return None
    from ..native import estimate
    saved, estimate.profile = estimate.profile, profile
    try:
        r = estimate.estimate(name, entry.aten, table_name(val.dtype), _schema_args(node))
    finally:
        estimate.profile = saved
    return None if isinstance(r, float) else float(r[0])


def on_host(mode, value, fn, *args):
    """``fn(*args)`` with grad off (compiled graphs run that way, under AOTAutograd's wrappers; a
    direct call may not) and this thread's host-execution ``mode`` (``_C.exchange_values_only``
    or ``_C.exchange_execution_device``) set to ``value``; both restored after."""
    grad = torch.is_grad_enabled()
    if grad:
        torch.set_grad_enabled(False)
    prev = mode(value)
    try:
        return fn(*args)
    finally:
        mode(prev)
        if grad:
            torch.set_grad_enabled(True)


def host_alias(t: torch.Tensor) -> torch.Tensor:
    """A CPU tensor over ``t``'s device bytes (same sizes, strides and offset; no copy)."""
    return _C.host_aliases([t])[0]


class FusedKernel:
    """One generated tile kernel standing for a chain of ATen nodes."""

    def __init__(self, name: str, chain, reference: fx.GraphModule, inputs: list, outputs: list,
                 kernel_info: dict, program_factory, inplace: tuple = (), absorbed: tuple = (),
                 values: fx.GraphModule | None = None):
        self.__name__ = self.name = name
        self.chain = chain
        self.input_nodes = inputs             # the graph nodes the kernel reads, in argument order
        self.output_nodes = outputs           # the graph nodes whose values it produces
        self.source = kernel_info["source"]   # the generated tile-language source
        self.reference = reference            # the chain's ATen ops (inputs, result tensors) -> results
        self.written = kernel_info["written"]  # per result: the reference writes it into its tensor
        # (shape, stride, dtype) per result, as the unfused ops produced it
        self.outputs = [(tuple(o.meta["val"].shape), tuple(o.meta["val"].stride()), o.meta["val"].dtype)
                        for o in outputs]
        self.latency_ns = kernel_info["latency_ns"]
        self.dma_bytes = kernel_info["dma_bytes"]
        self.eager_bytes = kernel_info["eager_bytes"]
        self._program_factory = program_factory
        self._programs = None
        self._flops = kernel_info.get("flops")
        # Per result: the argument it is stored into (the graph input it updates), or None.
        self.inplace = tuple(inplace) or (None,) * len(outputs)
        self.absorbed = tuple(absorbed)   # the copy_ nodes those stores replace
        # Fixed per kernel (the graph is specialized to its shapes): HBM bytes in and out, for the
        # launch record, and the reference's forward (called without nn.Module's call machinery).
        self._bytes_in = float(sum(_nbytes(n) for n in inputs))
        self._bytes_out = float(sum(math.prod(shape) * dtype.itemsize for shape, _, dtype in self.outputs))
        self._reference = reference.forward
        # The chain's nodes as they are, run on the device tensors in values-only mode (None for
        # a kernel that updates its inputs in place: it runs ``reference`` on host aliases).
        self._values = values.forward if values is not None else None
        self._launch_name = f"neuron::{name}"

    @property
    def flops(self) -> float:
        """The kernel's counted arithmetic (its matmul steps), from its programs."""
        if self._flops is None:
            self._flops = float(sum(i.attrs.get("flops", 0) for p in self.programs() for i in p.instrs))
        return self._flops

    def __repr__(self) -> str:
        return f"FusedKernel({self.name}: {self.chain.describe()})"

    def programs(self):
        if self._programs is None:
            self._programs = self._program_factory()
        return self._programs

    def __call__(self, *inputs):
        dev = next((t.device for t in inputs if isinstance(t, torch.Tensor)), None)
        if self._values is not None and dev is not None and dev.type == "neuron" \
                and not numerics.device_numerics_enabled():
            # The ops compute as in eager (results in device memory, no copies); only this
            # kernel's own launch below reaches the timeline.
            outs = on_host(_C.exchange_values_only, True, self._values, *inputs)
            return self._launched(dev, inputs, outs)
        outs = [inputs[j] if j is not None else torch.empty_strided(shape, stride, dtype=dtype, device=dev)
                for (shape, stride, dtype), j in zip(self.outputs, self.inplace)]
        if dev is None or dev.type != "neuron":
            self._store(outs, self.reference(*inputs, *outs))
            return tuple(outs)
        if numerics.device_numerics_enabled():
            self._run_program(inputs, outs)
        else:
            # The chain's intermediates come from the device's memory, as an eager op's host
            # execution allocates its scratch: the caching allocator hands back blocks the graph
            # just freed, still in the host's caches (the CPU allocator's fresh memory made the
            # demo's compiled step about 1 ms slower on one thread).
            on_host(_C.exchange_execution_device, dev.index, self._run_reference, inputs, outs)
        return self._launched(dev, inputs, outs)

    def _run_reference(self, inputs, outs) -> None:
        """The out=/in-place reference on host aliases of the device tensors, results into ``outs``."""
        tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
        aliases = _C.host_aliases(tensors + outs)
        dests = aliases[len(tensors):]
        if len(tensors) == len(inputs):
            vals = self._reference(*aliases)
        else:
            it = iter(aliases)
            vals = self._reference(*[next(it) if isinstance(t, torch.Tensor) else t for t in inputs], *dests)
        self._store(dests, vals)

    def _launched(self, dev, inputs, outs) -> tuple:
        """Puts the kernel's launch on the stream (and in the graph being recorded); its results."""
        rec = neff.active()
        if rec is not None:
            rec.fused(self.name, self.programs(), inputs, outs)
        account_launch(self._launch_name, self.outputs[0][2], dev.index, self.latency_ns, self.flops,
                       self._bytes_in, self._bytes_out)
        stats.record_launch(self)
        return tuple(outs)

    def _store(self, dests, vals) -> None:
        """Copies into ``dests`` the reference's results it did not compute into them."""
        for d, v, w in zip(dests, vals, self.written):
            if not w:
                d.copy_(v)

    def _run_program(self, inputs, outs) -> None:
        from neuron_sim.isa import execute

        arrays = []
        tensors = [t for t in inputs if isinstance(t, torch.Tensor)]
        for i, t in enumerate(tensors):
            arrays.append(host_view(host_alias(t).contiguous().reshape(self.chain.input_shape(i))))
        # Results are written through contiguous [rows, cols] views; a result with the unfused
        # op's other strides goes through a host copy.
        targets = [host_alias(o) for o in outs]
        staged = [t if t.is_contiguous() else torch.empty(t.shape, dtype=t.dtype) for t in targets]
        views = [host_view(t).reshape(self.chain.output_shape(k)) for k, t in enumerate(staged)]
        for p in self.programs():
            execute(p, arrays, outputs=views)
        for t, st in zip(targets, staged):
            if st is not t:
                t.copy_(st)
        stats.record_numerics(self)
