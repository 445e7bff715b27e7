# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""Fused kernels of one shape of computation, run together (horizontal fusion).

A compiled ``opt.step()`` becomes one fused chain per parameter (``split_foreach``): the same ops
with the same constants over tensors of different sizes, none reading another's results. On the
device each chain stays its own kernel with its own schedule. On the host, running their
references one after another costs one Python-level ATen call per op and parameter; a
``KernelBatch`` runs the shared reference once over lists of the members' tensors, each op as
its ``torch._foreach_*`` form (the per-tensor loop in C++, the same per-tensor ATen op, so the
values are bit for bit those of the members' own references). An op with no ``_foreach_`` form
runs per member.

``batch`` (the pass after ``lower``) merges the calls of kernels with the same reference
structure into one ``KernelBatch`` call when no member depends on another.
"""
from __future__ import annotations

import operator

import torch
import torch.fx as fx

from .. import _C
from ..native import numerics
from ..native.bridge import account_launch
from . import neff, stats
from .kernels import FusedKernel, on_host

# Pointwise ATen ops whose ``torch._foreach_<name>`` (and ``_foreach_<name>_``) applies the same
# op to each element of the lists.
POINTWISE = frozenset((
    "add", "sub", "mul", "div", "addcmul", "addcdiv", "lerp", "pow", "maximum", "minimum", "clamp_min",
    "clamp_max", "exp", "expm1", "log", "log1p", "sqrt", "rsqrt", "abs", "neg", "reciprocal", "sigmoid", "tanh",
    "sin", "cos", "erf", "sign",
))
KWARGS = frozenset(("alpha", "value"))


def _foreach(node: fx.Node):
    """(the list form, its in-place form) of a reference node's op, or None."""
    t = node.target
    if not isinstance(t, torch._ops.OpOverload):
        return None
    name = t._schema.name.split("::")[-1]
    base = name[:-1] if name.endswith("_") else name
    if base not in POINTWISE or any(k not in KWARGS | {"out"} for k in node.kwargs):
        return None
    if any(not isinstance(a, (fx.Node, int, float, bool)) for a in node.args):
        return None
    fn, fn_ = getattr(torch, f"_foreach_{base}", None), getattr(torch, f"_foreach_{base}_", None)
    if fn is None or fn_ is None:
        return None
    return fn, fn_, name.endswith("_")


def signature(k: FusedKernel):
    """What kernels must share to run as one batch: the reference's ops, constants and wiring,
    which results it writes, which inputs they are stored into, the result dtypes."""
    graph = k.reference.graph
    index = {n: i for i, n in enumerate(graph.nodes)}

    def arg(a):
        if isinstance(a, fx.Node):
            return ("n", index[a])
        if isinstance(a, (tuple, list)):
            return tuple(arg(x) for x in a)
        return ("c", type(a).__name__, repr(a))

    ops = tuple((n.op, str(n.target), tuple(arg(a) for a in n.args),
                 tuple(sorted((key, arg(v)) for key, v in n.kwargs.items()))) for n in graph.nodes)
    return (ops, k.written, k.inplace, tuple(dtype for _, _, dtype in k.outputs), len(k.input_nodes))


class _Plan:
    """A reference graph run over lists: each value is the list of the members' values."""

    def __init__(self, k: FusedKernel):
        self.steps = []         # (reference node, its _foreach_ forms from ``_foreach`` or None)
        self.outputs = None
        graph = k.reference.graph
        placeholders = [n for n in graph.nodes if n.op == "placeholder"]
        n_in = len(k.input_nodes)
        # A result stored into an input has that input's tensors as its destination.
        self.slot = {}
        for i, p in enumerate(placeholders):
            j = k.inplace[i - n_in] if i >= n_in else None
            self.slot[p] = i if j is None else j
        for n in graph.nodes:
            if n.op == "output":
                self.outputs = n.args[0]
            elif n.op == "call_function":
                self.steps.append((n, _foreach(n)))

    def run(self, columns: list) -> tuple:
        """``columns``: per placeholder position, the members' host tensors."""
        env = {p: columns[i] for p, i in self.slot.items()}

        def val(a):
            return env[a] if isinstance(a, fx.Node) else a
        for n, fe in self.steps:
            if fe is None:
                env[n] = _per_member(n, env, len(columns[0]))
                continue
            fn, fn_, inplace = fe
            args = [val(a) for a in n.args]
            kwargs = {k: v for k, v in n.kwargs.items() if k != "out"}
            out = n.kwargs.get("out")
            if inplace:
                fn_(*args, **kwargs)
                env[n] = args[0]
            elif out is None:
                env[n] = fn(*args, **kwargs)
            elif env[out] is args[0]:
                fn_(*args, **kwargs)       # the op's out= is its own first operand
                env[n] = args[0]
            else:
                torch._foreach_copy_(env[out], fn(*args, **kwargs))
                env[n] = env[out]
        return tuple(env[o] for o in self.outputs)


def _per_member(n: fx.Node, env: dict, count: int) -> list:
    return [n.target(*fx.node.map_arg(n.args, lambda a: env[a][m]),
                     **fx.node.map_arg(n.kwargs, lambda a: env[a][m])) for m in range(count)]


class KernelBatch:
    """Fused kernels with one reference structure, called together: arguments and results are
    the members' own, concatenated. Each member keeps its launch and schedule on the device."""

    def __init__(self, members: list[FusedKernel]):
        self.members = members
        self.__name__ = self.name = f"batch_{members[0].name}_x{len(members)}"
        head = members[0]
        self._plan = _Plan(head)
        m, n_in = len(members), len(head.input_nodes)
        self._n_in = n_in
        self._tensors = all(isinstance(n.meta.get("val"), torch.Tensor) for k in members for n in k.input_nodes)
        # Arguments column by column (each input position across the members), for one
        # host_aliases call whose result slices into the plan's columns.
        self._by_column = [mi * n_in + i for i in range(n_in) for mi in range(m)]
        self._inplace = head.inplace
        self._fresh = [k for k, j in enumerate(head.inplace) if j is None]    # results needing a tensor
        self._dma_bytes = sum(k.dma_bytes for k in members)
        self._eager_bytes = sum(k.eager_bytes for k in members)

    def __repr__(self) -> str:
        return f"KernelBatch({', '.join(k.name for k in self.members)})"

    def _run(self, columns, n_in, written) -> None:
        """The plan on the columns of host aliases; results it did not write, copied in."""
        vals = self._plan.run(columns)
        for k, (v, w) in enumerate(zip(vals, written)):
            if not w:
                torch._foreach_copy_(columns[n_in + k], v)

    def __call__(self, *inputs):
        members, n_in = self.members, self._n_in
        m = len(members)
        dev = inputs[0].device if self._tensors else None
        if dev is None or dev.type != "neuron" or numerics.device_numerics_enabled():
            return tuple(o for i, k in enumerate(members) for o in k(*inputs[i * n_in:(i + 1) * n_in]))
        fresh = [[torch.empty_strided(*members[i].outputs[k][:2], dtype=members[i].outputs[k][2], device=dev)
                  for i in range(m)] for k in self._fresh]
        aliases = _C.host_aliases([inputs[p] for p in self._by_column] + [t for col in fresh for t in col])
        ins = [aliases[i * m:(i + 1) * m] for i in range(n_in)]
        it = (aliases[i * m:(i + 1) * m] for i in range(n_in, n_in + len(fresh)))
        # Per result: its input's column when stored into an input, else its fresh tensors'.
        columns = ins + [ins[j] if j is not None else next(it) for j in self._inplace]
        # Scratch in device memory, as for FusedKernel's reference.
        on_host(_C.exchange_execution_device, dev.index, self._run, columns, n_in, members[0].written)
        it = iter(fresh)
        results = [[inputs[i * n_in + j] for i in range(m)] if j is not None else next(it) for j in self._inplace]
        rec = neff.active()
        for i, k in enumerate(members):
            if rec is not None:
                rec.fused(k.name, k.programs(), inputs[i * n_in:(i + 1) * n_in], [r[i] for r in results])
            account_launch(k._launch_name, k.outputs[0][2], dev.index, k.latency_ns, k.flops, k._bytes_in,
                           k._bytes_out)
        stats.record_launches(m, self._dma_bytes, self._eager_bytes)
        return tuple(r[i] for i in range(m) for r in results)


def find(graph: fx.Graph) -> list[list[fx.Node]]:
    """Groups (two or more) of FusedKernel calls with one signature, none depending on another."""
    batches: list[list[fx.Node]] = []
    open_: dict = {}
    dep: dict = {}
    for n in graph.nodes:
        d = frozenset().union(*(dep[a] for a in n.all_input_nodes)) if n.all_input_nodes else frozenset()
        if isinstance(n.target, FusedKernel):
            sig = signature(n.target)
            b = open_.get(sig)
            if b is None or b in d:
                b = open_[sig] = len(batches)
                batches.append([])
            batches[b].append(n)
            d = d | {b}
        dep[n] = d
    return [b for b in batches if len(b) > 1]


def apply(gm: fx.GraphModule) -> tuple[fx.GraphModule, int]:
    """(the graph with each batch's calls as one KernelBatch call, kernels batched)."""
    from .lowering import topological_units

    batches = find(gm.graph)
    if not batches:
        return gm, 0
    unit_of = {}
    for b, calls in enumerate(batches):
        for c in calls:
            unit_of[c] = ("b", b)
            for u in c.users:
                if u.target is operator.getitem:
                    unit_of[u] = ("b", b)
    order = list(gm.graph.nodes)
    seq, members = topological_units(order, lambda n: unit_of.get(n, ("n", n)))
    if seq is None:
        return gm, 0    # merging would order two batches both ways: keep the kernels apart
    graph = fx.Graph()
    env: dict = {}
    for u in seq:
        if u[0] == "n":
            env[u[1]] = graph.node_copy(u[1], lambda x: env[x])
            continue
        calls = batches[u[1]]
        kb = KernelBatch([c.target for c in calls])
        call = graph.call_function(kb, tuple(env[a] for c in calls for a in c.args))
        call.meta["val"] = tuple(v for c in calls for v in c.meta["val"])
        offset = 0
        for c in calls:
            for g in c.users:
                if g.target is operator.getitem:
                    env[g] = graph.call_function(operator.getitem, (call, offset + g.args[1]))
                    env[g].meta.update(g.meta)
            offset += len(c.target.outputs)
    return fx.GraphModule(gm, graph), sum(len(b) for b in batches)
