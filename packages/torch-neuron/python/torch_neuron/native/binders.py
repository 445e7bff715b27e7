# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""Binding an op's ATen arguments to its kernel's adapter: the one place that decides coverage.

Each op-table row names its binder (column ``binder``). A binder reads one call's arguments by
schema name and returns the kernel launches that compute it, or raises ``NotCovered`` with the
reason; the estimator (both modes) and the executor (device-numerics mode) both bind through
``bind``, so a call counted native is always one the kernel computes.
"""
from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import torch

from .bridge import NotCovered, dtype_of_code, operand_dtype, torch_dtype


@functools.cache
def schema(op: str):
    """The schema of an ATen overload given as "aten::name.overload"."""
    base, _, overload = op.partition(".")
    return torch._C._get_schema(base, overload)


class Deferred:
    """An attribute whose value is a tensor's (a wrapped number, AdamW's step): read when
    the kernel runs; timing does not depend on it, so estimates use ``placeholder``."""

    def __init__(self, read: Callable[[], Any], placeholder: Any):
        self.read = read
        self.placeholder = placeholder


@dataclasses.dataclass
class Launch:
    tensors: tuple           # the adapter's tensor arguments (None: an absent optional)
    attrs: dict              # the adapter's attributes (values may be Deferred)
    targets: tuple           # per kernel result, the tensor it is written into (None: skip)
    entry: str | None = None  # another table entry's adapter (scalar forms), else the op's
    adapter: str | None = None  # a library adapter serving this launch instead (the generated families')


def kernel_of(ln: Launch, entry, dtype: str):
    """The op-table entry whose kernel a launch runs: the row's, another row's, or the row with
    another adapter (a mixed-dtype add runs the generated pointwise kernel)."""
    import neuron_kernels
    kernel = neuron_kernels.lookup(ln.entry, dtype) if ln.entry else entry
    if ln.adapter is not None and kernel is not None:
        kernel = dataclasses.replace(kernel, adapter=ln.adapter)
    return kernel


class Call:
    """One call of a table op: arguments by schema name, results when running."""

    def __init__(self, op: str, entry, dtype: str, args: list, results=None, live=None):
        self.entry = entry
        self.op = op
        self.kind = entry.aten[len("aten::"):].partition(".")[0]
        self.torch_dtype = torch_dtype(dtype)
        sch = schema(op)
        names = [a.name for a in sch.arguments]
        self.a = dict(zip(names, args))
        self.live = dict(zip(names, live)) if live is not None else None
        self.results = results
        outs = [a.name for a in sch.arguments if a.is_out]
        first_out = self.a.get(outs[0]) if outs else None
        if isinstance(first_out, torch.Tensor) and first_out.dtype != self.torch_dtype and \
                entry.columns.get("binder") not in FAMILY_BINDERS:   # families take torch's result dtype
            raise NotCovered(f"out= tensor '{outs[0]}' is {first_out.dtype}; the kernel writes {self.torch_dtype}")

    def __getitem__(self, name):
        return self.a[name]

    def tensor(self, name, ndim=None, dtype=None, optional=False):
        """A kernel operand: argument ``name``, a tensor of the call's dtype (or ``dtype``), >= 1-D."""
        t = self.a[name]
        if t is None and optional:
            return None
        return self.operand(t, name, ndim, dtype)

    def operand(self, t, name, ndim=None, dtype=None, scalar_ok=False):
        if not isinstance(t, torch.Tensor):
            raise NotCovered(f"argument '{name}' is not a tensor")
        want = dtype or self.torch_dtype
        if t.dtype not in (want if isinstance(want, tuple) else (want,)):
            raise NotCovered(f"'{name}' is {t.dtype}, the call's kernel dtype is {want}: "
                             "no type promotion in the kernel")
        if t.dim() == 0 and not scalar_ok:
            raise NotCovered(f"'{name}' is 0-dim; the tile kernels take tensors with at least one dimension")
        if ndim is not None and t.dim() not in (ndim if isinstance(ndim, tuple) else (ndim,)):
            raise NotCovered(f"'{name}' is {t.dim()}-D ({tuple(t.shape)}); the kernel takes {ndim}-D")
        return t

    def require(self, name, *allowed):
        v = self.a[name]
        if not any(v == x and type(v) is not complex for x in allowed):
            raise NotCovered(f"{name}={v!r}; the kernel covers {name} in {list(allowed)}")
        return v

    def ret(self, i):
        """The op's i-th result (a host tensor when running; None when timing or undefined)."""
        if self.results is None:
            return None
        r = self.results[i]
        return r if isinstance(r, torch.Tensor) else None

    def launch(self, tensors, attrs=None, targets=(0,), entry=None, adapter=None):
        return Launch(tuple(tensors), attrs or {}, tuple(self.ret(i) if isinstance(i, int) else i
                                                         for i in targets), entry, adapter)


