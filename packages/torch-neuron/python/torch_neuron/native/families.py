# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""Binders of the generated kernel families: elementwise expressions, foreach lists, data
movement, losses and backward passes; ``FAMILY_BINDERS`` also holds the indexing binders
(``indexing``) and those of convolutional nets (``spatial``), which build on the helpers here.

An elementwise row states its computation in the op table's ``expression`` column, in the
language of ``neuron_kernels.kernels.pointwise`` with argument names for operands:
``[add, self, [multiply, other, alpha]]``; ``[if, flag, a, b]`` picks ``a`` or ``b`` by a bool
argument (elu_backward's ``is_result``). The binder turns argument names into kernel operands
(tensors of at least one dimension) or immediates (numbers, wrapped numbers, 0-dim tensors),
and the result dtype comes from torch itself (the overload run on meta tensors), so type
promotion is torch's. The dtype policy (see the op table's header): engine types are fp32,
bf16, fp16, fp8 and the 32/16/8-bit integers; bool is carried as uint8 0/1; int64 is carried
as pairs of int32 words by data movement (``AsWords``), and positions a kernel finds are
written as such pairs; int64 arithmetic and every fp64 op stay on the host.
"""
from __future__ import annotations

import math

import torch

from .binders import Call, Deferred, Launch, NotCovered
from .bridge import dtype_of_code, operand_dtype

# Operand dtypes the engines compute on (loaded into fp32 tiles); bool is uint8 0/1.
_ENGINE = (torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int16, torch.int8, torch.uint8,
           torch.bool)
# Integers with more than 24 significant bits are not exact in the engines' fp32 arithmetic.
_EXACT_INT_BITS = 24


class AsWords:
    """A 64-bit operand carried as int32 (low, high) word pairs by a data-movement kernel:
    shape (..., 2 * last), bit-exact, no engine type needed."""

    def __init__(self, t):
        self.t = t

    @staticmethod
    def shape_of(t) -> tuple:
        s = tuple(t.shape)
        return s[:-1] + (2 * s[-1],) if s else (2,)


def words_if_wide(t):
    """``t`` itself, or wrapped in AsWords when its elements are 64-bit (int64, float64)."""
    return AsWords(t) if t.element_size() == 8 and not t.is_complex() else t


def isa_result(dtype: torch.dtype) -> str:
    """The element type a kernel writes a result of ``dtype`` in (bool as uint8)."""
    if dtype == torch.bool:
        return "uint8"
    if dtype not in _ENGINE:
        raise NotCovered(f"a {dtype} result: kept on the host by the dtype policy (no engine type)")
    return operand_dtype(dtype)


def _number(v):
    if isinstance(v, torch.Tensor):
        if v.dtype.is_complex:
            raise NotCovered(f"complex scalar operand ({v.dtype})")
        return Deferred(lambda: float(v.item()), 0.5)
    if isinstance(v, complex):
        raise NotCovered(f"complex scalar operand {v!r}")
    return float(v)


def _placeholder(n):
    return n.placeholder if isinstance(n, Deferred) else n


def _value(n):
    return n.read() if isinstance(n, Deferred) else n


def _check_operand(t, name):
    if t.dtype not in _ENGINE:
        raise NotCovered(f"'{name}' is {t.dtype}: kept on the host by the dtype policy (engines have fp32, bf16, "
                         "fp16 and 32/16/8-bit integer types)")
    if t.dtype == torch.int32:
        # engines compute in fp32: an int32 operand is exact only up to 2**24
        raise NotCovered(f"'{name}' is int32; engine arithmetic is fp32, exact only below 2**{_EXACT_INT_BITS}")


class _Expr:
    """An op-table expression compiled against one call: operands, immediates, the kernel's tuple."""

    def __init__(self, c: Call, expr, lists=False):
        self.c = c
        self.lists = lists
        # With no operand of at least one dimension, 0-dim tensors of engine dtypes are the
        # operands (clip_grad_norm_'s clamp of a 0-dim coefficient); else they are immediates.
        self.scalar_operands = not lists and not any(
            isinstance(v, torch.Tensor) and v.dim() > 0 for v in c.a.values())
        self.operands: list[str] = []   # argument names that are tensor operands
        self.shared: list[str] = []     # one-element tensors every list entry reads (foreach .Tensor)
        self.numbers: list = []         # immediates (float or Deferred)
        self.scalar_list: str | None = None
        self.template = self._compile(expr)

    def _compile(self, node):
        if isinstance(node, bool) or isinstance(node, (int, float)):
            return ("c", float(node))
        if isinstance(node, str):
            v = self.c.a[node]
            if v is None:
                return None
            if isinstance(v, (list, tuple)) and self.lists:
                if v and isinstance(v[0], torch.Tensor):
                    if node not in self.operands:
                        self.operands.append(node)
                    return ("x", self.operands.index(node))
                self.scalar_list = node
                return ("s",)
            if isinstance(v, torch.Tensor) and self.lists:
                if v.numel() != 1:
                    raise NotCovered(f"'{node}' is a tensor of {v.numel()} elements; foreach reads one")
                if node not in self.shared:
                    self.shared.append(node)
                return ("t", self.shared.index(node))
            if isinstance(v, torch.Tensor) and (v.dim() > 0 or self.scalar_operands and v.dtype in _ENGINE):
                if node not in self.operands:
                    self.operands.append(node)
                return ("x", self.operands.index(node))
            self.numbers.append(_number(v))
            return ("n", len(self.numbers) - 1)
        op, *args = node
        if op == "if":             # [if, flag, a, b]: a bool argument picks the expression at bind time
            flag, then, other = args
            return self._compile(then if self.c.a[flag] else other)
        kids = [self._compile(a) for a in args]
        if op == "clamp":          # [clamp, x, lo, hi]: absent bounds are skipped
            x, lo, hi = kids
            if lo is None and hi is None:
                raise NotCovered("clamp without min or max")
            if lo is not None:
                x = ("maximum", x, lo)
            return ("minimum", x, hi) if hi is not None else x
        if any(k is None for k in kids):
            raise NotCovered(f"an optional argument of {op} is None")
        return (op, *kids)

    def resolved(self, running: bool):
        nums = [_value(n) if running else _placeholder(n) for n in self.numbers]

        def sub(n):
            if n[0] == "n":
                return ("c", float(nums[n[1]]))
            if n[0] in ("x", "t", "s", "c"):
                return n
            return (n[0], *(sub(k) for k in n[1:]))
        return sub(self.template)

    def deferred(self):
        return Deferred(lambda: self.resolved(True), self.resolved(False))


