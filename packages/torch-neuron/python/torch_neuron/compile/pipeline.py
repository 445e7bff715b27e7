# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""Lowering one AOTAutograd graph: an ordered list of named, pure passes with dumpable forms.

    specialize -> split_foreach -> drop_noops -> classify -> fuse -> generate -> lower -> recompose
    -> batch

Each pass takes a ``Lowering`` and returns a new one (the input graph is never edited), and
``Lowering.dump()`` prints what a pass produced. The pipeline runs once per concrete input
signature (shapes, dtypes, devices) of the graph: a graph Dynamo made symbolic after a shape
change is specialized per shape here, as TorchNeuron recompiles per shape.
"""
from __future__ import annotations

import dataclasses
import operator
import os
import time
from typing import Callable

import torch
import torch.fx as fx

from . import batch as batching
from . import chains, foreach, kernels, lowering, reference, stats
from .kernels import FusedKernel, library_entry
from .options import CompileOptions


@dataclasses.dataclass(frozen=True)
class Lowering:
    name: str                       # e.g. "g0_forward"
    options: CompileOptions
    profile: str
    gm: fx.GraphModule
    kinds: tuple = ()               # (node name, kind, reason, op) per ATen node
    groups: tuple = ()              # chains.Group
    kernels: tuple = ()             # (gid, FusedKernel)
    lowered: fx.GraphModule | None = None
    host_nodes: tuple = ()          # (op, kind, reason) per node run as its eager op (counted on first run)

    def dump(self) -> str:
        parts = [f"# {self.name}", self.gm.print_readable(print_output=False)]
        if self.kinds:
            parts.append("# node kinds\n" + "\n".join(f"{n}: {k}" + (f" ({r})" if r else "") for n, k, r, _ in self.kinds))
        if self.groups:
            parts.append("# chains\n" + "\n".join(
                f"group {g.gid} [{g.rows}x{g.cols}]: " + ", ".join(n.name for n in g.nodes) for g in self.groups))
        for gid, k in self.kernels:
            parts.append(f"# kernel {k.name} ({k.chain.describe()}): {k.latency_ns:.0f} ns, {k.dma_bytes} HBM bytes\n"
                         + k.source)
        if self.lowered is not None:
            parts.append("# lowered\n" + self.lowered.print_readable(print_output=False))
        return "\n\n".join(parts)


def _copied(graph: fx.Graph) -> fx.Graph:
    """A copy of ``graph`` that a pass may edit (the passes never edit their input)."""
    copy = fx.Graph()
    copy.output(copy.graph_copy(graph, {}))
    return copy


def _fake_prop(gm: fx.GraphModule, args) -> fx.GraphModule:
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    copy = fx.GraphModule(gm, _copied(gm.graph))
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    FakeTensorProp(copy, mode).propagate(*args)
    return copy


def _symbolic(gm: fx.GraphModule) -> bool:
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            v = n.meta.get("val")
            if isinstance(v, torch.SymInt) or (isinstance(v, torch.Tensor) and any(
                    isinstance(s, torch.SymInt) for s in v.shape)):
                return True
    return False


def specialize(lw: Lowering, args) -> Lowering:
    """Concrete shapes on every node (re-propagated with these arguments if the graph is symbolic)."""
    return dataclasses.replace(lw, gm=_fake_prop(lw.gm, args) if _symbolic(lw.gm) else lw.gm)


def split_foreach(lw: Lowering, args=None) -> Lowering:
    """``_foreach_*`` ops over lists of tensors as one op per element (``foreach``), so each
    parameter's optimizer update can become one fused chain; a list op only copied back into its
    inputs (the step counters' update) in place again; list ops over 0-d tensors (the bias
    corrections) as single ops over their stacked values."""
    if not lw.options.fusion:
        return lw
    gm, count = foreach.split(lw.gm)
    stats.add("foreach_split", count)
    gm, count = foreach.reinplace(gm)
    stats.add("foreach_inplace", count)
    gm, count = foreach.stack_scalars(gm)
    stats.add("foreach_stacked", count)
    return dataclasses.replace(lw, gm=gm)


_NOOPS = (torch.ops.aten.clone.default, torch.ops.aten.alias.default)


def drop_noops(lw: Lowering, args=None) -> Lowering:
    """``clone`` and ``alias`` of a value the graph computed, replaced by that value: a
    functionalized graph never writes a value once it is made, so the copy only costs a host
    copy and a stored result on the device. Dropout with p=0 in training decomposes to such a
    clone (the demo model and Hugging Face attention have them). Kept when the value is (a view
    of) a graph input, when the copy changes strides, when the copy is a graph output and so is
    another view of the same memory (two outputs would share it), or when an op writes into the
    copy or the value."""
    graph = _copied(lw.gm.graph)
    outputs = set(graph.output_node().all_input_nodes)

    def base(x):
        """The node whose memory ``x`` is (through views)."""
        while (isinstance(x, fx.Node) and x.op == "call_function" and isinstance(x.target, torch._ops.OpOverload)
               and _is_view(x) and x.args):
            x = x.args[0]
        return x

    dropped = 0
    for n in list(graph.nodes):
        if n.op != "call_function" or n.target not in _NOOPS or not n.args:
            continue
        src, root = n.args[0], base(n.args[0])
        if (not isinstance(src, fx.Node) or not isinstance(root, fx.Node) or root.op != "call_function"
                or not isinstance(root.target, torch._ops.OpOverload) or chains.writes_operand(root.target)
                or (n in outputs and any(base(o) is root for o in outputs if o is not n))):
            continue
        v, sv = n.meta.get("val"), src.meta.get("val")
        if (not isinstance(v, torch.Tensor) or not isinstance(sv, torch.Tensor) or v.shape != sv.shape
                or v.stride() != sv.stride() or v.dtype != sv.dtype):
            continue
        if any(chains.writes_operand(u.target) for u in list(n.users) + list(src.users)):
            continue
        n.replace_all_uses_with(src)
        graph.erase_node(n)
        dropped += 1
    if not dropped:
        return lw
    stats.add("noop_copies", dropped)
    return dataclasses.replace(lw, gm=fx.GraphModule(lw.gm, graph))


def classify(lw: Lowering, args=None) -> Lowering:
    kinds = []
    for n in lw.gm.graph.nodes:
        if n.op != "call_function" or not isinstance(n.target, torch._ops.OpOverload):
            continue
        if n.target in chains.VIEWS or _is_view(n):
            kinds.append((n.name, "view", None, None))
            continue
        kind, reason = library_entry(n)
        kinds.append((n.name, kind, reason, _op_name(n.target)))
    return dataclasses.replace(lw, kinds=tuple(kinds))


def _op_name(t) -> str:
    s = t._schema
    return s.name + (f".{s.overload_name}" if s.overload_name else "")


def _is_view(n) -> bool:
    sch = n.target._schema
    return bool(sch.returns) and sch.returns[0].alias_info is not None and not sch.returns[0].alias_info.is_write


def fuse(lw: Lowering, args=None) -> Lowering:
    if not lw.options.fusion:
        return lw
    return dataclasses.replace(lw, groups=tuple(chains.find_groups(lw.gm, lw.options.min_chain)))


def _build(lw: Lowering, g: chains.Group):
    """(the group's generated kernel, None) or (None, why it cannot be generated)."""
    try:
        chain, inputs, outputs, eager_bytes = lowering.chain_of(g)
        name = lowering.group_name(stats.count("fused_kernels") + stats.count("unfused_chains"), chain)
        info = lowering.build_kernel(name, chain, lw.options, lw.profile)
    except Exception as e:  # noqa: BLE001 - the chain's nodes run as eager ops; the reason is reported
        return None, f"{type(e).__name__}: {e}"
    inplace, absorbed = reference.inplace_results(g, chain, inputs, outputs)
    ref, written = reference.reference_graph(g, inputs, outputs, inplace)
    values = None
    if not any(j is not None for j in inplace):
        values, whole = reference.values_graph(g, inputs, outputs)
        stats.add("host_recomposed", whole)
    return FusedKernel(name, chain, ref, inputs, outputs, {**info, "eager_bytes": eager_bytes, "written": written},
                       lowering.program_factory(chain, name, lw.profile), inplace, absorbed, values), None


def _eager_ns(nodes, profile: str, overhead: float) -> float | None:
    """What ``nodes`` cost as eager launches (each kernel's schedule plus the launch overhead);
    None when one of them has no table kernel (eager would run it on the host, or as a runtime
    op this model does not cost): fusing it is then taken as the better choice."""
    total = 0.0
    for n in nodes:
        if n.target in chains.VIEWS or n.target is operator.getitem:
            continue
        ns = kernels.eager_kernel_ns(n, profile)
        if ns is None:
            return None
        total += ns + overhead
    return total


def _epilogue(g: chains.Group, min_chain: int) -> chains.Group | None:
    """The nodes after a chain's leading matmul as their own chain (the matmul then runs as its
    library kernel and writes its result to HBM), or None when too few remain."""
    rest = list(g.nodes[1:])
    while rest and rest[0].target in chains.VIEWS and rest[0].args[0] is g.nodes[0]:
        rest.pop(0)
    if not rest or rest[0].target in chains.VIEWS or sum(n.target not in chains.VIEWS for n in rest) < min_chain:
        return None
    return chains.Group(g.gid, g.rows, g.cols, rest, contract=0)


def generate(lw: Lowering, args=None) -> Lowering:
    """One generated kernel per chain, where it beats the eager kernels it replaces.

    A kernel's cost is its simulated schedule plus one launch overhead; the eager alternative
    pays each op's library kernel schedule plus an overhead per launch. A chain started by a
    matmul is also tried as the matmul's own kernel followed by the fused epilogue. The cheapest
    of the three is lowered; a chain left eager is reported with both figures."""
    from neuron_sim.device import profile_properties

    overhead = float(profile_properties(lw.profile).launch_overhead_ns)
    found, groups = [], []
    for g in lw.groups:
        k, why = _build(lw, g)
        if k is None and any(chains.sums_rows(n) for n in g.nodes):
            # Sums over the rows need PSUM banks of their own; without them the rest may fit.
            rest = chains.Group(g.gid, g.rows, g.cols, [n for n in g.nodes if not chains.sums_rows(n)], g.contract)
            k, _ = _build(lw, rest)
            g = rest if k is not None else g
        choice = [] if k is None else [(k.latency_ns + overhead, g, k)]
        # A matmul-led chain as the matmul's library kernel and a fused epilogue: the fallback
        # when the whole chain does not fit the engines, and a candidate when it does.
        epi = _epilogue(g, lw.options.min_chain) if g.contract else None
        mm = _eager_ns(g.nodes[:1], lw.profile, overhead) if epi is not None else None
        if mm is not None and (k is None or mm < k.latency_ns + overhead):
            ke, _ = _build(lw, epi)
            if ke is not None:
                choice.append((mm + ke.latency_ns + overhead, epi, ke))
        eager = _eager_ns(g.nodes, lw.profile, overhead) if lw.options.profitability or not choice else None
        if eager is not None:
            choice.append((eager, None, None))
        if not choice:
            stats.unfused({"graph": lw.name, "nodes": [n.name for n in g.nodes], "reason": why})
            continue
        cost, chosen, kern = min(choice, key=lambda c: c[0])
        if chosen is not g:
            head = why if k is None else (f"not profitable: the fused kernel takes {k.latency_ns + overhead:.0f} ns "
                                          "with its launch")
            tail = ("the eager kernels take" if chosen is None else
                    "the matmul's kernel and a fused epilogue take") + f" {cost:.0f} ns"
            stats.unfused({"graph": lw.name, "nodes": [n.name for n in g.nodes], "reason": f"{head}; {tail}"})
        if chosen is None:
            continue
        groups.append(chosen)
        found.append((chosen.gid, kern))
        stats.add("inplace_results", sum(j is not None for j in kern.inplace))
        stats.fused({"name": kern.name, "graph": lw.name, "ops": kern.chain.describe(),
                     "aten": [str(n.target) for n in chosen.nodes], "rows": kern.chain.rows,
                     "cols": kern.chain.cols, "latency_ns": kern.latency_ns, "hbm_bytes": kern.dma_bytes,
                     "eager_hbm_bytes": kern.eager_bytes})
    return dataclasses.replace(lw, groups=tuple(groups), kernels=tuple(found))


def _host_entries(lw: Lowering) -> list:
    """(node name, (op, kind, reason)) of the ATen nodes the lowered graph runs as eager ops."""
    fused = {n.name for gid, k in lw.kernels for g in lw.groups if g.gid == gid for n in g.nodes}
    return [(name, (op, kind, reason)) for name, kind, reason, op in lw.kinds if name not in fused and kind != "view"]


def lower(lw: Lowering, args=None) -> Lowering:
    return dataclasses.replace(lw, lowered=lowering.lower(lw.gm, list(lw.groups), dict(lw.kernels)),
                               host_nodes=tuple(h for _, h in _host_entries(lw)))


def recompose(lw: Lowering, args=None) -> Lowering:
    """A softmax, log-softmax or backward of one that the decompositions split for the fusion
    generator, left as eager nodes (its chain got no kernel): the one ATen op again
    (``reference._recomposed``), so it runs as one native kernel and one host pass instead of
    up to six of each."""
    if lw.lowered is None:
        return lw
    graph = _copied(lw.lowered.graph)
    order = {n: i for i, n in enumerate(graph.nodes)}
    members = [n for n in graph.nodes if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload)]
    whole = reference.recomposable(members, set(members), set(graph.output_node().all_input_nodes))
    if not whole:
        return lw
    gone_names, added = set(), {}
    for n, (op, op_args, nodes) in whole.items():
        with graph.inserting_before(n):
            # An argument may be an earlier match's end node (a softmax's output read by its backward).
            new = graph.call_function(op, fx.node.map_arg(op_args, lambda x: added.get(x, x)))
        new.meta = dict(n.meta)
        n.replace_all_uses_with(new)
        gone_names |= {x.name for x in nodes} | {n.name}
        for x in sorted(nodes | {n}, key=order.get, reverse=True):
            graph.erase_node(x)
        added[n] = new
    stats.add("recomposed_nodes", len(added))
    host = tuple(h for name, h in _host_entries(lw) if name not in gone_names)
    host += tuple((_op_name(n.target), *library_entry(n)) for n in added.values())
    return dataclasses.replace(lw, lowered=fx.GraphModule(lw.lowered, graph), host_nodes=host)