def _scalar_of(t, transform=lambda v: v):
    """A number operand (a Python number, a wrapped number or a 0-dim tensor) as a kernel immediate."""
    if isinstance(t, torch.Tensor):
        if t.dtype.is_complex:
            raise NotCovered(f"complex scalar operand ({t.dtype})")
        return Deferred(lambda: transform(float(t.item())), transform(1.0))
    if isinstance(t, complex):
        raise NotCovered(f"complex scalar operand {t!r}")
    return Deferred(lambda: transform(float(t)), transform(1.0))


def _rank(v) -> int:
    return v.dim() if isinstance(v, torch.Tensor) else 0


def _bind_mm(c):
    return [c.launch((c.tensor("self", 2), c.tensor("mat2", 2)))]


def _bind_bmm(c):
    a, b = c.tensor("self", 3), c.tensor("mat2", 3)
    if a.shape[0] != b.shape[0]:
        raise NotCovered(f"batch sizes differ ({a.shape[0]} vs {b.shape[0]})")
    return [c.launch((a, b))]


def _bind_matmul(c):
    a, b = c.tensor("self", (2, 3)), c.tensor("other", (2, 3))
    if (a.dim(), b.dim()) == (2, 3):
        raise NotCovered("a 2-D x 3-D product; the kernel takes 2-D or 3-D left operands with 2-D or "
                         "same-batch 3-D right operands")
    if a.dim() == b.dim() == 3 and a.shape[0] != b.shape[0]:
        raise NotCovered(f"batch sizes differ ({a.shape[0]} vs {b.shape[0]})")
    return [c.launch((a, b))]


def _bind_linear(c):
    x, w = c.tensor("input"), c.tensor("weight", 2)
    b = c.tensor("bias", 1, optional=True)
    return [c.launch((x, w, b) if b is not None else (x, w))]


def _bind_addmm(c):
    c.require("beta", 1)
    c.require("alpha", 1)
    bias, x, w = c.tensor("self", (1, 2)), c.tensor("mat1", 2), c.tensor("mat2", 2)
    n = w.shape[1]
    if tuple(bias.shape) not in ((n,), (1, n)):
        raise NotCovered(f"addmm input of shape {tuple(bias.shape)}; the kernel adds a per-column "
                         f"bias of shape ({n},) or (1, {n})")
    return [c.launch((bias, x, w))]


# How a number operand is served by the scalar form's kernel (op table column scalar_form.operand).
SCALAR_OPERANDS = {
    "as_is": lambda v: v,
    "negated": lambda v: -v,
    "reciprocal": lambda v: 1.0 / v if v != 0 else float("inf"),
}


_POINTWISE_OF = {"add": "add", "sub": "subtract", "mul": "multiply", "div": "divide", "maximum": "maximum",
                 "minimum": "minimum"}


def _binary_generated(c, a, b):
    """Tensor operands of different dtypes, or add/sub with alpha != 1: the generated elementwise
    kernel, with torch's promoted result dtype (families.result_dtype)."""
    from .families import _check_operand, isa_result, result_dtype
    for name, t in (("self", a), ("other", b)):
        _check_operand(t, name)
    try:
        torch.broadcast_shapes(a.shape, b.shape)
    except RuntimeError as e:
        raise NotCovered(str(e)) from None
    op = _POINTWISE_OF[c.kind]
    alpha = c.a.get("alpha", 1)
    if isinstance(alpha, complex):
        raise NotCovered(f"complex alpha {alpha!r}")

    def expr(v):
        rhs = ("x", 1) if v == 1 else ("multiply", ("x", 1), ("c", float(v)))
        return (op, ("x", 0), rhs)
    e = Deferred(lambda: expr(alpha), expr(alpha if alpha in (0, 1) else 0.5))
    return [c.launch((a, b), {"expr": e, "out_dtype": isa_result(result_dtype(c, c.op))}, adapter="pointwise")]


