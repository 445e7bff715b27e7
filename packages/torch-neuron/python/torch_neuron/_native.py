"""Native kernels: the ops neuron_kernels' op table serves run "on the device".

For each (op, dtype) in the table, executions are counted as native and their
timeline duration is the kernel's simulated engine schedule for the call
(timing-only simulation, cached per call signature: shapes, dtypes and attribute
values). A call the kernel's adapter does not cover (a shape, dtype or attribute
outside its notes, e.g. add with alpha != 1 or a sum over two dims) runs as a
fallback; `native_rejections()` says why.

Values come from the host reference path (the CPU kernel) by default. In device
numerics mode (TORCH_NEURON_DEVICE_NUMERICS=1 at import, or
`torch_neuron.set_device_numerics(True)`), a native call's values come from its
tile program executed by neuron_sim's ISA simulator (`OpEntry.run`): the CPU
kernel still runs first (it allocates and shapes the outputs), then the kernel's
results overwrite them.

The binding of an op's ATen arguments to its adapter (`_BINDERS`) is the one
place that decides coverage: the estimator (both modes) and the executor
(numerics mode) use it, so a call counted native is always one the kernel computes.
"""
from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import torch

from . import _C

_DTYPES = {
    "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16,
    "float64": torch.float64, "int32": torch.int32, "int64": torch.int64,
}
_C10_NAMES = {"Float": "float32", "BFloat16": "bfloat16", "Half": "float16",
              "Double": "float64", "Int": "int32", "Long": "int64"}
_TORCH_TO_KERNEL = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.int32: "int32",
                    torch.int64: "int32"}  # kernels take int32 indices; adapters cast int64 ones
_rejections: dict[tuple[str, str, tuple], str] = {}
_profile = "trn2"
_installed = False
NUMERICS_ENV = "TORCH_NEURON_DEVICE_NUMERICS"
_executions: dict[tuple[str, str], int] = {}


class NotCovered(Exception):
    """The call's arguments are outside what the kernel's adapter computes."""


# ----------------------------------------------------------------------------- schemas
@functools.cache
def _schema(op: str):
    base, _, overload = op.partition(".")
    return torch._C._get_schema(base, overload)


def _signature(schema, skip_out: bool) -> list[tuple[str, str]]:
    return [(a.name, str(a.type)) for a in schema.arguments if not (skip_out and a.is_out)]


def _executed_names(aten: str) -> list[str]:
    """The names under which the backend executes a table op: the op itself and its
    out= and in-place forms, i.e. the overloads whose (non-out) arguments are the op's.

    Matching by arguments keeps e.g. aten::add.out (Tensor other) off add.Scalar and
    maps sum.dim_IntList to sum.IntList_out, not to the full reduction sum.out.
    """
    base, _, _ = aten.partition(".")
    try:
        want = _signature(_schema(aten), False)
    except RuntimeError:
        return [aten]
    names = [aten]
    for name in (base, base + "_"):
        for s in torch._C._jit_get_schemas_for_operator(name):
            full = f"{name}.{s.overload_name}" if s.overload_name else name
            if full == aten:
                continue
            is_out = any(a.is_out for a in s.arguments)
            if (name == base) != is_out:   # out= forms of the op; in-place forms of op_
                continue
            if _signature(s, True) == want:
                names.append(full)
    return names


# ----------------------------------------------------------------------------- binding
class _Deferred:
    """An attribute whose value is a tensor's (a wrapped number, AdamW's step): read when
    the kernel runs; timing does not depend on it, so estimates use ``placeholder``."""

    def __init__(self, read: Callable[[], Any], placeholder: Any):
        self.read = read
        self.placeholder = placeholder


@dataclasses.dataclass
class _Launch:
    tensors: tuple           # the adapter's tensor arguments (None: an absent optional)
    attrs: dict              # the adapter's attributes (values may be _Deferred)
    targets: tuple           # per kernel result, the tensor it is written into (None: skip)
    entry: str | None = None  # another table entry's adapter (scalar forms), else the op's


