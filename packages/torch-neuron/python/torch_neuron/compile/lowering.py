# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""Chains -> generated kernels -> the lowered graph.

``chain_of`` describes one group of ATen nodes as a ``neuron_kernels.fusion.Chain`` (its host
reference, the small ATen graph that computes the same values, is built by ``reference``);
``lower`` rebuilds the graph with each group replaced by one ``FusedKernel`` call, in a
topological order of groups and remaining nodes (``topological_units``, also used by ``batch``).
"""
from __future__ import annotations

import math
import operator

import torch
import torch.fx as fx

from . import cache, stats
from .chains import (BINARY, MATMULS, NORMS, REDUCTION, UNARY, VIEWS, FLOAT_DTYPES, Group, _shape, _val, prims,
                     sums_rows)

aten = torch.ops.aten


class Unfusable(Exception):
    pass


def _nbytes(node) -> int:
    v = _val(node)
    return v.numel() * v.element_size() if isinstance(v, torch.Tensor) else 0


def chain_of(g: Group):
    """(Chain, inputs: external nodes, outputs: compute nodes stored to HBM, eager_bytes)."""
    from neuron_kernels.fusion import Chain, Operand, Step

    members = set(g.nodes)
    inputs: list[fx.Node] = []
    in_layout: dict[fx.Node, str] = {}
    value: dict[fx.Node, tuple] = {}
    steps: list = []
    step_node: dict[int, fx.Node] = {}

    def ref(a, out_shape):
        if not isinstance(a, fx.Node):
            return ("c", float(a))
        if a in value:
            return value[a]
        lay = g.operand_layout(_shape(a), out_shape)
        if lay is None:
            raise Unfusable(f"operand {a.name} of shape {_shape(a)} against {out_shape}")
        if a in in_layout and in_layout[a] != lay:
            raise Unfusable(f"input {a.name} is used as {in_layout[a]} and {lay}")
        if a not in in_layout:
            in_layout[a] = lay
            inputs.append(a)
        return ("in", inputs.index(a))

    def operand(a, lay):
        """A matmul operand (``lhs``/``rhs``): always an input of the chain."""
        if a in value or (a in in_layout and in_layout[a] != lay):
            raise Unfusable(f"matmul operand {a.name} is also used as {in_layout.get(a, 'a chain value')}")
        if a not in in_layout:
            in_layout[a] = lay
            inputs.append(a)
        return ("in", inputs.index(a))

    def emit(op, args, dtype, node):
        steps.append(Step(op, tuple(args), dtype))
        step_node[len(steps) - 1] = node
        return ("v", len(steps) - 1)

    for n in g.nodes:
        t = n.target
        if t is operator.getitem:
            value[n] = value[n.args[0]][n.args[1]]
            continue
        if t in NORMS:
            value[n] = _norm_steps(emit, ref, n)
            continue
        out = _shape(n)
        dt = FLOAT_DTYPES[_val(n).dtype]
        if t in VIEWS:
            src = n.args[0]
            value[n] = value[src] if src in value else ref(src, out)
            continue
        if t in MATMULS:
            if steps:
                raise Unfusable(f"{n.name}: a matmul only starts a chain")
            lhs, rhs = (n.args[1], n.args[2]) if t is aten.addmm.default else (n.args[0], n.args[1])
            mm = emit("matmul", [operand(lhs, "lhs"), operand(rhs, "rhs")],
                      "float32" if t is aten.addmm.default and dt != "float32" else dt, n)
            if t is aten.addmm.default:
                # addmm rounds once (bias added to the fp32 product), as the library GEMM's epilogue.
                value[n] = emit("add", [mm, ref(n.args[0], out)], dt, n)
            else:
                value[n] = mm
        elif sums_rows(n):
            value[n] = emit("sum_rows", [ref(n.args[0], _shape(n.args[0]))], dt, n)
        elif t in REDUCTION:
            value[n] = emit(REDUCTION[t], [ref(n.args[0], _shape(n.args[0]))], dt, n)
        elif t in BINARY:
            a, b = ref(n.args[0], out), ref(n.args[1], out)
            op = BINARY[t]
            if op == "power" and b[0] == "c" and b[1] == 2.0:
                value[n] = emit("square", [a], dt, n)
            else:
                value[n] = emit(op, [a, b], dt, n)
        elif t in UNARY:
            value[n] = emit(UNARY[t], [ref(n.args[0], out)], dt, n)
        elif t is aten.gelu.default:
            approx = n.kwargs.get("approximate", n.args[1] if len(n.args) > 1 else "none")
            value[n] = emit("gelu_apprx_tanh" if approx == "tanh" else "gelu", [ref(n.args[0], out)], dt, n)
        elif t is aten.rsub.Scalar:
            value[n] = emit("subtract", [("c", float(n.args[1])), ref(n.args[0], out)], dt, n)
        elif t in (prims.convert_element_type.default, aten._to_copy.default):
            value[n] = emit("copy", [ref(n.args[0], out)], dt, n)
        elif t is aten.threshold_backward.default:
            mask = emit("greater", [ref(n.args[1], out), ("c", float(n.args[2]))], "float32", n)
            value[n] = emit("multiply", [ref(n.args[0], out), mask], dt, n)
        elif t is aten.gelu_backward.default:
            value[n] = _gelu_backward(emit, ref(n.args[0], out), ref(n.args[1], out),
                                      n.kwargs.get("approximate", "none"), dt, n)
        elif t in (aten.addcmul.default, aten.addcdiv.default):
            # self + value * (t1 op t2), fp32 between the steps as ATen's kernel computes it.
            scale = n.kwargs.get("value", n.args[3] if len(n.args) > 3 else 1)
            prod = emit("multiply" if t is aten.addcmul.default else "divide",
                        [ref(n.args[1], out), ref(n.args[2], out)], "float32", n)
            if scale != 1:
                prod = emit("multiply", [prod, ("c", float(scale))], "float32", n)
            value[n] = emit("add", [ref(n.args[0], out), prod], dt, n)
        elif t is aten.lerp.Scalar:
            # ATen's lerp: start + w * (end - start) for |w| < 0.5, else end - (end - start) * (1 - w).
            start, end, w = ref(n.args[0], out), ref(n.args[1], out), float(n.args[2])
            diff = emit("subtract", [end, start], "float32", n)
            if abs(w) < 0.5:
                value[n] = emit("add", [start, emit("multiply", [diff, ("c", w)], "float32", n)], dt, n)
            else:
                value[n] = emit("subtract", [end, emit("multiply", [diff, ("c", 1.0 - w)], "float32", n)], dt, n)
        elif t is aten.tanh_backward.default:
            y = ref(n.args[1], out)
            sq = emit("multiply", [y, y], "float32", n)
            one_minus = emit("subtract", [("c", 1.0), sq], "float32", n)
            value[n] = emit("multiply", [ref(n.args[0], out), one_minus], dt, n)
        elif t is aten.sigmoid_backward.default:
            y = ref(n.args[1], out)
            one_minus = emit("subtract", [("c", 1.0), y], "float32", n)
            d = emit("multiply", [y, one_minus], "float32", n)
            value[n] = emit("multiply", [ref(n.args[0], out), d], dt, n)
        else:
            raise Unfusable(f"{t} has no fused form")

    # Results: compute nodes read outside the group (views of them are re-applied outside).
    def needed_outside(n):
        return any(u not in members or u.op == "output" for u in n.users)

    outputs: list[fx.Node] = []

    def need(n):
        if n in members and n.target in VIEWS:
            need(n.args[0])
        elif n in members and n not in outputs:
            outputs.append(n)

    for n in g.nodes:
        if needed_outside(n):
            if n.target in NORMS:
                raise Unfusable(f"{n.name}: its results are read without getitem")
            need(n)
    outputs.sort(key=lambda n: g.nodes.index(n))
    out_steps = []
    for n in outputs:
        v = value[n]
        if v[0] != "v":
            raise Unfusable(f"{n.name} is an input value")
        out_steps.append(v[1])
    chain = Chain(g.rows, g.cols, tuple(Operand(in_layout[a], FLOAT_DTYPES[_val(a).dtype]) for a in inputs),
                  tuple(steps), tuple(out_steps), g.contract)
    layouts = chain.layouts()
    for n, s in zip(outputs, out_steps):
        if layouts[s] != g.layout(_shape(n)):
            raise Unfusable(f"{n.name} is {layouts[s]} inside the kernel but has shape {_shape(n)}")
    if not outputs:
        raise Unfusable("no result is used")
    # What the chain's nodes move as separate eager kernels: each compute node reads its
    # tensor operands and writes its result.
    eager_bytes = 0
    for n in g.nodes:
        if n.target not in VIEWS:
            eager_bytes += _nbytes(n) + sum(_nbytes(a) for a in n.all_input_nodes)
    return chain, inputs, outputs, eager_bytes


def _norm_steps(emit, ref, n) -> tuple:
    """A layer norm or its backward over the last dimension as fused steps (fp32 intermediates; two
    row passes, mean then centred variance, as the library kernel computes them): the values of
    its results, in the op's result order (None where the op returns none)."""
    f = "float32"
    vals = _val(n)

    def f32(v, node):
        return v if FLOAT_DTYPES[_val(node).dtype] == f else emit("copy", [v], f, n)

    def rounded(v, k):
        dt = FLOAT_DTYPES[vals[k].dtype]
        return v if dt == f else emit("copy", [v], dt, n)

    if n.target is aten.native_layer_norm.default:
        x, _, w, b, eps = n.args[:5]
        out = _shape(x)
        xf = f32(ref(x, out), x)
        mean = emit("mean", [xf], f, n)
        xc = emit("subtract", [xf, mean], f, n)
        var = emit("mean", [emit("multiply", [xc, xc], f, n)], f, n)
        rstd = emit("rsqrt", [emit("add", [var, ("c", float(eps))], f, n)], f, n)
        y = emit("multiply", [xc, rstd], f, n)
        if w is not None:
            y = emit("multiply", [y, ref(w, out)], f, n)
        if b is not None:
            y = emit("add", [y, ref(b, out)], f, n)
        return rounded(y, 0), rounded(mean, 1), rounded(rstd, 2)
    dy_n, x, _, mean, rstd, w, b, mask = n.args[:8]
    out = _shape(x)
    dy = f32(ref(dy_n, out), dy_n)
    rs = f32(ref(rstd, out), rstd)
    xhat = emit("multiply", [emit("subtract", [f32(ref(x, out), x), f32(ref(mean, out), mean)], f, n), rs], f, n)
    g = dy if w is None else emit("multiply", [dy, ref(w, out)], f, n)
    dx = dw = db = None
    if mask[0]:
        a = emit("mean", [g], f, n)
        c = emit("mean", [emit("multiply", [g, xhat], f, n)], f, n)
        dx = emit("multiply", [emit("subtract", [emit("subtract", [g, a], f, n),
                                                 emit("multiply", [xhat, c], f, n)], f, n), rs], f, n)
        dx = rounded(dx, 0)
    if mask[1] and w is not None:
        dw = emit("sum_rows", [emit("multiply", [dy, xhat], f, n)], FLOAT_DTYPES[vals[1].dtype], n)
    if b is not None:
        ref(b, out)   # an input of the host reference (the ATen op sizes db by it); no step reads it
    if mask[2] and b is not None:
        db = emit("sum_rows", [dy], FLOAT_DTYPES[vals[2].dtype], n)
    return dx, dw, db