def _binary(c):
    """Elementwise binary ops; a number operand runs the table's scalar form of the op."""
    a, b = c["self"], c["other"]
    if _rank(a) > 0 and _rank(b) > 0 and (a.dtype != b.dtype or c.a.get("alpha", 1) != 1):
        return _binary_generated(c, a, b)
    if "alpha" in c.a:
        c.require("alpha", 1)
    if _rank(a) == 0 or _rank(b) == 0:
        # A number (wrapped, or a 0-dim tensor): the scalar form of the kernel.
        form = c.entry.columns.get("scalar_form")
        if form is not None and _rank(a) == 0 and _rank(b) == 0 and isinstance(a, torch.Tensor):
            # 0-dim tensor op number (e.g. clip_grad_norm_'s total_norm + eps): self is the operand
            x = c.operand(a, "self", scalar_ok=True)
            return [c.launch((x,), {"other": _scalar_of(b, SCALAR_OPERANDS[form["operand"]])}, entry=form["entry"])]
        if form is None or (_rank(a) == 0 and _rank(b) == 0):
            raise NotCovered("0-dim operands; the tile kernels take tensors with at least one dimension")
        if _rank(a) == 0:
            if not form["commutes"] and c.kind == "sub" and isinstance(b, torch.Tensor):
                # number - tensor: the generated elementwise kernel of aten::rsub.Scalar
                x = c.operand(b, "other")
                expr = Deferred(lambda: ("subtract", ("c", _scalar_of(a).read()), ("x", 0)),
                                ("subtract", ("c", 0.5), ("x", 0)))
                return [c.launch((x,), {"expr": expr, "out_dtype": operand_dtype(x.dtype)}, entry="aten::rsub.Scalar")]
            if not form["commutes"]:
                raise NotCovered(f"number {c.kind} tensor; the kernel's scalar form is tensor {c.kind} number")
            a, b = b, a
        x = c.operand(a, "self" if a is c["self"] else "other")
        return [c.launch((x,), {"other": _scalar_of(b, SCALAR_OPERANDS[form["operand"]])}, entry=form["entry"])]
    a, b = c.tensor("self"), c.tensor("other")
    try:
        torch.broadcast_shapes(a.shape, b.shape)
    except RuntimeError as e:
        raise NotCovered(str(e)) from None
    return [c.launch((a, b))]


def _bind_scalar(c):
    if "alpha" in c.a:
        c.require("alpha", 1)
    other = c["other"]
    if isinstance(other, complex):
        raise NotCovered(f"complex scalar {other!r}")
    return [c.launch((c.operand(c["self"], "self", scalar_ok=True),), {"other": float(other)})]


def _bind_unary(c):
    return [c.launch((c.operand(c["self"], "self", scalar_ok=True),))]


def _bind_gelu(c):
    c.require("approximate", "none", "tanh")
    return [c.launch((c.tensor("self"),), {"approximate": c["approximate"]})]


def _bind_act_backward(c):
    attrs = {}
    if "approximate" in c.a:
        attrs["approximate"] = c.require("approximate", "none", "tanh")
    g, x = c.tensor("grad_output"), c.tensor("self")
    if g.shape != x.shape:
        raise NotCovered(f"grad_output {tuple(g.shape)} and self {tuple(x.shape)} differ in shape")
    return [c.launch((g, x), attrs)]


def _bind_reduction(c):
    """Reductions over any set of dims (absent or empty dim: all of them), keepdim or not."""
    want = c.a.get("dtype")
    if isinstance(want, int):
        want = dtype_of_code(want)
    if want is not None and want != c.torch_dtype:
        raise NotCovered(f"dtype={want} (a conversion); the kernel reduces in the input's dtype")
    x = c.operand(c["self"], "self", scalar_ok=True)
    dim = c.a.get("dim")
    dims = () if dim is None else ((dim,) if isinstance(dim, int) else tuple(dim))
    return [c.launch((x,), {"dim": dims, "keepdim": bool(c.a.get("keepdim", False))})]


def _bind_softmax(c):
    c.require("half_to_float", False)
    return [c.launch((c.tensor("self"),), {"dim": int(c["dim"])})]


