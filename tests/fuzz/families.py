"""Op families the fuzzer draws examples from, as hypothesis strategies.

A tensor argument is drawn as a base tensor and a view (contiguous, transposed, strided,
expanded with stride 0 so elements overlap, or at a storage offset), so the CPU and neuron
forms have the same layout: the base is copied to the device, then the same view is taken.
Shapes include 0-dim and zero-size ones; dtypes are every dtype both devices store.
"""
from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import Callable, Optional

import torch
from hypothesis import strategies as st
from torch.testing import make_tensor

from .oracle import UNINITIALISED, Finding, check

DEV = "neuron"
DTYPES = (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
          torch.bfloat16, torch.float32, torch.float64, torch.complex64, torch.complex128)
LAYOUTS = ("contiguous", "transposed", "strided", "expanded", "offset")
SHAPES = st.one_of(st.lists(st.integers(0, 4), min_size=0, max_size=4),
                   st.lists(st.integers(1, 48), min_size=1, max_size=3)).map(tuple)


@dataclass(frozen=True)
class TensorSpec:
    shape: tuple
    dtype: torch.dtype
    layout: str
    seed: int

    def make(self, device: str) -> torch.Tensor:
        shape, nd = list(self.shape), len(self.shape)
        layout = self.layout if nd else "contiguous"
        gen_shape = list(shape)
        if layout == "transposed" and nd >= 2:
            gen_shape[-1], gen_shape[-2] = gen_shape[-2], gen_shape[-1]
        elif layout == "strided":
            gen_shape[-1] *= 2
        elif layout == "expanded":
            gen_shape[0] = 1
        elif layout == "offset":
            gen_shape = [max(1, int(torch.Size(shape).numel())) + 3]
        torch.manual_seed(self.seed)
        base = make_tensor(gen_shape, dtype=self.dtype, device="cpu", low=-9, high=9)
        base = base.to(device)
        if layout == "transposed" and nd >= 2:
            return base.transpose(-1, -2)
        if layout == "strided":
            return base[..., ::2]
        if layout == "expanded":
            return base.expand(shape)
        if layout == "offset":
            strides = torch.empty(shape).stride()
            return base.as_strided(shape, strides, 3)
        return base

    def __repr__(self) -> str:
        return f"{self.layout} {str(self.dtype).replace('torch.', '')} {list(self.shape)}"


# Half the draws are float32 and contiguous, the types and layouts native kernels serve.
ANY_DTYPE = st.one_of(st.just(torch.float32), st.sampled_from(DTYPES))


def tensor_specs(shape=SHAPES, dtype=ANY_DTYPE, writable: bool = False):
    layouts = [x for x in LAYOUTS if not (writable and x == "expanded")]
    return st.builds(TensorSpec, shape, dtype, st.one_of(st.just("contiguous"), st.sampled_from(layouts)),
                     st.integers(0, 2**16))


def _opinfos(names=None, group="op_db"):
    from torch.testing._internal import common_methods_invocations as cmi

    # Jiterator ops are CUDA-only by definition.
    ops = [o for o in getattr(cmi, group) if ("." not in o.name or o.name.startswith(("special.", "nn.functional.")))
           and not o.name.startswith("jiterator")]
    return [o for o in ops if names is None or o.name in names]


def _name(op) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def _cpu_dtypes(op) -> set:
    return set(op.supported_dtypes("cpu"))


# --------------------------------------------------------------------------- families
@dataclass
class Family:
    name: str
    strategy: st.SearchStrategy
    run: Callable


def _unary(draw_args):
    op, x, inplace = draw_args
    fn = op.inplace_variant if inplace else op.op
    if fn is None:
        return
    check("unary", f"{_name(op)}{'_' if inplace else ''}({x!r})",
          lambda: fn(x.make("cpu")), lambda: fn(x.make(DEV)))


def _unary_strategy():
    ops = _opinfos(group="unary_ufuncs")
    # In-place on an expanded (overlapping) tensor is an error CPU raises too.
    return st.tuples(st.sampled_from(ops), tensor_specs(), st.booleans())


SECOND = ("same", "broadcast", "random", "scalar", "cpu_scalar_tensor", "cpu_tensor")
OUTS = ("none", "out", "out_wrong_dtype", "out_on_cpu")