def _meta(v):
    if isinstance(v, torch.Tensor):
        return torch.empty(v.shape, dtype=v.dtype, device="meta")
    if isinstance(v, (list, tuple)) and v and isinstance(v[0], torch.Tensor):
        return [_meta(t) for t in v]
    return v


def result_dtype(c: Call, op: str):
    """The dtype torch gives the op's first result for these arguments (the overload on meta tensors)."""
    base, _, overload = op[len("aten::"):].partition(".")
    fn = getattr(getattr(torch.ops.aten, base), overload or "default")
    args = {k: _meta(v) for k, v in c.a.items()}
    sch = fn._schema
    pos = [args[a.name] for a in sch.arguments if not a.kwarg_only]
    kw = {a.name: args[a.name] for a in sch.arguments if a.kwarg_only}
    try:
        r = fn(*pos, **kw)
    except Exception as e:  # noqa: BLE001 - torch rejects the arguments: the host reports it
        raise NotCovered(f"on meta tensors: {type(e).__name__}: {e}") from None
    r = r[0] if isinstance(r, (list, tuple)) and r else r
    if isinstance(r, (list, tuple)):
        r = r[0] if r else None
    if not isinstance(r, torch.Tensor):
        raise NotCovered("no tensor result")
    return r.dtype


def _pointwise(c: Call):
    """Elementwise ops from the row's expression; results in torch's promoted dtype."""
    e = _Expr(c, c.entry.columns["expression"])
    if not e.operands:
        raise NotCovered("no tensor operand (all numbers)")
    ts = []
    for name in e.operands:
        t = c[name]
        _check_operand(t, name)
        ts.append(t)
    try:
        torch.broadcast_shapes(*(t.shape for t in ts))
    except RuntimeError as err:
        raise NotCovered(str(err)) from None
    out = result_dtype(c, c.op)
    return [c.launch(ts, {"expr": e.deferred(), "out_dtype": isa_result(out)})]


def _is_inplace(op: str) -> bool:
    return op.partition(".")[0].endswith("_")