def _normalized_last(c, x):
    ns = list(c["normalized_shape"])
    if ns != [x.shape[-1]]:
        raise NotCovered(f"normalized_shape={ns}; the kernel normalises over the last dimension only")
    return x.shape[-1]


def _bind_layer_norm(c):
    x = c.tensor("input")
    n = _normalized_last(c, x)
    w, b = c.tensor("weight", 1, optional=True), c.tensor("bias", 1, optional=True)
    for name, t in (("weight", w), ("bias", b)):
        if t is not None and t.shape[0] != n:
            raise NotCovered(f"{name} of shape {tuple(t.shape)} for {n} normalised elements")
    return [c.launch((x, w, b), {"eps": float(c["eps"])}, targets=(0, 1, 2))]


def _bind_layer_norm_backward(c):
    g, x = c.tensor("grad_out"), c.tensor("input")
    _normalized_last(c, x)
    stats = (torch.float32, torch.bfloat16)
    mean, rstd = c.tensor("mean", dtype=stats), c.tensor("rstd", dtype=stats)
    w = c.tensor("weight", 1, optional=True)
    if g.shape != x.shape:
        raise NotCovered(f"grad_out {tuple(g.shape)} and input {tuple(x.shape)} differ in shape")
    return [c.launch((g, x, AsFloat(mean), AsFloat(rstd), w), targets=(0, 1, 2))]


def _bind_rms_norm(c):
    x = c.tensor("input")
    _normalized_last(c, x)
    if c["eps"] is None:
        raise NotCovered("eps=None (the host picks the default epsilon); pass eps explicitly")
    w = c.tensor("weight", 1, optional=True)
    return [c.launch((x, w), {"eps": float(c["eps"])}, targets=(0, 1))]


def _bind_embedding(c):
    w = c.tensor("weight", 2)
    idx = c.tensor("indices", dtype=(torch.int64, torch.int32))
    return [c.launch((w, idx))]


def _bind_cross_entropy(c):
    if c["weight"] is not None:
        raise NotCovered("class weights; the kernel computes unweighted cross-entropy")
    c.require("label_smoothing", 0.0)
    reduction = {0: "none", 1: "mean", 2: "sum"}.get(int(c["reduction"]))
    if reduction is None:
        raise NotCovered(f"reduction={c['reduction']}; the kernel covers none (0), mean (1) and sum (2)")
    x, t = c.tensor("self", 2), c.tensor("target", 1, dtype=(torch.int64, torch.int32))
    ignore = int(c["ignore_index"])

    def check():
        if bool((t == ignore).any()):
            raise NotCovered(f"targets equal ignore_index={ignore}; the kernel has no ignored rows")
    return [c.launch((x, Checked(t, check)), {"reduction": reduction})]


def _attn_mask(c):
    """The additive attention mask operand, or () when there is none."""
    bias = c.a.get("attn_bias")
    if bias is None or isinstance(bias, torch.Tensor) and bias.numel() == 0:
        return ()
    if not isinstance(bias, torch.Tensor) or bias.dtype not in (torch.float32, torch.bfloat16):
        raise NotCovered(f"attn_mask of dtype {getattr(bias, 'dtype', type(bias).__name__)}; the kernel adds "
                         "float32/bfloat16 masks")
    return (c.operand(bias, "attn_bias", dtype=(torch.float32, torch.bfloat16)),)


def _bind_sdpa(c):
    c.require("dropout_p", 0.0)
    if "return_debug_mask" in c.a:
        c.require("return_debug_mask", False)
    q, k, v = c.tensor("query"), c.tensor("key"), c.tensor("value")
    attrs = {"is_causal": bool(c["is_causal"]), "scale": c["scale"]}
    return [c.launch((q, k, v, *_attn_mask(c)), attrs, targets=(0, 1))]


def _bind_sdpa_backward(c):
    c.require("dropout_p", 0.0)
    ts = [c.tensor(n) for n in ("grad_out", "query", "key", "value", "out")]
    lse = c.tensor("logsumexp", dtype=torch.float32)
    attrs = {"is_causal": bool(c["is_causal"]), "scale": c["scale"]}
    return [c.launch((*ts, lse, *_attn_mask(c)), attrs, targets=(0, 1, 2))]