def batch(lw: Lowering, args=None) -> Lowering:
    """Fused kernels with one reference structure and no dependency between them (the
    per-parameter chains of an optimizer step) run their host references as one batch of
    ``_foreach_*`` ops (``batch.apply``); each keeps its own launch on the device."""
    if not lw.options.fusion or lw.lowered is None:
        return lw
    gm, count = batching.apply(lw.lowered)
    if count:
        stats.add("batched_kernels", count)
    return dataclasses.replace(lw, lowered=gm)


def count_host_nodes(lw: Lowering, fell_back: dict) -> None:
    """Counts the nodes run as eager ops, from the first run of the lowered graph: a node whose op
    ran as a host fallback there (``fell_back``: op -> executions, from the device's op counters)
    is a fallback node, the others ran native kernels (op-table kernels or the runtime's own)."""
    for op, kind, reason in lw.host_nodes:
        if op in fell_back:
            stats.fallback(op, reason or f"{op} ran as a host fallback")
        else:
            stats.add("eager_nodes")
            if kind == "kernel":
                stats.add("kernel_nodes")


PASSES: tuple[tuple[str, Callable], ...] = (
    ("specialize", specialize),
    ("split_foreach", split_foreach),
    ("drop_noops", drop_noops),
    ("classify", classify),
    ("fuse", fuse),
    ("generate", generate),
    ("lower", lower),
    ("recompose", recompose),
    ("batch", batch),
)


def run(lw: Lowering, args) -> Lowering:
    for name, fn in PASSES:
        t0 = time.perf_counter()
        lw = fn(lw, args)
        stats.stage(name, time.perf_counter() - t0)
        if lw.options.dump_dir:
            os.makedirs(lw.options.dump_dir, exist_ok=True)
            with open(os.path.join(lw.options.dump_dir, f"{lw.name}.{name}.txt"), "w") as f:
                f.write(lw.dump())
    stats.add("specializations")
    return lw