def _foreach_targets(c: Call, n: int):
    if _is_inplace(c.op):
        return tuple(c.live["self"]) if c.live is not None else (None,) * n
    if c.results is None:
        return (None,) * n
    r = c.results[0]
    return tuple(r) if isinstance(r, (list, tuple)) else (None,) * n


def _broadcasts_to(shape, target) -> bool:
    """Whether an operand of ``shape`` broadcasts to ``target`` (a 0-d step size, a row)."""
    try:
        return tuple(torch.broadcast_shapes(shape, target)) == tuple(target)
    except RuntimeError:
        return False


def _foreach(c: Call):
    """A foreach list as one launch of the row's expression per list entry."""
    e = _Expr(c, c.entry.columns["expression"], lists=True)
    lists = [list(c[n]) for n in e.operands]
    n = len(lists[0])
    if any(len(ls) != n for ls in lists):
        raise NotCovered("tensor lists of different lengths")
    if e.scalar_list is not None and len(c[e.scalar_list]) != n:
        raise NotCovered("a scalar list of another length than the tensor lists")
    dtype = None
    tensors = []
    for name in e.shared:
        t = c[name]
        _check_operand(t, name)
        tensors.append(t)
    for i in range(n):
        group = [ls[i] for ls in lists]
        for name, t in zip(e.operands, group):
            if not isinstance(t, torch.Tensor):
                raise NotCovered(f"{name}[{i}] is not a tensor")
            _check_operand(t, f"{name}[{i}]")
            if t.shape != group[0].shape and not _broadcasts_to(t.shape, group[0].shape):
                raise NotCovered(f"{name}[{i}] has shape {tuple(t.shape)}, {e.operands[0]}[{i}] {tuple(group[0].shape)}"
                                 " (each entry's operands must broadcast to its first operand's shape)")
            if t.numel() == 0:
                raise NotCovered(f"{name}[{i}] is empty")
        if dtype is None:
            dtype = group[0].dtype
        elif group[0].dtype != dtype:
            raise NotCovered("list entries of different dtypes (one launch writes one dtype)")
        tensors.extend(group)
    scalars = tuple(float(v) for v in c[e.scalar_list]) if e.scalar_list is not None else ()
    attrs = {"expr": e.deferred(), "arity": len(e.operands), "shared": len(e.shared),
             "scalars": Deferred(lambda: scalars, tuple(0.5 for _ in scalars)),
             "out_dtype": isa_result(dtype)}
    return [Launch(tuple(tensors), attrs, _foreach_targets(c, n))]


def _foreach_copy(c: Call):
    """``self[i].copy_(src[i])`` for a whole list as one launch: each source entry read, converted
    to its destination's dtype and written into it (FSDP2's all-gather copy-in)."""
    dst, src = list(c["self"]), list(c["src"])
    if len(dst) != len(src):
        raise NotCovered("self and src lists of different lengths")
    for i, (d, s) in enumerate(zip(dst, src)):
        if not isinstance(s, torch.Tensor) or s.device != d.device:
            raise NotCovered(f"src[{i}] is not a tensor on {d.device} (a copy between devices)")
        _check_operand(s, f"src[{i}]")
        _check_operand(d, f"self[{i}]")
        if s.shape != d.shape:
            raise NotCovered(f"src[{i}] has shape {tuple(s.shape)}, self[{i}] {tuple(d.shape)} (a broadcasting copy)")
        if s.numel() == 0:
            raise NotCovered(f"src[{i}] is empty")
        if d.dtype != dst[0].dtype:
            raise NotCovered("destinations of different dtypes (one launch writes one dtype)")
        if s.dtype != src[0].dtype:
            raise NotCovered("sources of different dtypes (one launch reads one dtype)")
    attrs = {"expr": ("x", 0), "arity": 1, "shared": 0, "scalars": (), "out_dtype": isa_result(dst[0].dtype)}
    return [Launch(tuple(src), attrs, _foreach_targets(c, len(dst)))]


def _foreach_norm(c: Call):
    ts = list(c["self"])
    if c.a.get("dtype") is not None:
        raise NotCovered("dtype= (a conversion of the norms)")
    order = float(c["ord"])
    if order not in (1.0, 2.0, math.inf):
        raise NotCovered(f"ord={order}; the kernel covers 1, 2 and inf")
    for i, t in enumerate(ts):
        _check_operand(t, f"self[{i}]")
        if t.numel() == 0 or t.dtype != ts[0].dtype:
            raise NotCovered(f"self[{i}] is empty or of another dtype")
    return [Launch(tuple(ts), {"ord": order, "out_dtype": isa_result(ts[0].dtype)},
                   _foreach_targets(c, len(ts)))]