def _bind_adamw(c):
    c.require("amsgrad", False)
    c.require("maximize", False)
    for name in ("grad_scale", "found_inf"):
        if c[name] is not None:
            raise NotCovered(f"{name} is set (AMP gradient scaling); the kernel takes unscaled gradients")
    params, grads, ms, vs, steps = (c[n] for n in ("self", "grads", "exp_avgs", "exp_avg_sqs", "state_steps"))
    if not (len(params) == len(grads) == len(ms) == len(vs) == len(steps)):
        raise NotCovered("tensor lists of different lengths")
    launches = []
    # The kernel updates one parameter tensor per launch: a list is one launch per tensor.
    for i in range(len(params)):
        ts = [c.operand(c[n][i], f"{n}[{i}]") for n in ("self", "grads", "exp_avgs", "exp_avg_sqs")]
        if any(t.shape != ts[0].shape for t in ts):
            raise NotCovered(f"parameter {i}: param, grad and moments differ in shape")
        step = steps[i]
        if not isinstance(step, torch.Tensor) or step.numel() != 1:
            raise NotCovered(f"state_steps[{i}] is not a one-element tensor")
        attrs = {"lr": float(c["lr"]), "beta1": float(c["beta1"]), "beta2": float(c["beta2"]),
                 "eps": float(c["eps"]), "weight_decay": float(c["weight_decay"]),
                 "step": Deferred(functools.partial(_step_of, step), 1)}
        targets = tuple(None if c.live is None else c.live[n][i] for n in ("self", "exp_avgs", "exp_avg_sqs"))
        launches.append(Launch(tuple(ts), attrs, targets))
    return launches


def _step_of(step: torch.Tensor) -> int:
    s = float(step.item())
    if s != int(s) or s < 1:
        raise NotCovered(f"step {s} is not a positive integer")
    return int(s)


class AsFloat:
    """An operand the kernel reads in float32 (layer-norm statistics of a bf16 call)."""

    def __init__(self, t):
        self.t = t


class Checked:
    """An operand whose values must pass ``check`` before the kernel runs."""

    def __init__(self, t, check):
        self.t = t
        self.check = check


# Keyed by the op table's binder column.
BINDERS: dict[str, Callable[[Call], list[Launch]]] = {
    "mm": _bind_mm,
    "matmul": _bind_matmul,
    "bmm": _bind_bmm,
    "linear": _bind_linear,
    "addmm": _bind_addmm,
    "binary": _binary,
    "scalar": _bind_scalar,
    "unary": _bind_unary,
    "gelu": _bind_gelu,
    "activation_backward": _bind_act_backward,
    "reduction": _bind_reduction,
    "softmax": _bind_softmax,
    "layer_norm": _bind_layer_norm,
    "layer_norm_backward": _bind_layer_norm_backward,
    "rms_norm": _bind_rms_norm,
    "embedding": _bind_embedding,
    "cross_entropy": _bind_cross_entropy,
    "sdpa": _bind_sdpa,
    "sdpa_backward": _bind_sdpa_backward,
    "adamw": _bind_adamw,
}


def bind(op: str, entry, dtype: str, args: list, results=None, live=None) -> list[Launch]:
    """The kernel launches of one call of ``op`` served by op-table entry ``entry``."""
    binder = BINDERS.get(entry.columns.get("binder"))
    if binder is None:
        raise NotCovered(f"torch_neuron has no argument binding {entry.columns.get('binder')!r} for {entry.aten}")
    return binder(Call(op, entry, dtype, args, results, live))


def tensor_shapes(values) -> tuple:
    out = []
    for v in values:
        if isinstance(v, torch.Tensor):
            out.append(tuple(v.shape))
        elif isinstance(v, (list, tuple)):
            out.extend(tuple(t.shape) for t in v if isinstance(t, torch.Tensor))
    return tuple(out)




def unwrap(t):
    """The tensor of an operand (AsFloat, AsWords and Checked wrap one)."""
    return t.t if isinstance(t, (AsFloat, AsWords, Checked)) else t


def operand_shape(t) -> tuple:
    """The shape a kernel operand is traced with (an AsWords operand's int32 words)."""
    return AsWords.shape_of(t.t) if isinstance(t, AsWords) else tuple(unwrap(t).shape)


from .families import FAMILY_BINDERS, AsWords  # noqa: E402 - the families build on Call and Launch above

BINDERS.update(FAMILY_BINDERS)
