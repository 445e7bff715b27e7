# Copyright 2026 The neuron-kernels Authors. Licensed under the Apache License, Version 2.0.
"""Generated elementwise kernels: one expression over groups of same-shape 2-D operands.

An expression is a nested tuple, hashable so it keys the trace cache:
  ("x", i)          operand i of the group (loaded, computed in fp32)
  ("t", i)          shared tensor i: a one-element tensor read once into every partition
  ("s",)            the group's entry of the ``scalars`` list (foreach ScalarList forms)
  ("c", v)          the number v
  (op, a, b)        a VectorE binary op (add, subtract, multiply, divide, maximum, minimum,
                    power, greater, ..., logical_and, logical_or)
  ("where", p, a, b) a VectorE select: a where p != 0, else b
  (func, a)         a ScalarE activation (exp, tanh, sqrt, abs, sin, ...)

``pointwise`` evaluates it once per group, so a foreach list is one launch (one fixed DMA
and launch overhead for the whole list); a plain op is a list of one group.
"""

from __future__ import annotations

from .. import language as nl
from ..language import isa as _isa
from ._tiling import FCHUNK, P, row_blocks

BINARY_OPS = frozenset(["add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "greater",
                        "greater_equal", "less", "less_equal", "equal", "not_equal", "logical_and",
                        "logical_or"])
FLOATS = ("float32", "bfloat16", "float16")


def _load(src):
    """A tile of ``src`` in fp32: integer operands are converted on VectorE (DMA casts float types only)."""
    if src.dtype in FLOATS or src.dtype.startswith("float8"):
        return nl.load(src, dtype="float32")
    return nl.copy(nl.load(src), dtype="float32")


def _load_operand(src, bufs):
    dst = nl.ndarray(src.shape, "float32", bufs=bufs)
    dst[...] = _load(src)
    return dst


def _load_shared(src, bufs):
    # its own allocation site: shared tiles live for the whole launch, operands for one block
    dst = nl.ndarray(src.shape, "float32", bufs=bufs)
    dst[...] = _load(src)
    return dst


_SCALAR_OPS = frozenset(["add", "subtract", "multiply", "divide", "maximum", "minimum"])
_COMMUTES = frozenset(["add", "multiply", "maximum", "minimum"])


def _const(n):
    return n[0] == "c" or n[0] == "s"


def _const_value(n, env):
    return env["s"] if n[0] == "s" else float(n[1])


def _tile_const(node):
    """(tile subexpression, constant) of a binary node with one constant side, in tile-op-constant form."""
    a, b = node[1], node[2]
    if _const(b) and not _const(a):
        return a, b
    if _const(a) and not _const(b) and node[0] in _COMMUTES:
        return b, a
    return None


def _plan(expr):
    """The expression as a list of instructions in dependency order, each subexpression once:
    (key, kind, func/op, operands, extra). A chain of two constant ops becomes one tensor_scalar,
    an activation of x * scale + bias one activation. Leaves are ("x", i), ("t", i), ("s",), ("c", v)."""
    steps, seen = [], set()

    def leaf(n):
        return n[0] in ("x", "t", "s", "c")

    def visit(node):
        if leaf(node) or node in seen:
            return node
        kind = node[0]
        step = None
        if kind in _SCALAR_OPS and _tile_const(node):
            inner, c1 = _tile_const(node)
            if inner[0] in _SCALAR_OPS and not leaf(inner) and _tile_const(inner):
                y, c0 = _tile_const(inner)
                step = (node, "ts", kind, (visit(y),), (inner[0], c0, c1))
        elif kind not in BINARY_OPS and kind != "where" and len(node) == 2:
            child, scale, bias = node[1], ("c", 1.0), None
            if child[0] == "add" and _tile_const(child):
                child, bias = _tile_const(child)
            if child[0] == "multiply" and _tile_const(child):
                child, scale = _tile_const(child)
            if child is not node[1]:
                step = (node, "act", kind, (visit(child),), (scale, bias))
        if step is None:
            args = tuple(visit(a) for a in node[1:])
            step = (node, "where" if kind == "where" else "tt" if kind in BINARY_OPS else "act", kind, args,
                    (("c", 1.0), None))
        seen.add(node)
        steps.append(step)
        return node

    visit(expr)
    return steps


def _run(steps, expr, env):
    """Executes a plan for one block; every intermediate gets its own slot of one allocation site."""
    vals = {}

    def val(n):
        if n[0] == "x":
            return env["x"][n[1]]
        if n[0] == "t":
            return env["t"][n[1]]
        if n[0] in ("s", "c"):
            return _const_value(n, env)
        return vals[n]

    for key, kind, op, args, extra in steps:
        xs = [val(a) for a in args]
        if not any(isinstance(x, nl.Tile) for x in xs):
            raise ValueError(f"pointwise: {op} of numbers only; fold constants before tracing")
        if kind == "ts":
            op0, c0, c1 = extra
            r = nl.ndarray(xs[0].shape, "float32", bufs=env["bufs"])
            _isa.tensor_scalar(r, xs[0], op0, _const_value(c0, env), op1=op, operand1=_const_value(c1, env))
        elif kind == "act":
            scale, bias = extra
            r = nl.activation(op, xs[0], bias=None if bias is None else _const_value(bias, env),
                              scale=_const_value(scale, env), dtype="float32")
        elif kind == "where":
            r = nl.where(*xs, dtype="float32")
        else:
            r = getattr(nl, op)(xs[0], xs[1], dtype="float32")
        dst = nl.ndarray(r.shape, "float32", bufs=env["bufs"])
        dst[...] = r
        vals[key] = dst
    return val(expr)