def _vector_norm(c: Call):
    x = c["self"]
    _check_operand(x, "self")
    if x.dim() == 0:
        raise NotCovered("0-dim input")
    if c["dtype"] is not None:
        raise NotCovered("dtype= (a conversion)")
    order = float(c["ord"])
    if order not in (1.0, 2.0, math.inf):
        raise NotCovered(f"ord={order}; the kernels cover 1, 2 and inf")
    dims = sorted({d % x.dim() for d in c["dim"]}) if c["dim"] is not None else list(range(x.dim()))
    if dims != list(range(x.dim())):      # some dims: one norm per kept element, a row each
        return [c.launch((x,), {"ord": order, "dims": tuple(dims), "keepdim": bool(c["keepdim"]),
                                "out_dtype": isa_result(x.dtype)}, adapter="row_norms")]
    shape = (1,) * x.dim() if c["keepdim"] else ()
    return [c.launch((x,), {"ord": order, "out_dtype": isa_result(x.dtype), "out_shape": shape})]


# -- data movement --------------------------------------------------------------------------------
def _same_dtype(c, ts, name):
    for i, t in enumerate(ts):
        if t.dtype != c.torch_dtype:
            raise NotCovered(f"{name}[{i}] is {t.dtype}, {name}[0] {c.torch_dtype}: cat with type promotion")
        if t.dtype.is_complex:
            raise NotCovered("complex tensors")


def _bind_cat(c: Call):
    ts = [t for t in c["tensors"]]
    _same_dtype(c, ts, "tensors")
    ts = [t for t in ts if t.numel()]    # empty parts (legacy 1-D ones, an empty cache) add nothing
    if not ts or any(t.dim() == 0 for t in ts):
        raise NotCovered("0-dim or no parts")
    d = int(c["dim"]) % ts[0].dim()
    if any(t.dim() != ts[0].dim() or t.shape[:d] != ts[0].shape[:d] or t.shape[d + 1:] != ts[0].shape[d + 1:]
           for t in ts):
        raise NotCovered("parts whose other dims differ")
    return [c.launch([words_if_wide(t) for t in ts], {"dim": d})]


# int32 words a memset writes exactly (its value passes through fp32).
_EXACT_WORD = 2 ** 24


def _fill_words(value, dtype) -> dict:
    """The int32 (low, high) words of a 64-bit fill, as the fill kernel's value/high attributes."""
    if dtype == torch.float64:
        if isinstance(value, Deferred) or float(value) != 0.0:
            raise NotCovered("a float64 fill other than 0.0 (float64 is carried as words only)")
        return {"value": 0.0}
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise NotCovered(f"an int64 fill of {value!r} known only at run time or not an integer")
    low = (value & 0xFFFFFFFF) - ((value & 0x80000000) << 1)
    high = value >> 32
    if abs(low) > _EXACT_WORD or abs(high) > _EXACT_WORD:
        raise NotCovered(f"an int64 fill of {value}: its 32-bit words ({low}, {high}) exceed 2**24, "
                         "which the engines' fp32 memset writes exactly")
    return {"value": float(low)} if high == low else {"value": float(low), "high": float(high)}


def _bind_fill(c: Call):
    t = c["self"]
    v = c.a.get("value", 0)
    if isinstance(v, torch.Tensor):
        if v.dim() != 0:
            raise NotCovered("a fill value tensor of at least one dimension")
        v = _number(v)
    elif isinstance(v, complex) or t.dtype.is_complex:
        raise NotCovered("complex fill")
    target = c.ret(0)
    if t.element_size() == 8:
        return [Launch((), {"shape": AsWords.shape_of(t), **_fill_words(v, t.dtype), "out_dtype": "int32"},
                       (target,))]
    attrs = {"value": v if isinstance(v, Deferred) else float(v), "out_dtype": isa_result(t.dtype)}
    n = t.numel()
    if n % 128 and n > 128 * 128 and t.is_contiguous():
        # A ragged count has no 128-row view: the body fills all 128 partitions, the tail is one
        # short row (a single-row view would store the whole tensor from one partition).
        body = n - n % 128
        flat = target.view(-1) if target is not None else None
        return [Launch((), {"shape": (body,), **attrs}, (None if flat is None else flat[:body],)),
                Launch((), {"shape": (n - body,), **attrs}, (None if flat is None else flat[body:],))]
    return [Launch((), {"shape": tuple(t.shape), **attrs}, (target,))]