class _Call:
    """One call of a table op: arguments by schema name, results when running."""

    def __init__(self, op: str, dtype: str, args: list, results=None, live=None):
        self.torch_dtype = _DTYPES[dtype]
        schema = _schema(op)
        names = [a.name for a in schema.arguments]
        self.a = dict(zip(names, args))
        self.live = dict(zip(names, live)) if live is not None else None
        self.results = results
        outs = [a.name for a in schema.arguments if a.is_out]
        first_out = self.a.get(outs[0]) if outs else None
        if isinstance(first_out, torch.Tensor) and first_out.dtype != self.torch_dtype:
            raise NotCovered(f"out= tensor '{outs[0]}' is {first_out.dtype}; the kernel writes {self.torch_dtype}")

    def __getitem__(self, name):
        return self.a[name]

    def tensor(self, name, ndim=None, dtype=None, optional=False):
        """A kernel operand: argument ``name``, a tensor of the call's dtype (or ``dtype``), >= 1-D."""
        t = self.a[name]
        if t is None and optional:
            return None
        return self.operand(t, name, ndim, dtype)

    def operand(self, t, name, ndim=None, dtype=None):
        if not isinstance(t, torch.Tensor):
            raise NotCovered(f"argument '{name}' is not a tensor")
        want = dtype or self.torch_dtype
        if t.dtype not in (want if isinstance(want, tuple) else (want,)):
            raise NotCovered(f"'{name}' is {t.dtype}, the call's kernel dtype is {want}: "
                             "no type promotion in the kernel")
        if t.dim() == 0:
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

    def launch(self, tensors, attrs=None, targets=(0,), entry=None):
        return _Launch(tuple(tensors), attrs or {}, tuple(self.ret(i) if isinstance(i, int) else i
                                                         for i in targets), entry)


def _scalar_of(t, transform=lambda v: v):
    """A number operand (a Python number, a wrapped number or a 0-dim tensor) as a kernel immediate."""
    if isinstance(t, torch.Tensor):
        if t.dtype.is_complex:
            raise NotCovered(f"complex scalar operand ({t.dtype})")
        return _Deferred(lambda: transform(float(t.item())), transform(1.0))
    if isinstance(t, complex):
        raise NotCovered(f"complex scalar operand {t!r}")
    return _Deferred(lambda: transform(float(t)), transform(1.0))


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


_SCALAR_FORMS = {  # binary op -> (scalar entry, transform of the scalar, commutative)
    "add": ("aten::add.Scalar", lambda v: v, True),
    "sub": ("aten::add.Scalar", lambda v: -v, False),
    "mul": ("aten::mul.Scalar", lambda v: v, True),
    "div": ("aten::mul.Scalar", lambda v: 1.0 / v if v != 0 else float("inf"), False),
}


def _binary(kind, alpha=False):
    def bind(c):
        if alpha:
            c.require("alpha", 1)
        a, b = c["self"], c["other"]
        if _rank(a) == 0 or _rank(b) == 0:
            # A number (wrapped, or a 0-dim tensor): the scalar form of the kernel.
            form = _SCALAR_FORMS.get(kind)
            if form is None or (_rank(a) == 0 and _rank(b) == 0):
                raise NotCovered("0-dim operands; the tile kernels take tensors with at least one dimension")
            entry, transform, commutative = form
            if _rank(a) == 0:
                if not commutative:
                    raise NotCovered(f"number {kind} tensor; the kernel's scalar form is tensor {kind} number")
                a, b = b, a
            x = c.operand(a, "self" if a is c["self"] else "other")
            return [c.launch((x,), {"other": _scalar_of(b, transform)}, entry=entry)]
        a, b = c.tensor("self"), c.tensor("other")
        try:
            torch.broadcast_shapes(a.shape, b.shape)
        except RuntimeError as e:
            raise NotCovered(str(e)) from None
        return [c.launch((a, b))]
    return bind


def _bind_scalar(c):
    if "alpha" in c.a:
        c.require("alpha", 1)
    other = c["other"]
    if isinstance(other, complex):
        raise NotCovered(f"complex scalar {other!r}")
    return [c.launch((c.tensor("self"),), {"other": float(other)})]


def _bind_unary(c):
    return [c.launch((c.tensor("self"),))]


def _bind_gelu(c):
    c.require("approximate", "none", "tanh")
    return [c.launch((c.tensor("self"),), {"approximate": c["approximate"]})]


def _bind_act_backward(c):
    if "approximate" in c.a:
        c.require("approximate", "none")
    g, x = c.tensor("grad_output"), c.tensor("self")
    if g.shape != x.shape:
        raise NotCovered(f"grad_output {tuple(g.shape)} and self {tuple(x.shape)} differ in shape")
    return [c.launch((g, x))]