# Streaming chunk: an expression keeps all its intermediates of a block alive, so the chunk
# shrinks with the expression to keep them within ~96 KiB of each partition's SBUF.
def _chunk(nodes: int) -> int:
    c = 2048
    while c > 64 and 4 * c * (2 * nodes + 12) > 96 * 1024:
        c //= 2
    return c


@nl.jit
def pointwise(*args, expr=("x", 0), arity=1, shared=0, scalars=(), out_dtype="float32"):
    """Per group g: out_g = expr(args[shared + g*arity : shared + (g+1)*arity]) elementwise.

    The first ``shared`` arguments are one-element tensors every group may read; the groups'
    operands are 2-D views of one shape per group. Returns one output per group.
    """
    shared_args = args[:shared]
    ops = args[shared:]
    if arity == 0 or len(ops) % arity:
        raise ValueError(f"pointwise: {len(ops)} operands do not split into groups of {arity}")
    groups = len(ops) // arity
    if scalars and len(scalars) != groups:
        raise ValueError(f"pointwise: {len(scalars)} scalars for {groups} groups")
    outs = []
    shared_tiles = {}
    steps = _plan(expr)
    for g in range(groups):
        xs = ops[g * arity:(g + 1) * arity]
        R, C = xs[0].shape
        out = nl.ndarray((R, C), out_dtype, buffer=nl.shared_hbm)
        for r0, rs in row_blocks(R):
            if rs not in shared_tiles:
                shared_tiles[rs] = [_load_shared(t.reshape(1, 1).broadcast_partitions(rs), 2 * shared + 2)
                                    for t in shared_args]
            for c0, cs in row_blocks(C, _chunk(len(steps) + arity)):
                # two slots per value: the next block (or list entry) computes while this one drains
                env = {"x": [_load_operand(x[r0:r0 + rs, c0:c0 + cs], 2 * arity + 2) for x in xs],
                       "t": shared_tiles[rs],
                       "s": float(scalars[g]) if scalars else 0.0, "bufs": 2 * len(steps) + 2}
                v = _run(steps, expr, env)
                if not isinstance(v, nl.Tile):
                    v = nl.full((rs, cs), v, "float32")
                nl.store(out[r0:r0 + rs, c0:c0 + cs], nl.copy(v, dtype=out_dtype))
        outs.append(out)
    return tuple(outs) if len(outs) > 1 else outs[0]


def _row_norm_part(x, r0, rs, ord):
    """Per row of the block, (rs, 1): the sum of squares (ord 2), of absolute values (1) or their max (inf),
    chunk by chunk on VectorE."""
    part = None
    for c0, cs in row_blocks(x.shape[1], FCHUNK):
        t = _load(x[r0:r0 + rs, c0:c0 + cs])
        if ord == float("inf"):
            r = nl.max(nl.abs(t), axis=1)
        else:
            r = nl.sum(nl.square(t) if ord == 2.0 else nl.abs(t), axis=1)
        part = r if part is None else (nl.maximum(part, r) if ord == float("inf") else nl.add(part, r))
    return part


@nl.jit
def norms(*args, ord=2.0, out_dtype="float32"):
    """out_i = ||args[i]||_ord over all elements (ord 1, 2 or inf), each a (1, 1) tensor: a foreach norm
    list in one launch. Rows reduce on VectorE; the partitions are summed on TensorE."""
    outs = []
    ones = nl.full((P, 1), 1.0, "float32")
    for x in args:
        R, C = x.shape
        out = nl.ndarray((1, 1), out_dtype, buffer=nl.shared_hbm)
        total = nl.zeros((1, 1), "float32", buffer=nl.psum)
        acc_max = None
        for r0, rs in row_blocks(R):
            part = _row_norm_part(x, r0, rs, ord)
            if ord == float("inf"):
                # max over partitions: transpose the column onto one partition's free dimension
                m = nl.max(nl.copy(nl.transpose(part)), axis=1)
                acc_max = m if acc_max is None else nl.maximum(acc_max, m)
            else:
                _isa.nc_matmul(total, part, ones[:rs, :], accumulate=True)
        if ord == float("inf"):
            res = acc_max
        else:
            res = nl.copy(total)
            if ord == 2.0:
                res = nl.sqrt(res)
        nl.store(out, nl.copy(res, dtype=out_dtype))
        outs.append(out)
    return tuple(outs) if len(outs) > 1 else outs[0]


@nl.jit
def row_norms(x, ord=2.0, out_dtype="float32"):
    """out[r] = ||x[r, :]||_ord (ord 1, 2 or inf) for x (R, K): rows on partitions, each row reduced
    on VectorE chunk by chunk (a norm over some dims, those dims made the row)."""
    R, K = x.shape
    out = nl.ndarray((R, 1), out_dtype, buffer=nl.shared_hbm)
    for r0, rs in row_blocks(R):
        acc = _row_norm_part(x, r0, rs, ord)
        if ord == 2.0:
            acc = nl.sqrt(acc)
        nl.store(out[r0:r0 + rs, :], nl.copy(acc, dtype=out_dtype))
    return out