def _binary(args):
    op, x, second, y_shape, y_seed, y_dtype, out_kind, out_dtype = args
    xs = x.shape
    if second in ("same", "cpu_tensor"):
        ys = xs
    elif second == "broadcast":
        ys = tuple(1 if i % 2 else s for i, s in enumerate(xs))[-max(1, len(xs) - 1):] if xs else ()
    else:
        ys = y_shape
    yspec = TensorSpec(ys, y_dtype, "contiguous", y_seed)
    expect = None

    def y_for(device):
        if second == "scalar":
            return 2.5 if y_dtype.is_floating_point else 3
        if second == "cpu_scalar_tensor":
            return TensorSpec((), y_dtype, "contiguous", y_seed).make("cpu")
        if second == "cpu_tensor":
            return yspec.make("cpu")
        return yspec.make(device)

    if second == "cpu_tensor" and len(ys) > 0:
        expect = RuntimeError  # CUDA: "Expected all tensors to be on the same device"
    kw_cpu, kw_dev = {}, {}
    if out_kind != "none" and op.supports_out:
        odt = x.dtype if out_kind == "out" else out_dtype
        kw_cpu["out"] = torch.empty(0, dtype=odt)
        kw_dev["out"] = torch.empty(0, dtype=odt, device="cpu" if out_kind == "out_on_cpu" else DEV)
        if out_kind == "out_on_cpu":
            expect = RuntimeError  # CUDA: "Expected out tensor to have device cuda:0, but got cpu"
    what = f"{_name(op)}({x!r}, {second} {yspec!r}{', out=' + out_kind if kw_dev else ''})"
    check("binary", what, lambda: op.op(x.make("cpu"), y_for("cpu"), **kw_cpu),
          lambda: op.op(x.make(DEV), y_for(DEV), **kw_dev), expect=expect)


def _binary_strategy():
    ops = [o for o in _opinfos(group="binary_ufuncs")]
    return st.tuples(st.sampled_from(ops), tensor_specs(), st.sampled_from(SECOND), SHAPES,
                     st.integers(0, 2**16), st.sampled_from(DTYPES), st.sampled_from(OUTS), st.sampled_from(DTYPES))


REDUCTIONS = ("sum", "mean", "amax", "amin", "prod", "argmax", "argmin", "std", "var", "nansum", "any", "all",
              "count_nonzero", "logsumexp", "softmax", "log_softmax", "cumsum", "max", "min", "norm")


def _reduction(args):
    name, x, dim_kind, d1, d2, keepdim = args
    fn = getattr(torch, name)
    kw = {}
    if dim_kind == "one":
        kw["dim"] = d1
    elif dim_kind == "two":
        kw["dim"] = (d1, d2)
    if kw and name not in ("softmax", "log_softmax", "cumsum", "count_nonzero"):
        kw["keepdim"] = keepdim
    if name in ("softmax", "log_softmax", "cumsum") and "dim" not in kw:
        kw["dim"] = d1
    check("reduction", f"{name}({x!r}, {kw})", lambda: fn(x.make("cpu"), **kw), lambda: fn(x.make(DEV), **kw))


def _reduction_strategy():
    return st.tuples(st.sampled_from(REDUCTIONS), tensor_specs(), st.sampled_from(("none", "one", "two")),
                     st.integers(-5, 4), st.integers(-5, 4), st.booleans())


MATMULS = ("mm", "bmm", "matmul", "addmm", "mv", "dot", "baddbmm", "linear")


def _matmul(args):
    name, a, b, c_seed = args
    if name == "addmm":
        def fn(x, y, dev):
            bias = TensorSpec((y.shape[-1],) if y.dim() else (), x.dtype, "contiguous", c_seed).make(dev)
            return torch.addmm(bias, x, y)
    elif name == "baddbmm":
        def fn(x, y, dev):
            return torch.baddbmm(torch.zeros((), dtype=x.dtype, device=dev), x, y)
    elif name == "linear":
        def fn(x, y, dev):
            return torch.nn.functional.linear(x, y)
    else:
        op = getattr(torch, name)

        def fn(x, y, dev):
            return op(x, y)
    check("matmul", f"{name}({a!r}, {b!r})", lambda: fn(a.make("cpu"), b.make("cpu"), "cpu"),
          lambda: fn(a.make(DEV), b.make(DEV), DEV))