def _one_dim(c, x):
    dim = c["dim"]
    dims = [] if dim is None else ([dim] if isinstance(dim, int) else list(dim))
    if not dims and x.dim() == 1:
        dims = [0]     # the full reduction of a 1-D tensor is the reduction over its dim
    if len(dims) != 1:
        raise NotCovered(f"dim={dim!r}; the kernel reduces over exactly one dimension")
    return dims[0]


# c10::ScalarType codes (a ScalarType argument reaches Python as its code).
_SCALAR_TYPE_CODES = {5: torch.float16, 6: torch.float32, 7: torch.float64, 15: torch.bfloat16,
                      3: torch.int32, 4: torch.int64}


def _bind_reduction(c):
    want = c.a.get("dtype")
    if isinstance(want, int):
        want = _SCALAR_TYPE_CODES.get(want, f"ScalarType code {want}")
    if want is not None and want != c.torch_dtype:
        raise NotCovered(f"dtype={want} (a conversion); the kernel reduces in the input's dtype")
    x = c.tensor("self")
    return [c.launch((x,), {"dim": _one_dim(c, x), "keepdim": bool(c["keepdim"])})]


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
    return [c.launch((g, x, _AsFloat(mean), _AsFloat(rstd), w), targets=(0, 1, 2))]


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
    return [c.launch((x, _Checked(t, check)), {"reduction": reduction})]


def _no_attn_bias(c):
    bias = c.a.get("attn_bias")
    if bias is not None and (not isinstance(bias, torch.Tensor) or bias.numel() > 0):
        raise NotCovered("attn_mask is set; the kernel covers causal or unmasked attention")


def _bind_sdpa(c):
    c.require("dropout_p", 0.0)
    _no_attn_bias(c)
    if "return_debug_mask" in c.a:
        c.require("return_debug_mask", False)
    q, k, v = c.tensor("query"), c.tensor("key"), c.tensor("value")
    attrs = {"is_causal": bool(c["is_causal"]), "scale": c["scale"]}
    return [c.launch((q, k, v), attrs, targets=(0, 1))]


def _bind_sdpa_backward(c):
    c.require("dropout_p", 0.0)
    _no_attn_bias(c)
    ts = [c.tensor(n) for n in ("grad_out", "query", "key", "value", "out")]
    lse = c.tensor("logsumexp", dtype=torch.float32)
    attrs = {"is_causal": bool(c["is_causal"]), "scale": c["scale"]}
    return [c.launch((*ts, lse), attrs, targets=(0, 1, 2))]


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
                 "step": _Deferred(functools.partial(_step_of, step), 1)}
        targets = tuple(None if c.live is None else c.live[n][i] for n in ("self", "exp_avgs", "exp_avg_sqs"))
        launches.append(_Launch(tuple(ts), attrs, targets))
    return launches


def _step_of(step: torch.Tensor) -> int:
    s = float(step.item())
    if s != int(s) or s < 1:
        raise NotCovered(f"step {s} is not a positive integer")
    return int(s)


class _AsFloat:
    """An operand the kernel reads in float32 (layer-norm statistics of a bf16 call)."""

    def __init__(self, t):
        self.t = t


class _Checked:
    """An operand whose values must pass ``check`` before the kernel runs."""

    def __init__(self, t, check):
        self.t = t
        self.check = check


_unary_names = ("exp", "log", "tanh", "sigmoid", "relu", "silu", "sqrt", "rsqrt", "neg", "abs", "reciprocal")
_BINDERS: dict[str, Callable[[_Call], list[_Launch]]] = {
    "aten::mm": _bind_mm,
    "aten::matmul": _bind_matmul,
    "aten::bmm": _bind_bmm,
    "aten::linear": _bind_linear,
    "aten::addmm": _bind_addmm,
    "aten::add.Tensor": _binary("add", alpha=True),
    "aten::sub.Tensor": _binary("sub", alpha=True),
    "aten::mul.Tensor": _binary("mul"),
    "aten::div.Tensor": _binary("div"),
    "aten::maximum": _binary("maximum"),
    "aten::minimum": _binary("minimum"),
    "aten::add.Scalar": _bind_scalar,
    "aten::mul.Scalar": _bind_scalar,
    **{f"aten::{n}": _bind_unary for n in _unary_names},
    "aten::gelu": _bind_gelu,
    "aten::gelu_backward": _bind_act_backward,
    "aten::silu_backward": _bind_act_backward,
    "aten::sum.dim_IntList": _bind_reduction,
    "aten::mean.dim": _bind_reduction,
    "aten::amax": _bind_reduction,
    "aten::amin": _bind_reduction,
    "aten::_softmax": _bind_softmax,
    "aten::_log_softmax": _bind_softmax,
    "aten::native_layer_norm": _bind_layer_norm,
    "aten::native_layer_norm_backward": _bind_layer_norm_backward,
    "aten::_fused_rms_norm": _bind_rms_norm,
    "aten::embedding": _bind_embedding,
    "aten::cross_entropy_loss": _bind_cross_entropy,
    "aten::_scaled_dot_product_flash_attention": _bind_sdpa,
    "aten::_scaled_dot_product_flash_attention_backward": _bind_sdpa_backward,
    "aten::_fused_adamw_": _bind_adamw,
}


