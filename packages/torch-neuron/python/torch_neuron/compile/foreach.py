# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""``_foreach_*`` nodes as one ATen op chain per list element, so that fusion can see them.

A compiled optimizer step (``torch.compile`` of a function calling ``opt.step()``) is a graph of
``_foreach_*`` ops, each a pass over every parameter: AdamW reads and writes each parameter's
state about twenty times. Split per element, the ops on one parameter form one pointwise chain
(weight decay, both moments, the bias-corrected update) that ``chains`` fuses into one kernel
reading the parameter, its gradient and its two moments once and writing three results. Only
lists with a tensor of more than one element are split: the 0-d step counters and bias
corrections stay ``_foreach_*`` ops (one launch per list), and their results reach the chains as
scalar operands. A list op no other list op reads from or feeds stays whole: split, it would be
one unfused launch per element instead of one per list.
"""
from __future__ import annotations

import operator

import torch
import torch.fx as fx

from .chains import _val, writes_operand

aten = torch.ops.aten

# _foreach_<name> -> the per-element binary op (its .Tensor overload takes a Python number as well).
BINARY = {"add": aten.add.Tensor, "sub": aten.sub.Tensor, "mul": aten.mul.Tensor, "div": aten.div.Tensor}
BINARY_LIST_ONLY = {"maximum": aten.maximum.default, "minimum": aten.minimum.default}
UNARY = ("abs", "exp", "log", "neg", "reciprocal", "sigmoid", "sqrt", "rsqrt", "tanh", "sign", "sin", "cos",
         "erf", "clone")
# _foreach_<name> -> the overloads split here.
SPLIT = {**{n: ("Scalar", "List", "ScalarList", "Tensor") for n in BINARY}, **{n: ("List",) for n in BINARY_LIST_ONLY},
         **{n: ("default",) for n in UNARY}, "addcmul": ("Scalar", "ScalarList"),
         "addcdiv": ("Scalar", "ScalarList"), "pow": ("Scalar",)}


def _big(lst) -> bool:
    return any(isinstance(_val(t), torch.Tensor) and _val(t).numel() > 1 for t in lst)


def _constant(node, like):
    """The fill value of a ``full_like`` node that only repeats a number in its source's dtype, with
    the shape of ``like`` (so that a number in its place broadcasts the same), else None."""
    if (isinstance(node, fx.Node) and node.target is aten.full_like.default and isinstance(node.args[1], (int, float))
            and not isinstance(node.args[1], bool)
            and node.kwargs.get("dtype") in (None, _val(node.args[0]).dtype)
            and node.kwargs.get("memory_format") in (None, torch.preserve_format)
            and isinstance(_val(like), torch.Tensor) and _val(node).shape == _val(like).shape):
        return float(node.args[1])
    return None


class _Emitter:
    def __init__(self, graph: fx.Graph):
        self.graph = graph

    def __call__(self, target, *args, **kwargs) -> fx.Node:
        n = self.graph.call_function(target, args, kwargs)
        n.meta["val"] = target(*fx.node.map_arg(args, _val), **fx.node.map_arg(kwargs, _val))
        return n


def _element(emit: _Emitter, name: str, args: list, i: int, kwargs: dict):
    """The per-element computation of a ``_foreach_<name>`` op of ``SPLIT`` for element ``i``, or
    None when this call's arguments have no per-element form here."""
    def at(a):
        return a[i] if isinstance(a, (list, tuple)) else a

    alpha = kwargs.get("alpha", 1)
    if name in BINARY:
        x, y = args[0][i], at(args[1])
        c = _constant(y, x)
        if c is not None:
            y = c
        if alpha != 1:
            if name not in ("add", "sub"):
                return None
            y = emit(aten.mul.Tensor, y, alpha) if isinstance(y, fx.Node) else y * alpha
        return emit(BINARY[name], x, y)
    if name in BINARY_LIST_ONLY:
        return emit(BINARY_LIST_ONLY[name], args[0][i], args[1][i])
    if name in UNARY:
        return emit(getattr(aten, name).default, args[0][i])
    if name in ("addcmul", "addcdiv"):
        value = args[3] if len(args) > 3 else kwargs.get("value", 1)
        value = at(value)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return None
        s, t1, t2 = args[0][i], args[1][i], args[2][i]
        c1, c2 = _constant(t1, t2), _constant(t2, t1)
        # A tensor filled with one number is that number; addcmul(m, full_like(w), g - m) is how
        # AOTAutograd decomposes _foreach_lerp.
        if name == "addcmul" and (c1 is not None or c2 is not None):
            scale = (c1 if c1 is not None else c2) * value
            other = t2 if c1 is not None else t1
            if (isinstance(other, fx.Node) and other.target is aten.sub.Tensor and other.args[1] is s
                    and other.kwargs.get("alpha", 1) == 1 and abs(scale) < 0.5):
                # s + w * (end - s): the lerp the eager optimizer runs (_foreach_lerp_), one op.
                return emit(aten.lerp.Scalar, s, other.args[0], scale)
            return emit(aten.add.Tensor, s, emit(aten.mul.Tensor, other, scale))
        # The op the eager foreach kernel applies to each element.
        return emit(getattr(aten, name).default, s, t1, t2, value=value)
    return emit(aten.pow.Tensor_Scalar, args[0][i], args[1])