def _bind_arange(c: Call):
    start, end, step = (float(c[k]) for k in ("start", "end", "step"))
    out = c["out"]
    if step == 0:
        raise NotCovered("step 0")
    n = max(0, math.ceil((end - start) / step)) if math.isfinite((end - start) / step) else -1
    if n == 0:
        raise NotCovered("an empty range")
    if n < 0 or n * out.element_size() > torch.neuron.get_device_properties().total_memory:
        # torch sizes out= (and rejects a range too large for any tensor) in the kernel this launch
        # stands for; a launch of that size is never scheduled
        raise NotCovered(f"a range of {n} elements does not fit the device's memory")
    target = c.live["out"] if c.live is not None else None
    if out.dtype == torch.int64:
        lo, hi = min(start, start + step * (n - 1)), max(start, start + step * (n - 1))
        if lo < 0 or hi >= 2 ** 31 or start != int(start) or step != int(step):
            raise NotCovered("int64 values outside [0, 2**31) or fractional: the high words would not be 0")
        return [Launch((), {"n": n, "start": start, "step": step, "words": True, "out_dtype": "int32"}, (target,))]
    if out.dtype in (torch.int32, torch.int16, torch.int8, torch.uint8):
        if max(abs(start), abs(start + step * (n - 1))) >= 2 ** _EXACT_INT_BITS:
            raise NotCovered("integer values beyond 2**24")
    elif out.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise NotCovered(f"a {out.dtype} range")
    return [Launch((), {"n": n, "start": start, "step": step, "out_dtype": isa_result(out.dtype)}, (target,))]


def _bind_triangle(c: Call):
    x = c.tensor("self")
    _check_operand(x, "self")
    if x.dim() < 2:
        raise NotCovered(f"'self' is {x.dim()}-D; tril/triu take matrices")
    if x.numel() == 0:
        raise NotCovered("'self' is empty")
    return [c.launch((x,), {"diagonal": int(c["diagonal"]), "upper": c.kind.startswith("triu")})]


def _index(c, name="index", like=None, value=None):
    """The integer index tensor argument ``name`` (or ``value``, an entry of a list argument),
    on the device of ``like`` when given (another device's index is copied by the host path)."""
    idx = c[name] if value is None else value
    if not isinstance(idx, torch.Tensor) or idx.dtype not in (torch.int64, torch.int32):
        raise NotCovered(f"'{name}' is not an int64/int32 tensor"
                         + (f" (a {idx.dtype} mask: the result's size depends on its values)"
                            if isinstance(idx, torch.Tensor) and idx.dtype == torch.bool else ""))
    if like is not None and idx.device != like.device:
        raise NotCovered(f"an index tensor on {idx.device} (copied to {like.device} by the host path)")
    return idx


def _bind_index_select(c: Call):
    w = c.tensor("self", 2)
    if int(c["dim"]) % 2 != 0:
        raise NotCovered(f"dim={c['dim']}; the kernel gathers rows (dim 0) of a 2-D tensor")
    idx = _index(c)
    if idx.dim() != 1:
        raise NotCovered("a 0-dim index")
    return [c.launch((w, idx))]


def _glu_halves(c: Call, x):
    d = int(c["dim"]) % max(x.dim(), 1)
    n = x.shape[d] // 2
    if x.dim() == 0 or x.shape[d] % 2:
        raise NotCovered(f"dim {c['dim']} of size {x.shape[d] if x.dim() else 0} does not split in halves")
    return d, n, x.narrow(d, 0, n), x.narrow(d, n, n)


_SIG = ("sigmoid", ("x", 1))


def _bind_glu(c: Call):
    """a * sigmoid(b) for the halves a, b of self along dim (strided views the DMA reads)."""
    x = c.tensor("self")
    _, _, a, b = _glu_halves(c, x)
    return [c.launch((a, b), {"expr": ("multiply", ("x", 0), _SIG), "out_dtype": isa_result(x.dtype)})]