def _bind(op: str, entry: str, dtype: str, args: list, results=None, live=None) -> list[_Launch]:
    binder = _BINDERS.get(entry)
    if binder is None:
        raise NotCovered(f"torch_neuron has no argument binding for {entry}")
    return binder(_Call(op, dtype, args, results, live))


def _tensor_shapes(values) -> tuple:
    out = []
    for v in values:
        if isinstance(v, torch.Tensor):
            out.append(tuple(v.shape))
        elif isinstance(v, (list, tuple)):
            out.extend(tuple(t.shape) for t in v if isinstance(t, torch.Tensor))
    return tuple(out)


# ----------------------------------------------------------------------------- estimator
def _unwrap(t):
    return t.t if isinstance(t, (_AsFloat, _Checked)) else t


def _spec_dtype(t) -> str:
    if isinstance(t, _AsFloat):
        return "float32"
    t = _unwrap(t)
    name = _TORCH_TO_KERNEL.get(t.dtype)
    if name is None:
        raise NotCovered(f"a {t.dtype} operand")
    return name


def _attrs(launch: _Launch, running: bool) -> dict:
    out = {k: (v.read() if running else v.placeholder) if isinstance(v, _Deferred) else v
           for k, v in launch.attrs.items()}
    if not running:
        # A kernel's schedule depends on whether a constant is 0 or 1 (an instruction it can
        # skip), not on its value; one representative keeps lr schedules, eps, ... from
        # re-simulating the schedule (the C++ signature classifies numbers the same way).
        out = {k: 0.5 if isinstance(v, float) and v not in (0.0, 1.0) else v for k, v in out.items()}
    return out


def _estimate(op: str, entry_name: str, c10_dtype: str, args: list) -> float:
    import neuron_kernels

    dtype = _C10_NAMES.get(c10_dtype, c10_dtype)
    key = (op, dtype, _tensor_shapes(args))
    if neuron_kernels.lookup(entry_name, dtype) is None:
        _rejections[key] = f"no kernel for dtype {dtype}"
        return -1.0
    try:
        total = 0.0
        for ln in _bind(op, entry_name, dtype, args):
            entry = neuron_kernels.lookup(ln.entry or entry_name, dtype)
            shapes = [None if t is None else tuple(_unwrap(t).shape) for t in ln.tensors]
            dtypes = ["float32" if t is None else _spec_dtype(t) for t in ln.tensors]
            total += float(entry.estimate_ns(shapes, dtypes, profile=_profile, **_attrs(ln, False)))
        return total
    except Exception as e:  # noqa: BLE001 - any binding or adapter failure means "not covered"
        _rejections[key] = str(e) if isinstance(e, NotCovered) else f"{type(e).__name__}: {e}"
        return -1.0


def native_rejections() -> dict[tuple[str, str, tuple], str]:
    """Calls of table ops that ran as fallback: (op, dtype, argument shapes) -> the reason."""
    return dict(_rejections)


# ----------------------------------------------------------------------------- device numerics
def _to_numpy(t):
    import ml_dtypes
    import numpy as np

    check = t.check if isinstance(t, _Checked) else None
    as_float = isinstance(t, _AsFloat)
    t = _unwrap(t).detach()
    if check is not None:
        check()
    if as_float:
        t = t.float()
    t = t.resolve_conj().resolve_neg().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16).copy()
    return np.array(t.numpy(), copy=True)