def _parse(node: fx.Node):
    """(name, overload) of a functional ``_foreach_*`` node, else None."""
    if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
        return None
    sch = node.target._schema
    if not sch.name.startswith("aten::_foreach_") or not sch.returns or str(sch.returns[0].type) != "List[Tensor]":
        return None
    if writes_operand(node.target):
        return None
    return sch.name[len("aten::_foreach_"):], sch.overload_name or "default"


def _linked(gm: fx.GraphModule) -> set:
    """The splittable list ops that read another one's results or have theirs read by one: split
    alone, a list op becomes one launch per element that no chain absorbs (clip_grad_norm_'s
    scaling of the gradients), so only connected list ops are split."""
    cands = [n for n in gm.graph.nodes if (p := _parse(n)) is not None and p[1] in SPLIT.get(p[0], ())
             and n.args and isinstance(n.args[0], (list, tuple)) and _big(n.args[0])]
    cand = set(cands)
    linked = set()
    for n in cands:
        for a in n.all_input_nodes:
            src = a.args[0] if a.op == "call_function" and a.target is operator.getitem else None
            if src in cand:
                linked |= {n, src}
    return linked


def split(gm: fx.GraphModule) -> tuple[fx.GraphModule, int]:
    """A copy of ``gm`` with its splittable ``_foreach_*`` nodes split per element (getitem
    users read the element's result); the number of nodes split."""
    graph = fx.Graph()
    env: dict = {}
    emit = _Emitter(graph)
    count = 0
    linked = _linked(gm)
    for n in gm.graph.nodes:
        if n in linked:
            name = _parse(n)[0]
            args = [fx.node.map_arg(a, lambda x: env[x]) for a in n.args]
            kwargs = {k: fx.node.map_arg(v, lambda x: env[x]) for k, v in n.kwargs.items()}
            try:
                elems = [_element(emit, name, args, i, kwargs) for i in range(len(args[0]))]
            except Exception:  # noqa: BLE001 - an element the fake op rejects: the list stays one op
                elems = [None]
            if all(e is not None for e in elems):
                env[n] = elems
                count += 1
                continue
        if n.op == "call_function" and n.target is operator.getitem and isinstance(env.get(n.args[0]), list):
            env[n] = env[n.args[0]][n.args[1]]
            continue
        env[n] = graph.node_copy(n, lambda x: env[x])
    if not count:
        return gm, 0
    graph.eliminate_dead_code()
    return fx.GraphModule(gm, graph), count


def reinplace(gm: fx.GraphModule) -> tuple[fx.GraphModule, int]:
    """A functional list op whose every result is only copied back into the input it came from
    (AOTAutograd's form of ``torch._foreach_add_(steps, 1)``: ``_foreach_add`` then one ``copy_``
    per element) as the in-place list op, without the copies; readers of a result read the
    updated input. Only when nothing else reads those inputs, the inputs are graph inputs and the
    results' readers are list ops (never part of a fused group): the lowered graph keeps the order
    of such nodes, so every reader still runs after the update although no value links them.
    Returns (a new graph, or ``gm`` when nothing changes; list ops changed)."""
    found = [(n, c) for n in gm.graph.nodes if (c := _inplace_candidate(n)) is not None]
    if not found:
        return gm, 0
    graph = fx.Graph()
    env: dict = {}     # node of gm -> its copy
    graph.output(graph.graph_copy(gm.graph, env))
    for n, (op, items, copies) in found:
        new = env[n]
        for i, g in items.items():
            graph.erase_node(env[copies[i]])
            env[g].replace_all_uses_with(new.args[0][i])
            graph.erase_node(env[g])
        new.target = op
        new.meta["val"] = None
    graph.lint()
    return fx.GraphModule(gm, graph), len(found)


def _inplace_candidate(n: fx.Node):
    """(the in-place list op, its getitem nodes, their copy_ nodes) when ``reinplace`` applies to
    ``n``, else None."""
    p = _parse(n)
    if p is None or not n.args or not isinstance(n.args[0], (list, tuple)):
        return None
    inputs = list(n.args[0])
    packet = getattr(aten, f"_foreach_{p[0]}_", None)
    op = getattr(packet, p[1], None) if packet is not None and p[1] in packet.overloads() else None
    if op is None or len(set(inputs)) != len(inputs) or not all(isinstance(x, fx.Node) for x in inputs):
        return None
    items, copies = {}, {}
    for u in n.users:
        if u.target is not operator.getitem or u.args[1] in items:
            return None
        items[u.args[1]] = u
        c = [w for w in u.users if w.target is aten.copy_.default and w.args[0] is inputs[u.args[1]]
             and w.args[1] is u]
        if len(c) != 1 or c[0].users:
            return None
        copies[u.args[1]] = c[0]
    if len(copies) != len(inputs):
        return None
    if any(set(x.users) != {n, copies[i]} or x.op != "placeholder" for i, x in enumerate(inputs)):
        return None
    if any(_parse(r) is None for g in items.values() for r in g.users if r not in copies.values()):
        return None
    results = n.meta.get("val")
    if not results or any(not isinstance(_val(x), torch.Tensor) or r.dtype != _val(x).dtype
                          or r.shape != _val(x).shape for x, r in zip(inputs, results)):
        return None
    return op, items, copies


