# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""Finding fusable chains in an ATen FX graph and describing each as a ``neuron_kernels.fusion.Chain``.

A chain is a convex set of pointwise, last-dimension-reduction and view nodes, optionally
started by a mm/addmm (the matmul is the chain's step 0, the rest its epilogue), over one
[rows, cols] iteration space (rows: the product of the leading dimensions, cols: the last).
Layer norm and its backward join as whole nodes (``NORMS``): their results are read through
``getitem`` nodes, and the chain expands them into row reductions and pointwise steps, so the
host reference runs them as the one ATen op eager runs.
Node by node in graph order, a fusable node joins the chain of one of its producers when its
operands relate to that space as full, per-row (col), per-column (row) or scalar values and no
path leaves the chain and comes back (convexity); otherwise it starts a chain.
"""
from __future__ import annotations

import dataclasses
import math
import operator

import torch
import torch.fx as fx

aten = torch.ops.aten
prims = torch.ops.prims

FLOAT_DTYPES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}

# ATen overload -> fused op; binary ops take (self, other), unary ops (self,).
BINARY = {
    aten.add.Tensor: "add", aten.add.Scalar: "add", aten.sub.Tensor: "subtract", aten.sub.Scalar: "subtract",
    aten.mul.Tensor: "multiply", aten.mul.Scalar: "multiply", aten.div.Tensor: "divide",
    aten.div.Scalar: "divide", aten.maximum.default: "maximum", aten.minimum.default: "minimum",
    aten.pow.Tensor_Scalar: "power",
}
UNARY = {
    aten.exp.default: "exp", aten.log.default: "log", aten.tanh.default: "tanh", aten.sigmoid.default: "sigmoid",
    aten.relu.default: "relu", aten.sqrt.default: "sqrt", aten.rsqrt.default: "rsqrt", aten.neg.default: "negative",
    aten.reciprocal.default: "reciprocal", aten.abs.default: "abs", aten.erf.default: "erf",
    aten.sin.default: "sin", aten.cos.default: "cos", aten.sign.default: "sign", aten.clone.default: "copy",
}
REDUCTION = {aten.sum.dim_IntList: "sum", aten.amax.default: "max", aten.amin.default: "min",
             aten.mean.dim: "mean"}
VIEWS = {aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.unsqueeze.default,
         aten.squeeze.dim, aten.squeeze.dims, aten.expand.default, aten.alias.default}
# Matmuls that start a chain (step 0 on TensorE, the chain's pointwise ops as its epilogue).
MATMULS = {aten.mm.default, aten.addmm.default}
# Several results each (read through operator.getitem): one node, expanded into steps in the chain.
NORMS = {aten.native_layer_norm.default, aten.native_layer_norm_backward.default}
COMPOSITE = {aten.gelu.default, aten.gelu_backward.default, aten.threshold_backward.default, aten.tanh_backward.default, aten.sigmoid_backward.default,
             aten.rsub.Scalar, prims.convert_element_type.default, aten._to_copy.default,
             # per-element optimizer ops (``foreach``): several steps each
             aten.addcmul.default, aten.addcdiv.default, aten.lerp.Scalar}
MULTI_STEP = {aten.gelu_backward.default, aten.addcmul.default, aten.addcdiv.default, aten.lerp.Scalar}


def is_candidate(node: fx.Node) -> bool:
    t = node.target
    return node.op == "call_function" and (t in BINARY or t in UNARY or t in REDUCTION or t in VIEWS
                                           or t in COMPOSITE or t in MATMULS or t in NORMS
                                           or t is operator.getitem)


def matmul_space(node: fx.Node) -> tuple[int, int, int] | None:
    """(rows, cols, contract) of a mm/addmm that can start a chain, else None."""
    if node.op != "call_function" or node.target not in MATMULS or not _dtype_ok(node):
        return None
    if node.target is aten.addmm.default:
        if node.kwargs.get("beta", 1) != 1 or node.kwargs.get("alpha", 1) != 1 or len(node.args) > 3:
            return None
        lhs, rhs = node.args[1], node.args[2]
    else:
        lhs, rhs = node.args[0], node.args[1]
    vals = [_val(lhs), _val(rhs)]
    if not all(isinstance(v, torch.Tensor) and v.dim() == 2 and v.dtype in FLOAT_DTYPES for v in vals):
        return None
    (m, k), (_, n) = _shape(lhs), _shape(rhs)
    if m < 1 or n < 2 or k < 1:
        return None
    return m, n, k


def _val(x):
    return x.meta.get("val") if isinstance(x, fx.Node) else x


def writes_operand(target) -> bool:
    """An ATen op that writes one of its operands (an in-place or out= form)."""
    return isinstance(target, torch._ops.OpOverload) and any(
        a.alias_info is not None and a.alias_info.is_write for a in target._schema.arguments)


def _shape(x) -> tuple:
    return tuple(int(s) for s in _val(x).shape)


@dataclasses.dataclass
class Group:
    """A chain being grown: its nodes in graph order and its iteration space."""
    gid: int
    rows: int
    cols: int
    nodes: list = dataclasses.field(default_factory=list)
    contract: int = 0   # K of the matmul that starts the chain (0: none)

    def layout(self, shape) -> str | None:
        n = math.prod(shape)
        if shape and shape[-1] == self.cols and n == self.rows * self.cols:
            return "full"
        if n == self.rows:
            return "col"
        if shape and shape[-1] == self.cols and n == self.cols:
            return "row"    # a sum over the rows (a bias or norm-weight gradient)
        return None

    def operand_layout(self, shape, out_shape) -> str | None:
        """How a tensor operand of ``shape`` broadcasts against a result of ``out_shape``."""
        padded = (1,) * (len(out_shape) - len(shape)) + tuple(shape)
        if len(padded) != len(out_shape):
            return None
        if padded == tuple(out_shape):
            return self.layout(shape)
        if all(p == 1 for p in padded):
            return "scalar"
        if self.layout(out_shape) == "full" and padded[:-1] == tuple(out_shape[:-1]) and padded[-1] == 1:
            return "col"
        if self.layout(out_shape) == "full" and all(p == 1 for p in padded[:-1]) and padded[-1] == self.cols:
            return "row"
        return None


def _tensor_args(node: fx.Node) -> list:
    return [a for a in node.args if isinstance(a, fx.Node)]


def _dtype_ok(node: fx.Node) -> bool:
    v = _val(node)
    return isinstance(v, torch.Tensor) and v.dtype in FLOAT_DTYPES and not v.is_complex()


def sums_rows(node: fx.Node) -> bool:
    """A sum over every dimension but the last (the chain's rows), as bias and norm-weight
    gradients are: a ``sum_rows`` step, whose result no later step of the chain may read."""
    if node.target is not aten.sum.dim_IntList or node.kwargs.get("dtype") is not None:
        return False
    x = _val(node.args[0])
    dims = node.args[1] if len(node.args) > 1 else None
    if not isinstance(x, torch.Tensor) or x.dim() < 2 or not dims:
        return False
    dims = [dims] if isinstance(dims, int) else list(dims)
    return sorted(d % x.dim() for d in dims) == list(range(x.dim() - 1))


def _norm_fits(node: fx.Node, g: Group, member) -> bool:
    """A layer norm (forward or backward) over the last dimension of a ``full`` tensor of ``g``, with
    per-column weight and bias (not chain values) and per-row statistics."""
    if node.target is aten.native_layer_norm.default:
        x, shape, weight, bias = node.args[:4]
        full, stats = [x], []
    else:
        dy, x, shape, mean, rstd, weight, bias = node.args[:7]
        full, stats = [dy, x], [mean, rstd]
    results = _val(node)
    if len(shape) != 1 or not isinstance(results, (tuple, list)) or not all(
            isinstance(v, torch.Tensor) and v.dtype in FLOAT_DTYPES for v in results if v is not None):
        return False
    out = _shape(full[0])
    for a in full:
        if _val(a).dtype not in FLOAT_DTYPES or g.layout(_shape(a)) != "full" or _shape(a) != out:
            return False
    for a in stats:
        if _val(a).dtype not in FLOAT_DTYPES or g.operand_layout(_shape(a), out) != "col":
            return False
    for a in (weight, bias):
        if a is None:
            continue
        if (not isinstance(a, fx.Node) or member(a) or _val(a).dtype not in FLOAT_DTYPES
                or g.operand_layout(_shape(a), out) != "row"):
            return False
    # The parameter gradients of the backward are sums over the rows.
    return node.target is aten.native_layer_norm.default or g.rows > 1


def fits(node: fx.Node, g: Group, member) -> bool:
    """Whether ``node`` can be computed inside ``g`` (``member(x)``: x is already in g)."""
    t = node.target
    if t in NORMS:
        return _norm_fits(node, g, member)
    if t is operator.getitem:
        src = node.args[0]
        return (isinstance(src, fx.Node) and src.target in NORMS and member(src) and _dtype_ok(node)
                and g.layout(_shape(node)) in ("full", "col", "row"))
    if not _dtype_ok(node):
        return False
    if t in MATMULS:   # only as a chain's first node (find_groups), never joining one
        return False
    out = _shape(node)
    if sums_rows(node):
        src = node.args[0]
        return (_val(src).dtype in FLOAT_DTYPES and g.layout(_shape(src)) == "full" and g.rows > 1
                and g.layout(out) == "row")
    if g.layout(out) in (None, "row"):   # a row result only comes from sums_rows: stored, never read
        return False
    if t in VIEWS:
        src = node.args[0]
        if not member(src) or not isinstance(_val(src), torch.Tensor):
            return False
        if t is aten.expand.default:
            return g.layout(_shape(src)) == "col" or g.layout(_shape(src)) == g.layout(out)
        return g.layout(_shape(src)) == g.layout(out)
    if t in REDUCTION:
        src = node.args[0]
        dims = node.args[1] if len(node.args) > 1 else None
        x = _val(src)
        if not isinstance(x, torch.Tensor) or x.dtype not in FLOAT_DTYPES or node.kwargs.get("dtype") is not None:
            return False
        dims = [dims] if isinstance(dims, int) else list(dims or [])
        if [d % x.dim() for d in dims] != [x.dim() - 1] or g.layout(_shape(src)) != "full":
            return False
        return g.layout(out) == "col"
    if t in (prims.convert_element_type.default,):
        return g.layout(_shape(node.args[0])) == g.layout(out)
    if t is aten._to_copy.default:
        extra = {k for k, v in node.kwargs.items() if v is not None} - {"dtype"}
        return not extra and g.layout(_shape(node.args[0])) == g.layout(out)
    if t in (aten.add.Tensor, aten.sub.Tensor, aten.add.Scalar, aten.sub.Scalar) and node.kwargs.get("alpha", 1) != 1:
        return False
    if t is aten.div.Tensor and node.kwargs.get("rounding_mode") is not None:
        return False
    if t is aten.threshold_backward.default and not isinstance(node.args[2], (int, float)):
        return False
    layouts = []
    for a in node.args:
        if isinstance(a, fx.Node):
            v = _val(a)
            if not isinstance(v, torch.Tensor) or v.dtype not in FLOAT_DTYPES:
                return False
            lay = g.operand_layout(_shape(a), out)
            if lay is None or (member(a) and lay in ("row", "scalar")):
                return False
            layouts.append(lay)
        elif t is aten.gelu.default and a in ("none", "tanh"):
            continue
        elif not isinstance(a, (int, float)) or isinstance(a, bool):
            return False
    if not layouts:
        return False
    want = "full" if any(x in ("full", "row") for x in layouts) else "col"
    return want == g.layout(out)


def space_of(node: fx.Node) -> tuple[int, int] | None:
    """The iteration space a chain started at ``node`` would have."""
    src = node.args[0] if node.target in REDUCTION or node.target in NORMS else node
    v = _val(src)
    if not isinstance(v, torch.Tensor) or v.dim() == 0:
        return None
    shape = _shape(src)
    cols = shape[-1]
    rows = math.prod(shape[:-1])
    if cols < 2 or rows < 1:
        return None
    return rows, cols


def find_groups(gm: fx.GraphModule, min_chain: int) -> list[Group]:
    """Maximal convex chains, in graph order (only those with at least ``min_chain`` compute nodes).

    A node whose operands come from several chains of one iteration space merges them when no
    path between them leaves the chains (siblings reading one tensor end up in one kernel)."""
    group_of: dict[fx.Node, int] = {}
    ancestors: dict[fx.Node, frozenset] = {}   # groups a node (transitively) depends on, as first assigned
    groups: list[Group] = []
    parent: list[int] = []

    def find(g: int) -> int:
        while parent[g] != g:
            parent[g] = parent[parent[g]]
            g = parent[g]
        return g

    def gid_of(x):
        g = group_of.get(x)
        return None if g is None else find(g)

    def convex(gids: set, extra: fx.Node) -> bool:
        nodes = [m for g in gids for m in groups[g].nodes] + [extra]
        for m in nodes:
            for b in m.all_input_nodes:
                if gid_of(b) in gids:
                    continue
                if any(find(x) in gids for x in ancestors.get(b, ())):
                    return False
        return True

    for node in gm.graph.nodes:
        anc: set = set()
        for a in node.all_input_nodes:
            anc |= ancestors.get(a, frozenset())
            if a in group_of:
                anc.add(group_of[a])
        placed = None
        if is_candidate(node):
            cands = []
            for a in node.all_input_nodes:
                g = gid_of(a)
                if g is not None and g not in cands:
                    cands.append(g)
            options = []
            same = [g for g in cands if (groups[g].rows, groups[g].cols) == (groups[cands[0]].rows, groups[cands[0]].cols)]
            if len(same) > 1:
                options.append(set(same))
            options += [{g} for g in cands]
            for gids in options:
                g = groups[min(gids)]
                # A matmul is step 0: only the earliest group of a merge may start with one.
                if any(groups[x].contract for x in gids - {min(gids)}):
                    continue
                if convex(gids, node) and fits(node, g, lambda x, gids=gids: gid_of(x) in gids):
                    keep = min(gids)
                    for other in sorted(gids - {keep}):
                        parent[other] = keep
                        groups[keep].nodes.extend(groups[other].nodes)
                        groups[other].nodes = []
                    groups[keep].nodes.sort(key=_order(gm))
                    placed = keep
                    break
            if placed is None and node.target in MATMULS:
                mm = matmul_space(node)
                if mm is not None:
                    g = Group(len(groups), mm[0], mm[1], contract=mm[2])
                    groups.append(g)
                    parent.append(g.gid)
                    placed = g.gid
            elif placed is None and node.target not in VIEWS:
                space = space_of(node)
                if space is not None:
                    g = Group(len(groups), *space)
                    if fits(node, g, lambda x: False):
                        groups.append(g)
                        parent.append(g.gid)
                        placed = g.gid
        if placed is not None:
            group_of[node] = placed
            groups[placed].nodes.append(node)
        ancestors[node] = frozenset(anc)
    out = []
    for g in groups:
        if find(g.gid) != g.gid:
            continue
        # Trailing views add nothing inside the kernel; they are re-applied to its results.
        while g.nodes and g.nodes[-1].target in VIEWS:
            g.nodes.pop()
        compute = [n for n in g.nodes if n.target not in VIEWS and n.target is not operator.getitem]
        # GELU's backward, the optimizer's composite ops and the norms are several steps in one node.
        if len(compute) + sum(n.target in MULTI_STEP or n.target in NORMS for n in compute) >= min_chain:
            out.append(g)
    return out


def _order(gm: fx.GraphModule):
    index = {n: i for i, n in enumerate(gm.graph.nodes)}
    return index.__getitem__