def _gelu_backward(emit, dy, x, approximate: str, dt: str, n):
    """dy * GELU'(x) as fused steps (fp32 intermediates, one rounding at the end, as ATen's
    gelu_backward computes it)."""
    f = "float32"
    x2 = emit("multiply", [x, x], f, n)
    if approximate == "tanh":
        k0, k1 = math.sqrt(2.0 / math.pi), 0.044715
        a = emit("add", [emit("multiply", [x2, ("c", k0 * k1)], f, n), ("c", k0)], f, n)
        th = emit("tanh", [emit("multiply", [a, x], f, n)], f, n)
        left = emit("multiply", [emit("add", [th, ("c", 1.0)], f, n), ("c", 0.5)], f, n)
        one_minus = emit("subtract", [("c", 1.0), emit("multiply", [th, th], f, n)], f, n)
        b = emit("add", [emit("multiply", [x2, ("c", 3.0 * k1)], f, n), ("c", 1.0)], f, n)
        right = emit("multiply", [emit("multiply", [emit("multiply", [x, one_minus], f, n), b], f, n),
                                  ("c", 0.5 * k0)], f, n)
    else:
        left = emit("multiply", [emit("add", [emit("erf", [emit("multiply", [x, ("c", 1.0 / math.sqrt(2.0))], f, n)],
                                                   f, n), ("c", 1.0)], f, n), ("c", 0.5)], f, n)
        pdf = emit("multiply", [emit("exp", [emit("multiply", [x2, ("c", -0.5)], f, n)], f, n),
                                ("c", 1.0 / math.sqrt(2.0 * math.pi))], f, n)
        right = emit("multiply", [x, pdf], f, n)
    return emit("multiply", [dy, emit("add", [left, right], f, n)], dt, n)