def _bind_glu_backward(c: Call):
    """The two halves of grad_input, each a launch writing its half: g sigmoid(b), and
    g a sigmoid(b) (1 - sigmoid(b))."""
    g, x = c.tensor("grad_output"), c.tensor("self")
    d, n, a, b = _glu_halves(c, x)
    if tuple(g.shape) != tuple(a.shape):
        raise NotCovered(f"grad_output {tuple(g.shape)} is not half of self {tuple(x.shape)}")
    r = c.ret(0)
    sig = ("sigmoid", ("x", 2))
    grad_a = ("multiply", ("x", 0), sig)
    grad_b = ("multiply", ("multiply", ("x", 0), ("x", 1)), ("multiply", sig, ("subtract", ("c", 1.0), sig)))
    attrs = {"out_dtype": isa_result(x.dtype)}
    return [c.launch((g, a, b), dict(attrs, expr=grad_a), targets=(None if r is None else r.narrow(d, 0, n),)),
            c.launch((g, a, b), dict(attrs, expr=grad_b), targets=(None if r is None else r.narrow(d, n, n),))]


# -- losses and backward passes -------------------------------------------------------------------
_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _reduction(c):
    r = _REDUCTIONS.get(int(c["reduction"]))
    if r is None:
        raise NotCovered(f"reduction={c['reduction']}")
    return r


def _bind_nll_loss(c: Call):
    if c["weight"] is not None:
        raise NotCovered("class weights; the kernel computes unweighted nll_loss")
    x = c.tensor("self", (1, 2))
    t = c.tensor("target", (0, 1), dtype=(torch.int64, torch.int32)) if c["target"].dim() else None
    if t is None:
        raise NotCovered("0-dim target")
    return [c.launch((x, t), {"reduction": _reduction(c), "ignore_index": int(c["ignore_index"])}, targets=(0, 1))]


def _bind_nll_loss_backward(c: Call):
    if c["weight"] is not None:
        raise NotCovered("class weights; the kernel computes unweighted nll_loss")
    reduction = _reduction(c)
    g = c["grad_output"]
    x = c.tensor("self", (1, 2))
    t = c.tensor("target", 1, dtype=(torch.int64, torch.int32))
    tw = c["total_weight"]
    for name, v in (("grad_output", g), ("total_weight", tw)):
        if not isinstance(v, torch.Tensor) or v.dtype != x.dtype:
            raise NotCovered(f"'{name}' is not a {x.dtype} tensor")
    if reduction == "none" and x.dim() == 1:
        raise NotCovered("reduction none of a single sample")
    return [c.launch((g, x, t, tw), {"reduction": reduction, "ignore_index": int(c["ignore_index"])})]


def _bind_softmax_backward(c: Call):
    g, y = c.tensor("grad_output"), c.tensor("output")
    if g.shape != y.shape:
        raise NotCovered("grad_output and output differ in shape")
    want = c["input_dtype"]
    if isinstance(want, int):
        want = dtype_of_code(want)
    if want != c.torch_dtype:
        raise NotCovered(f"input_dtype={want} (a conversion)")
    return [c.launch((g, y), {"dim": int(c["dim"])})]


def _bind_embedding_backward(c: Call):
    if c["scale_grad_by_freq"]:
        raise NotCovered("scale_grad_by_freq=True")
    g = c.tensor("grad_output")
    idx = _index(c, "indices")
    if g.dim() != idx.dim() + 1 or tuple(g.shape[:-1]) != tuple(idx.shape):
        raise NotCovered("grad_output is not (*indices.shape, embedding_dim)")
    return [c.launch((g, idx), {"num_weights": int(c["num_weights"]), "padding_idx": int(c["padding_idx"])})]


FAMILY_BINDERS = {
    "pointwise": _pointwise,
    "foreach": _foreach,
    "foreach_norm": _foreach_norm,
    "foreach_copy": _foreach_copy,
    "vector_norm": _vector_norm,
    "cat": _bind_cat,
    "fill": _bind_fill,
    "triangle": _bind_triangle,
    "arange": _bind_arange,
    "index_select": _bind_index_select,
    "glu": _bind_glu,
    "glu_backward": _bind_glu_backward,
    "nll_loss": _bind_nll_loss,
    "nll_loss_backward": _bind_nll_loss_backward,
    "softmax_backward": _bind_softmax_backward,
    "embedding_backward": _bind_embedding_backward,
}

from .indexing import INDEXING_BINDERS  # noqa: E402
from .spatial import SPATIAL_BINDERS  # noqa: E402

FAMILY_BINDERS.update(INDEXING_BINDERS)
FAMILY_BINDERS.update(SPATIAL_BINDERS)