def _matmul_strategy():
    dims = st.integers(0, 5)
    float_dtypes = st.sampled_from((torch.float32, torch.float32, torch.bfloat16, torch.float16, torch.float64,
                                    torch.int64, torch.complex64))

    @st.composite
    def pair(draw):
        name = draw(st.sampled_from(MATMULS))
        nd = {"mm": 2, "bmm": 3, "addmm": 2, "mv": (2, 1), "dot": (1, 1), "baddbmm": 3}.get(name)
        na, nb = (nd if isinstance(nd, tuple) else (nd, nd)) if nd else (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
        k = draw(dims)
        k2 = k if draw(st.integers(0, 4)) else draw(dims)  # mostly matching inner sizes
        sa = tuple(draw(dims) for _ in range(na - 1)) + (k,)
        sb = (k2,) + tuple(draw(dims) for _ in range(nb - 1))
        if name in ("bmm", "baddbmm"):
            sb = (sa[0],) + sb[1:] if draw(st.integers(0, 3)) else sb
            sb = (sb[0], k2, sb[2]) if len(sb) == 3 else sb
        if name == "linear":
            sb = tuple(draw(dims) for _ in range(1)) + (k2,)
        dt = draw(float_dtypes)
        lay = st.sampled_from(("contiguous", "transposed", "strided", "offset"))
        return (name, TensorSpec(sa, dt, draw(lay), draw(st.integers(0, 999))),
                TensorSpec(sb, dt if draw(st.integers(0, 5)) else draw(float_dtypes), draw(lay), draw(st.integers(0, 999))),
                draw(st.integers(0, 999)))
    return pair()


SHAPE_OPS = ("cat", "stack", "transpose", "permute", "squeeze", "unsqueeze", "narrow", "select", "flatten",
             "index_select", "gather", "flip", "roll", "reshape", "view", "movedim", "chunk", "split",
             "repeat", "expand", "tril", "diagonal", "take", "masked_fill", "where", "sort", "topk")


def _shape_op(args):
    name, x, y, d1, d2, n = args
    if name in ("cat", "stack"):
        def fn(a, b, dev):
            return getattr(torch, name)([a, b], dim=d1)
    elif name in ("index_select", "gather", "take"):
        def fn(a, b, dev):
            idx = torch.arange(n).remainder(max(1, n - 1)).to(dev) - (1 if d2 < 0 else 0)
            if name == "index_select":
                return torch.index_select(a, d1, idx)
            if name == "take":
                return torch.take(a, idx)
            return torch.gather(a, d1, idx.reshape([1] * max(0, a.dim() - 1) + [-1]) if a.dim() else idx)
    elif name in ("masked_fill", "where"):
        def fn(a, b, dev):
            mask = a.real > 0 if a.is_complex() else a > 0 if a.dtype != torch.bool else a
            return a.masked_fill(mask, 1) if name == "masked_fill" else torch.where(mask, a, b)
    else:
        extra = {
            "transpose": lambda a: a.transpose(d1, d2), "permute": lambda a: a.permute(*range(-1, -a.dim() - 1, -1)),
            "squeeze": lambda a: a.squeeze(d1), "unsqueeze": lambda a: a.unsqueeze(d1),
            "narrow": lambda a: a.narrow(d1, d2, n), "select": lambda a: a.select(d1, d2),
            "flatten": lambda a: a.flatten(d1, d2), "flip": lambda a: a.flip(d1), "roll": lambda a: a.roll(n, d1),
            "reshape": lambda a: a.reshape(-1, max(1, n)), "view": lambda a: a.view(n, -1),
            "movedim": lambda a: a.movedim(d1, d2), "chunk": lambda a: a.chunk(max(1, n), d1),
            "split": lambda a: a.split(max(1, n), d1), "repeat": lambda a: a.repeat(*([n] * a.dim())),
            "expand": lambda a: a.expand(n, *a.shape), "tril": lambda a: a.tril(d2),
            "diagonal": lambda a: a.diagonal(d2, d1, -1), "sort": lambda a: a.sort(d1, stable=True),
            "topk": lambda a: a.topk(n, d1),
        }[name]

        def fn(a, b, dev):
            r = extra(a)
            # Results of view ops are materialised so values (not just metadata) are compared.
            return tuple(t.clone() for t in r) if isinstance(r, tuple) else r.clone()
    check("shape", f"{name}({x!r}, {y!r}, d1={d1}, d2={d2}, n={n})",
          lambda: fn(x.make("cpu"), y.make("cpu"), "cpu"), lambda: fn(x.make(DEV), y.make(DEV), DEV))


def _shape_strategy():
    @st.composite
    def args(draw):
        x = draw(tensor_specs())
        same = draw(st.integers(0, 3))
        y = TensorSpec(x.shape, x.dtype if same else draw(st.sampled_from(DTYPES)), "contiguous",
                       draw(st.integers(0, 999))) if same else draw(tensor_specs())
        return (draw(st.sampled_from(SHAPE_OPS)), x, y, draw(st.integers(-5, 4)), draw(st.integers(-5, 4)),
                draw(st.integers(0, 5)))
    return args()


def _hbm_bytes() -> int:
    return int(torch.neuron.get_device_properties(0).total_memory)


def _huge(args):
    kind, factor, dtype = args
    hbm = _hbm_bytes()
    elems = hbm // torch.empty((), dtype=dtype).element_size() * factor + 1
    if kind == "overflow":
        shape = (2 ** 40, 2 ** 40, 2 ** 10)
        check("huge", f"empty({shape}, {dtype})", lambda: torch.empty(shape, dtype=dtype),
              lambda: torch.empty(shape, dtype=dtype, device=DEV))
        return
    fns = {
        "empty": lambda: torch.empty(elems, dtype=dtype, device=DEV),
        "zeros_2d": lambda: torch.zeros(2, elems // 2 + 1, dtype=dtype, device=DEV),
        "expand_contiguous": lambda: torch.ones(1, dtype=dtype, device=DEV).expand(elems).contiguous(),
        "repeat": lambda: torch.ones(2, dtype=dtype, device=DEV).repeat(elems // 2 + 1),
        "full": lambda: torch.full((elems,), 1, dtype=dtype, device=DEV),
        "new_empty": lambda: torch.ones(1, dtype=dtype, device=DEV).new_empty(elems),
        "add_broadcast": lambda: torch.ones(elems // 2 ** 16 + 1, 1, dtype=dtype, device=DEV).expand(-1, 2 ** 16)
        + torch.ones(2 ** 16, dtype=dtype, device=DEV),
    }
    check("huge", f"{kind}({elems} x {dtype}) beyond {hbm} B of HBM", None, fns[kind], expect=torch.OutOfMemoryError)
    # The device recovers: a small allocation afterwards works.
    torch.ones(16, device=DEV).sum().item()


def _huge_strategy():
    return st.tuples(st.sampled_from(("empty", "zeros_2d", "expand_contiguous", "repeat", "full", "new_empty",
                                      "add_broadcast", "overflow")),
                     st.integers(1, 4), st.sampled_from((torch.float32, torch.bfloat16, torch.int64, torch.uint8)))


# OpInfo samples, as given and made non-contiguous (SampleInput.noncontiguous).
@functools.lru_cache(maxsize=None)
def _samples(op_index: int, dtype: torch.dtype):
    op = _OPS()[op_index]
    torch.manual_seed(op_index)  # sample values (not only shapes) are the same in every run
    try:
        return tuple(itertools.islice(op.sample_inputs("cpu", dtype), 3))
    except Exception:  # noqa: BLE001 - a sample generator that fails on CPU has nothing to fuzz
        return ()


@functools.lru_cache(maxsize=None)
def _OPS():
    return tuple(o for o in _opinfos() if not o.name.startswith(("_refs", "_prims")))


def _opinfo(args):
    op_index, dtype_pick, sample_pick, noncontig = args
    op = _OPS()[op_index]
    dtypes = sorted(_cpu_dtypes(op), key=str)
    if not dtypes:
        return
    dtype = dtypes[dtype_pick % len(dtypes)]
    samples = _samples(op_index, dtype)
    if not samples:
        return
    sample = samples[sample_pick % len(samples)]
    if noncontig:
        sample = sample.noncontiguous()
    from tests.upstream import upstream_common as common

    def run(s):
        common.seed(1234)
        return op(s.input, *s.args, **s.kwargs)

    check("opinfo", f"{_name(op)} {dtype} sample {sample_pick % len(samples)}{' noncontiguous' if noncontig else ''}"
          f" ({sample.summary() if hasattr(sample, 'summary') else ''})",
          lambda: run(common.sample_to(sample, "cpu")), lambda: run(common.sample_to(sample, DEV)),
          compare_values=op.name not in UNINITIALISED)


def _opinfo_strategy():
    return st.tuples(st.integers(0, len(_OPS()) - 1), st.integers(0, 20), st.integers(0, 2), st.booleans())


FAMILIES = {
    "unary": (_unary_strategy, _unary),
    "binary": (_binary_strategy, _binary),
    "reduction": (_reduction_strategy, _reduction),
    "matmul": (_matmul_strategy, _matmul),
    "shape": (_shape_strategy, _shape_op),
    "huge": (_huge_strategy, _huge),
    "opinfo": (_opinfo_strategy, _opinfo),
}