def build_kernel(name: str, chain, options, profile: str) -> dict:
    """The generated kernel's source and schedule (from the disk cache when present)."""
    from neuron_kernels.fusion import generate, kernel_source

    k = cache.key(options.key(), profile, chain)
    if options.cache:
        hit = cache.load(k)
        if hit is not None:
            stats.cache_event(True, cache.directory())
            return hit
    kernel = generate(chain, name)
    specs = _specs(chain)
    sched = kernel.schedule(*specs, profile=profile)
    entry = {"source": kernel_source(chain, name), "latency_ns": float(sched.latency_ns),
             "dma_bytes": int(sched.dma_bytes), "n_instructions": int(sched.n_instructions),
             "flops": float(sched.flops)}
    if options.cache:
        stats.cache_event(False, cache.directory())
        cache.store(k, entry)
    return entry


def _specs(chain):
    import neuron_kernels.language as nl
    return [nl.TensorSpec(chain.input_shape(i), o.dtype) for i, o in enumerate(chain.inputs)]


def program_factory(chain, name: str, profile: str):
    def make():
        from neuron_kernels.fusion import generate
        return generate(chain, name).programs(*_specs(chain), profile=profile)
    return make


def lower(gm: fx.GraphModule, groups: list, kernels: dict) -> fx.GraphModule:
    """A new graph: each group one FusedKernel call (``kernels[gid]``), the rest copied, in a
    topological order that keeps the original order where it can."""
    from .kernels import FusedKernel

    group_of = {n: g.gid for g in groups if g.gid in kernels for n in g.nodes}
    # copy_ nodes whose value a kernel stores into the input itself (``inplace_results``).
    absorbed = {c for k in kernels.values() for c in k.absorbed}
    order = [n for n in gm.graph.nodes if n not in absorbed]
    # Units: a group (by gid) or a node.
    seq, members = topological_units(order, lambda n: ("g", group_of[n]) if n in group_of else ("n", n))
    if seq is None:
        raise RuntimeError("torch.compile(backend='neuron'): fused groups form a cycle (a non-convex group)")

    graph = fx.Graph()
    env: dict = {}
    for u in seq:
        if u[0] == "n":
            n = u[1]
            env[n] = graph.node_copy(n, lambda x: env[x])
            continue
        fk: FusedKernel = kernels[u[1]]
        g_nodes = members[u]
        call = graph.call_function(fk, tuple(env[a] for a in fk.input_nodes))
        call.meta["val"] = tuple(_val(o) for o in fk.output_nodes)
        for i, o in enumerate(fk.output_nodes):
            env[o] = graph.call_function(operator.getitem, (call, i))
            env[o].meta["val"] = _val(o)
        # Views of results read outside the group are re-applied to the kernel's outputs.
        for n in g_nodes:
            if n.target in VIEWS and n not in env and _view_base_available(n, env):
                env[n] = graph.node_copy(n, lambda x: env[x])
    # A kernel that stores into a graph input is a mutation even when no node reads its results.
    graph.eliminate_dead_code(is_impure_node=lambda n: n.is_impure() or (
        isinstance(n.target, FusedKernel) and any(j is not None for j in n.target.inplace)))
    return fx.GraphModule(gm, graph)


