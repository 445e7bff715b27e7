# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""A fused chain's host reference: its ATen nodes as their own small graph.

``reference_graph`` rebuilds a group's nodes so that they compute straight into the kernel's
result tensors (out= forms, several results through one out= call) and, for a result the kernel
stores into the graph input it updates (``inplace_results``), in place on that input once nothing
reads the old value; intermediates read once are reused (``mul`` -> ``mul_``). The host runs this
graph on zero-copy views of the device buffers for a kernel that updates its inputs in place, or
off the device; ``values_graph`` (the nodes as they are, run on the device tensors) otherwise.
"""
from __future__ import annotations

import operator

import torch
import torch.fx as fx

from .chains import Group, _val

aten = torch.ops.aten

def _out_variant(op):
    """(the out= overload of ATen ``op`` with the same arguments, its out argument's name), or None."""
    if not isinstance(op, torch._ops.OpOverload):
        return None
    args = [(a.name, str(a.type)) for a in op._schema.arguments]
    packet = op.overloadpacket
    for name in packet.overloads():
        o = getattr(packet, name)
        outs = [a for a in o._schema.arguments if a.is_out]
        if len(outs) == 1 and [(a.name, str(a.type)) for a in o._schema.arguments if not a.is_out] == args:
            return o, outs[0].name
    return None


def _multi_out_variant(op):
    """(the out= overload of an ATen op with several tensor results, its out arguments' names in
    result order), or None."""
    if not isinstance(op, torch._ops.OpOverload) or len(op._schema.returns) < 2:
        return None
    args = [(a.name, str(a.type)) for a in op._schema.arguments]
    packet = op.overloadpacket
    for name in packet.overloads():
        o = getattr(packet, name)
        outs = [a.name for a in o._schema.arguments if a.is_out]
        if (len(outs) == len(op._schema.returns)
                and [(a.name, str(a.type)) for a in o._schema.arguments if not a.is_out] == args):
            return o, outs
    return None


def _results_into(n, slot: dict, position: dict):
    """For a node with several tensor results: per result, the chain's getitem node the result is
    stored from (None for one it does not store), when at least one is stored and the op has an
    out= form; else None."""
    val = _val(n)
    if (not isinstance(val, (tuple, list)) or not val or not all(isinstance(v, torch.Tensor) for v in val)
            or _multi_out_variant(n.target) is None):
        return None
    parts = [None] * len(val)
    for u in n.users:
        if u in position and u.target is operator.getitem and u in slot:
            parts[u.args[1]] = u
    return parts if any(p is not None for p in parts) else None


def _contiguous(v) -> bool:
    return isinstance(v, torch.Tensor) and v.is_contiguous()


def inplace_results(g: Group, chain, inputs: list, outputs: list) -> tuple[tuple, tuple]:
    """Results the kernel writes straight into the graph input they update.

    A functionalized graph updates an input (an optimizer's parameters and moments) by computing
    the new value and ending with ``copy_(input, value)``. When the value is a full result of
    this chain and the input is a full operand of it that nothing outside the chain reads, the
    kernel stores the result into the input's buffer and the copy goes: every row block of the
    tile program loads its operands before it stores its results, and element e of the result
    depends on element e of the input only. Returns (per result: the index of the input it is
    written into, or None; the copy_ nodes this absorbs)."""
    members = set(g.nodes)
    layouts = chain.layouts()
    target: list = [None] * len(outputs)
    absorbed = []
    taken = set()
    for k, o in enumerate(outputs):
        for c in o.users:
            via = None
            if (c.target is aten.copy.default and len(c.users) == 1 and len(c.args) == 2 and c.args[1] is o
                    and _val(c).shape == _val(o).shape and _val(c).dtype == _val(o).dtype):
                # A user's ``x.copy_(value)`` functionalized: copy(x, value), then copy_(x, copy).
                via, c = c, next(iter(c.users))
                if c.args[0] is not via.args[0]:
                    continue
            if c.target is not aten.copy_.default or c.args[1] is not (via or o) or c.users or len(c.args) > 2:
                continue
            dst = c.args[0]
            if (not isinstance(dst, fx.Node) or dst.op != "placeholder" or dst not in inputs or dst in taken
                    or layouts[chain.outputs[k]] != "full"):
                continue
            j = inputs.index(dst)
            dv, ov = _val(dst), _val(o)
            if (chain.inputs[j].layout != "full" or not _contiguous(dv) or not _contiguous(ov)
                    or dv.shape != ov.shape or dv.dtype != ov.dtype or dv.device != ov.device):
                continue
            if any(u is not c and u is not via and u not in members for u in dst.users):
                continue
            target[k] = j
            taken.add(dst)
            absorbed += [c] if via is None else [via, c]
            break
    return tuple(target), tuple(absorbed)


def reference_graph(g: Group, inputs: list, outputs: list, inplace: tuple = ()) -> tuple[fx.GraphModule, tuple]:
    """The group's ATen nodes as their own graph: (inputs, then one tensor per output to write) ->
    tuple of outputs. A result whose op has an out= form is computed straight into its tensor;
    the second value says which results were (the others are returned for the caller to copy).
    A result written into an input (``inplace``) is computed into it only after the chain's
    last read of that input."""
    graph = fx.Graph()
    env = {}
    for i, a in enumerate(inputs):
        env[a] = graph.placeholder(f"in{i}")
    dests = [graph.placeholder(f"out{k}") for k in range(len(outputs))]
    slot = {o: k for k, o in enumerate(outputs)}
    written = [False] * len(outputs)
    position = {n: i for i, n in enumerate(g.nodes)}
    last_read = {}
    for n in g.nodes:
        for a in n.all_input_nodes:
            if a in env:
                last_read[a] = position[n]
    for k, j in enumerate(inplace):
        if j is not None and last_read.get(inputs[j], -1) > position[outputs[k]]:
            slot.pop(outputs[k])
    into = {outputs[k]: inputs[j] for k, j in enumerate(inplace) if j is not None and outputs[k] in slot}
    for n in g.nodes:
        first = _updates_in_place(n, into.get(n), position, last_read) if n in into else None
        if first is not None:
            # The result's input is read last by this op (or by its first operand's op, whose
            # result nothing else reads): both run in place on the input, with no temporary.
            if first is not into[n]:
                env[first].target = _inplace_variant(first.target)
            env[n] = graph.call_function(_inplace_variant(n.target), tuple(fx.node.map_arg(n.args, lambda x: env[x])),
                                         fx.node.map_arg(n.kwargs, lambda x: env[x]))
            written[slot[n]] = True
            continue
        parts = _results_into(n, slot, position)
        if parts is not None:
            # Several results (layer norm and its backward): the out= form computes each into
            # its tensor, a result the chain does not store into a temporary.
            op, names = _multi_out_variant(n.target)
            outs = {}
            for name, val, user in zip(names, _val(n), parts):
                if user is not None:
                    outs[name] = dests[slot[user]]
                    written[slot[user]] = True
                else:
                    outs[name] = graph.call_function(aten.empty_strided.default, (tuple(val.shape), val.stride()),
                                                     {"dtype": val.dtype})
            env[n] = graph.call_function(op, tuple(fx.node.map_arg(n.args, lambda x: env[x])),
                                         {**fx.node.map_arg(n.kwargs, lambda x: env[x]), **outs})
            continue
        v = _out_variant(n.target) if n in slot else None
        if v is not None and isinstance(_val(n), torch.Tensor):
            op, out_name = v
            env[n] = graph.call_function(op, tuple(fx.node.map_arg(n.args, lambda x: env[x])),
                                         {**fx.node.map_arg(n.kwargs, lambda x: env[x]), out_name: dests[slot[n]]})
            written[slot[n]] = True
        else:
            env[n] = graph.node_copy(n, lambda x: env[x])
    graph.output(tuple(env[o] for o in outputs))
    _reinplace(graph)
    return fx.GraphModule(torch.nn.Module(), graph), tuple(written)


def values_graph(g: Group, inputs: list, outputs: list) -> tuple[fx.GraphModule, int]:
    """The group's ATen nodes as they are: inputs -> tuple of outputs. The backend runs it on the
    device tensors themselves in values-only mode (``_C.exchange_values_only``), where each op
    computes as its eager op does (on the host, into device memory, with no copy into a result
    allocated beforehand) but issues no launch and counts nothing: the kernel launches once.
    A softmax or log-softmax (or its backward) that the decompositions split into pointwise and
    reduction nodes for the tile kernel runs as the one ATen op eager runs (``_recomposed``):
    the split form makes up to six passes over the scores on the host. Returns the graph and
    how many such ops it runs whole."""
    graph = fx.Graph()
    env = {a: graph.placeholder(f"in{i}") for i, a in enumerate(inputs)}
    whole = recomposable(g.nodes, set(g.nodes), set(outputs))
    gone = set().union(*(r[2] for r in whole.values()))
    for n in g.nodes:
        if n in gone:
            continue
        if n in whole:
            op, args, _ = whole[n]
            env[n] = graph.call_function(op, tuple(fx.node.map_arg(args, lambda x: env[x])))
            env[n].meta = dict(n.meta)
        else:
            env[n] = graph.node_copy(n, lambda x: env[x])
    graph.output(tuple(env[o] for o in outputs))
    return fx.GraphModule(torch.nn.Module(), graph), len(whole)


def _is(n, op, *args) -> bool:
    return isinstance(n, fx.Node) and n.op == "call_function" and n.target is op and \
        all(a is None or (i < len(n.args) and n.args[i] is a) for i, a in enumerate(args))


def _row_reduce(n, op) -> list | None:
    """The dims of a keepdim reduction ``op(x, [d], True)`` (one dimension), else None."""
    if not _is(n, op) or len(n.args) < 3 or n.args[2] is not True or len(n.args[1]) != 1:
        return None
    return list(n.args[1])


def recomposable(nodes, members: set, keep: set) -> dict:
    """Per node of ``nodes`` (in graph order) that ends a decomposed softmax-family op
    (``_recomposed``): (the one ATen op, its arguments, the other nodes it replaces); no two
    share a node."""
    whole, gone = {}, set()
    for n in nodes:
        r = _recomposed(n, members, keep) if n not in gone else None
        if r is not None and not (r[2] & gone):
            whole[n] = r
            gone |= r[2]
    return whole


def _recomposed(n, members: set, keep: set):
    """(one ATen op, its arguments, the decomposition's other nodes) when ``n`` ends a
    decomposed ``_log_softmax``, ``_softmax`` or one of their backwards whose intermediate
    nodes nothing else reads (in ``torch._decomp``'s forms); None otherwise."""
    a = aten

    def only_inside(nodes) -> bool:
        inside = set(nodes) | {n}
        return all(x in members and x not in keep and set(x.users) <= inside for x in nodes)

    def same_dtype(*xs) -> bool:
        vals = [_val(x) for x in xs]
        return all(isinstance(v, torch.Tensor) for v in vals) and len({v.dtype for v in vals}) == 1

    if _is(n, a.sub.Tensor) and len(n.args) == 2 and not n.kwargs:
        s, lg = n.args
        # log_softmax: (x - amax(x)) - log(sum(exp(x - amax(x))))
        if _is(lg, a.log.default) and _is(s, a.sub.Tensor) and len(s.args) == 2:
            sm, mx = lg.args[0], s.args[1]
            dims = _row_reduce(sm, a.sum.dim_IntList)
            if (dims is not None and _is(sm.args[0], a.exp.default, s) and _row_reduce(mx, a.amax.default) == dims
                    and mx.args[0] is s.args[0] and only_inside([s, lg, sm, sm.args[0], mx])
                    and same_dtype(n, s.args[0])):
                return a._log_softmax.default, (s.args[0], dims[0], False), {s, lg, sm, sm.args[0], mx}
        # log_softmax backward: g - exp(out) * sum(g)
        grad, prod = s, lg
        if _is(prod, a.mul.Tensor) and len(prod.args) == 2:
            for e, sm in (prod.args, prod.args[::-1]):
                dims = _row_reduce(sm, a.sum.dim_IntList)
                if (dims is not None and _is(e, a.exp.default) and sm.args[0] is grad
                        and only_inside([prod, e, sm]) and same_dtype(n, grad, e.args[0])):
                    return (a._log_softmax_backward_data.default, (grad, e.args[0], dims[0], _val(grad).dtype),
                            {prod, e, sm})
        # softmax backward: g * out - out * sum(g * out)
        if _is(prod, a.mul.Tensor) and _is(grad, a.mul.Tensor) and len(grad.args) == 2:
            for out, sm in (prod.args, prod.args[::-1]):
                dims = _row_reduce(sm, a.sum.dim_IntList)
                if (dims is not None and sm.args[0] is grad and out in grad.args
                        and only_inside([prod, sm, grad]) and same_dtype(n, out)):
                    g0 = grad.args[1] if grad.args[0] is out else grad.args[0]
                    return (a._softmax_backward_data.default, (g0, out, dims[0], _val(out).dtype),
                            {prod, sm, grad})
    # softmax: exp(x - amax(x)) / sum(exp(x - amax(x)))
    if _is(n, a.div.Tensor) and len(n.args) == 2 and not n.kwargs:
        e, sm = n.args
        dims = _row_reduce(sm, a.sum.dim_IntList)
        if dims is not None and _is(e, a.exp.default) and sm.args[0] is e:
            s = e.args[0]
            if _is(s, a.sub.Tensor) and len(s.args) == 2:
                mx = s.args[1]
                if (_row_reduce(mx, a.amax.default) == dims and mx.args[0] is s.args[0]
                        and only_inside([e, sm, s, mx]) and same_dtype(n, s.args[0])):
                    return a._softmax.default, (s.args[0], dims[0], False), {e, sm, s, mx}
    return None


def _updates_in_place(n, x, position: dict, last_read: dict):
    """For a result ``n`` stored into input ``x``: the node that starts its in-place update of
    ``x`` (``x`` itself, when ``n``'s first operand is ``x``; or that operand, when it is an op on
    ``x`` read only by ``n``), or None when ``x`` is read after that point or an op has no in-place
    form."""
    if not n.args or not isinstance(n.args[0], fx.Node) or _inplace_variant(n.target) is None:
        return None
    vx, vn = _val(x), _val(n)
    if not (_contiguous(vx) and isinstance(vn, torch.Tensor) and vn.shape == vx.shape and vn.dtype == vx.dtype):
        return None
    a = n.args[0]
    if a is x:
        return x if last_read.get(x) == position[n] else None
    if (a in position and _fresh(a) and len(a.users) == 1 and a.args and a.args[0] is x
            and last_read.get(x) == position[a] and _inplace_variant(a.target) is not None
            and isinstance(_val(a), torch.Tensor) and _val(a).shape == vx.shape and _val(a).dtype == vx.dtype):
        return a
    return None


def _inplace_variant(op):
    """``aten.X_.<overload>`` for ``aten.X.<overload>``, or None."""
    if not isinstance(op, torch._ops.OpOverload):
        return None
    packet = getattr(aten, op._schema.name.split("::")[-1] + "_", None)
    name = op._schema.overload_name or "default"
    return getattr(packet, name, None) if packet is not None and name in packet.overloads() else None


def _fresh(node) -> bool:
    """A node whose result is a new tensor (not a view of another, not an out= argument)."""
    if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
        return False
    ret = node.target._schema.returns
    return len(ret) == 1 and ret[0].alias_info is None


def _reinplace(graph: fx.Graph) -> None:
    """An op whose first operand is an intermediate read by nothing else computes into it
    (``mul`` -> ``mul_``): the host reference allocates one tensor per chain value fewer."""
    owned = {n for n in graph.nodes if _fresh(n)}   # results whose storage no other value shares
    for n in list(graph.nodes):
        if n not in owned or not n.args:
            continue
        a = n.args[0]
        if not isinstance(a, fx.Node) or a not in owned or len(a.users) != 1:
            continue
        va, vn = a.meta.get("val"), n.meta.get("val")
        if (not isinstance(va, torch.Tensor) or not isinstance(vn, torch.Tensor) or va.shape != vn.shape
                or va.dtype != vn.dtype or not va.is_contiguous()):
            continue
        op = _inplace_variant(n.target)
        if op is not None:
            n.target = op