def _scalars(lst) -> bool:
    vals = [_val(x) if isinstance(x, fx.Node) else None for x in lst]
    return bool(vals) and all(isinstance(v, torch.Tensor) and v.dim() == 0 for v in vals) and \
        len({(v.dtype, v.device) for v in vals}) == 1


def _stacked_op(name: str, overload: str, args: list, kwargs: dict):
    """(target, args with each list replaced by its marker "L<k>", kwargs) of the single op over
    stacked vectors that computes ``_foreach_<name>.<overload>``, or None."""
    if name in BINARY and overload == "Scalar" and isinstance(args[1], (int, float)) and not kwargs:
        return BINARY[name], ["L0", args[1]], {}
    if name in BINARY and overload == "List" and set(kwargs) <= {"alpha"}:
        if name not in ("add", "sub") and kwargs:
            return None
        return BINARY[name], ["L0", "L1"], dict(kwargs)
    if name in UNARY and name != "clone" and overload == "default" and len(args) == 1 and not kwargs:
        return getattr(aten, name).default, ["L0"], {}
    if name == "pow" and overload == "ScalarAndTensor" and isinstance(args[0], (int, float)) and not kwargs:
        return aten.pow.Scalar, [args[0], "L0"], {}
    if name == "pow" and overload == "Scalar" and isinstance(args[1], (int, float)) and not kwargs:
        return aten.pow.Tensor_Scalar, ["L0", args[1]], {}
    return None


def stack_scalars(gm: fx.GraphModule) -> tuple[fx.GraphModule, int]:
    """List ops over 0-d tensors (an optimizer's step counters and bias corrections, one per
    parameter) as single ops over the stacked values: the inputs are stacked once into a vector,
    each list op becomes the same op on vectors (one kernel over n elements instead of n), and a
    value read outside these ops is the element's 0-d view (``unbind``). Returns (graph, list
    ops rewritten). Each element is computed by the same op as in the list op; on the host a
    vectorized CPU kernel may round ``pow`` differently in the last bit."""
    graph = fx.Graph()
    env: dict = {}
    vector: dict = {}     # list op -> its stacked result (in the new graph)
    stacks: dict = {}     # tuple of input nodes (new graph) -> their stack
    count = 0

    views: dict = {}      # list op -> unbind of its vector

    def get(x):
        """The new graph's value of old node ``x``; an element of a stacked list op is its
        0-d view (one ``unbind`` per vector, made when an element is first read)."""
        if x not in env:
            src = x.args[0]
            if src not in views:
                views[src] = graph.call_function(aten.unbind.int, (vector[src], 0))
                views[src].meta["val"] = list(_val(vector[src]).unbind(0))
            env[x] = graph.call_function(operator.getitem, (views[src], x.args[1]))
            env[x].meta["val"] = _val(x)
        return env[x]

    def as_vector(lst):
        """The new graph's vector holding ``lst`` (old nodes), stacking it if needed."""
        src = lst[0].args[0] if lst[0].op == "call_function" and lst[0].target is operator.getitem else None
        if (src in vector and len(lst) == len(_val(src) or ())
                and all(x.target is operator.getitem and x.args == (src, i) for i, x in enumerate(lst))):
            return vector[src]
        key = tuple(get(x) for x in lst)
        if key not in stacks:
            st = graph.call_function(aten.stack.default, (list(key),))
            st.meta["val"] = torch.stack([_val(x) for x in lst])
            stacks[key] = st
        return stacks[key]

    for n in gm.graph.nodes:
        p = _parse(n)
        lists = [a for a in n.args if isinstance(a, (list, tuple))] if p is not None else []
        plan = _stacked_op(*p, list(n.args), dict(n.kwargs)) if p is not None and lists else None
        if plan is not None and all(_scalars(a) for a in lists) and len({len(a) for a in lists}) == 1:
            target, spec, kwargs = plan
            vecs = [as_vector(a) for a in lists]
            args = tuple(vecs[int(a[1:])] if isinstance(a, str) else a for a in spec)
            v = graph.call_function(target, args, kwargs)
            v.meta["val"] = target(*fx.node.map_arg(args, _val), **kwargs)
            vector[n] = v
            count += 1
            continue
        if n.op == "call_function" and n.target is operator.getitem and n.args[0] in vector:
            continue              # made when read (get)
        env[n] = graph.node_copy(n, get)
    if not count:
        return gm, 0
    graph.eliminate_dead_code()
    return fx.GraphModule(gm, graph), count