def topological_units(order: list, unit_of) -> tuple:
    """(units in a topological order that keeps ``order`` where it can, unit -> its nodes), or
    (None, None) when the units depend on each other both ways. ``unit_of(node)`` names the unit
    a node belongs to; nodes of one unit are emitted together."""
    import heapq

    unit = {n: unit_of(n) for n in order}
    index = {n: i for i, n in enumerate(order)}
    members: dict = {}
    for n in order:
        members.setdefault(unit[n], []).append(n)
    deps = {u: set() for u in members}
    for u, ns in members.items():
        for n in ns:
            for a in n.all_input_nodes:
                if a in unit and unit[a] != u:
                    deps[u].add(unit[a])
    first = {u: min(index[n] for n in ns) for u, ns in members.items()}
    users = {u: set() for u in members}
    for u, ds in deps.items():
        for d in ds:
            users[d].add(u)
    remaining = {u: len(ds) for u, ds in deps.items()}
    ready = [(first[u], i, u) for i, u in enumerate(members) if remaining[u] == 0]
    heapq.heapify(ready)
    seq = []
    counter = len(members)
    while ready:
        _, _, u = heapq.heappop(ready)
        seq.append(u)
        for v in users[u]:
            remaining[v] -= 1
            if remaining[v] == 0:
                counter += 1
                heapq.heappush(ready, (first[v], counter, v))
    if len(seq) != len(members):
        return None, None
    return seq, members


def _view_base_available(n, env) -> bool:
    src = n.args[0]
    return src in env and all(a in env for a in n.all_input_nodes)


def group_name(gid: int, chain) -> str:
    ops = [s.op for s in chain.steps]
    head = "_".join(dict.fromkeys(ops))[:40]
    return f"fused_{gid}_{head}"