def _write(target: torch.Tensor, value) -> None:
    import ml_dtypes
    import numpy as np

    arr = np.ascontiguousarray(value)
    if arr.size != target.numel():
        raise RuntimeError(f"the kernel returned {arr.shape} ({arr.size} elements) for a result of "
                           f"shape {tuple(target.shape)}")
    src = torch.from_numpy(arr.view(np.int16)).view(torch.bfloat16) if arr.dtype == ml_dtypes.bfloat16 \
        else torch.from_numpy(arr)
    target.copy_(src.reshape(target.shape))


def _execute(op: str, entry_name: str, c10_dtype: str, inputs: list, args: list, results: list) -> None:
    """Recomputes a native call's results with its tile kernel (called from host execution)."""
    import neuron_kernels

    dtype = _C10_NAMES.get(c10_dtype, c10_dtype)
    shapes = _tensor_shapes(inputs)
    try:
        with torch.no_grad():
            launches = _bind(op, entry_name, dtype, inputs, results, args)
            for ln in launches:
                entry = neuron_kernels.lookup(ln.entry or entry_name, dtype)
                arrays = [None if t is None else _to_numpy(t) for t in ln.tensors]
                out = entry.run(*arrays, **_attrs(ln, True))
                outs = out if isinstance(out, tuple) else (out,)
                if len(outs) < len(ln.targets):
                    raise RuntimeError(f"the kernel returned {len(outs)} results for {len(ln.targets)} outputs")
                for target, value in zip(ln.targets, outs):
                    if target is not None:
                        _write(target, value)
            for ln in launches:
                key = (ln.entry or entry_name, dtype)
                _executions[key] = _executions.get(key, 0) + 1
    except Exception as e:  # noqa: BLE001 - reported with the op, its shapes and the switch
        kind = "is outside the kernel's coverage" if isinstance(e, NotCovered) else "failed"
        raise RuntimeError(
            f"neuron device numerics ({NUMERICS_ENV}=1): the tile kernel of {op} ({dtype}, "
            f"argument shapes {list(shapes)}) {kind}: {type(e).__name__}: {e}. Unset {NUMERICS_ENV} "
            "(or call torch_neuron.set_device_numerics(False)) to take this op's values from the host "
            "reference path.") from None


def set_device_numerics(enabled: bool) -> None:
    """Device-numerics mode: native ops' values come from their tile kernels (ISA simulator).

    Much slower than the host reference path (the simulator interprets every instruction);
    meant for checking kernels and low-precision numerics on small models.
    """
    if enabled:
        if not _installed:
            raise RuntimeError(f"{NUMERICS_ENV}=1 / set_device_numerics(True) needs neuron_kernels "
                               "(pip install neuron-kernels): no native kernels are registered")
        _C.set_native_executor(_execute)
    else:
        _C.set_native_executor(None)


def device_numerics_enabled() -> bool:
    return bool(_C.native_executor_set())


def device_numerics_stats() -> dict[tuple[str, str], int]:
    """Tile-kernel executions in device-numerics mode: (op-table entry, dtype) -> launches.

    Keyed by the kernel that ran: aten::abs.out runs aten::abs's kernel, ``x + 2.5``
    (aten::add.Tensor with a number) runs aten::add.Scalar's."""
    return dict(_executions)


def clear_device_numerics_stats() -> None:
    _executions.clear()


# Ops the backend executes in place of a table op (same arguments by name): SDPA's fused
# path on neuron is the PrivateUse1 entry point, which the flash-attention kernel serves.
_ALSO_EXECUTED_AS = {
    "aten::_scaled_dot_product_flash_attention": ["aten::_scaled_dot_product_fused_attention_overrideable"],
    "aten::_scaled_dot_product_flash_attention_backward": [
        "aten::_scaled_dot_product_fused_attention_overrideable_backward"],
}


def install(profile: str) -> int:
    """Registers the op table; returns the number of (op, dtype) pairs made native."""
    global _profile, _installed
    _profile = profile
    try:
        import neuron_kernels
    except ImportError:
        return 0
    n = 0
    for aten, dtypes in neuron_kernels.native_ops():
        names = _executed_names(aten) + _ALSO_EXECUTED_AS.get(aten, [])
        for d in dtypes:
            if d not in _DTYPES:
                continue
            for executed in names:
                _C.register_native(executed, aten, _DTYPES[d])
            n += 1
    _C.set_native_estimator(_estimate)
    _installed = True
    return n
