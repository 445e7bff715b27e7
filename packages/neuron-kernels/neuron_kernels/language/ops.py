# Copyright 2026 The neuron-kernels Authors. Licensed under the Apache License, Version 2.0.
"""NKI-shaped operators: memory, matmul, elementwise, activation and reduction.

Each operator appends one or a few ISA instructions to the kernel being traced and returns
a fresh tile. Assigning the result into a tile (``t[...] = nl.exp(x)``) redirects the
instruction's output instead of copying.
"""

from __future__ import annotations

from typing import Iterable

from neuron_sim.isa import HBM, PSUM, SBUF
from neuron_sim.isa.dtypes import dtype_name

from .core import Tensor, Tile, builder, ctx, new_hbm, new_tile

# Buffers and dtypes, spelled as in NKI.
sbuf, psum, hbm = SBUF, PSUM, HBM
shared_hbm = private_hbm = HBM
float32, float16, bfloat16 = "float32", "float16", "bfloat16"
float8_e4m3, float8_e5m2, float8_e4m3fn = "float8_e4m3", "float8_e5m2", "float8_e4m3fn"
int32, uint32, int8, uint8 = "int32", "uint32", "int8", "uint8"


class tile_size:
    """Tile limits (F §7 nl.tile_size)."""
    pmax = 128
    gemm_stationary_fmax = 128
    gemm_moving_fmax = 512
    psum_fmax = 512
    psum_num_banks = 8
    bn_stats_fmax = 512


# -- iteration and launch ---------------------------------------------------------------------
def affine_range(*args) -> Iterable[int]:
    """A loop whose iterations carry no dependency (unrolled at trace time)."""
    return range(*args)


def sequential_range(*args) -> Iterable[int]:
    """A loop whose iterations depend on each other (unrolled at trace time; order is kept)."""
    return range(*args)


static_range = affine_range


def program_id(axis: int = 0) -> int:
    return ctx().program_id[axis]


def num_programs(axis: int = 0) -> int:
    return ctx().num_programs[axis]


# -- memory -----------------------------------------------------------------------------------
def ndarray(shape, dtype, buffer=sbuf, bufs=None, name=None):
    """An uninitialised tensor: an SBUF/PSUM tile, or an HBM tensor a kernel can return."""
    dtype = dtype_name(dtype)
    if buffer == HBM:
        return new_hbm(tuple(shape), dtype, name)
    return new_tile(tuple(shape), dtype, buffer, bufs, name)


def zeros(shape, dtype, buffer=sbuf, bufs=None, name=None) -> Tile:
    return full(shape, 0.0, dtype, buffer, bufs, name)


def full(shape, value, dtype, buffer=sbuf, bufs=None, name=None) -> Tile:
    t = new_tile(tuple(shape), dtype_name(dtype), buffer, bufs, name)
    builder().memset(t.acc, float(value), engine="vector" if buffer == PSUM else "gpsimd")
    return t


def _fresh(shape, dtype, buffer=sbuf, bufs=None) -> Tile:
    return new_tile(tuple(shape), dtype, buffer, bufs)


def load(src: Tensor, dtype=None, queue=None) -> Tile:
    """HBM -> SBUF: a new tile of ``src``'s shape (first dimension on partitions)."""
    if not isinstance(src, Tensor):
        raise TypeError(f"nl.load takes an HBM tensor view, got {type(src).__name__}")
    t = _fresh(src.shape, dtype_name(dtype) if dtype else src.dtype)
    t.producer = builder().dma_copy(t.acc, src.acc, queue_key=queue, op="dma_copy")
    return t


def load_transpose2d(src: Tensor, dtype=None, queue=None) -> Tile:
    """HBM [R, C] -> SBUF [C, R] through a DMA transpose."""
    if len(src.shape) != 2:
        raise ValueError(f"load_transpose2d takes a 2-D view, got shape {src.shape}")
    t = _fresh((src.shape[1], src.shape[0]), dtype_name(dtype) if dtype else src.dtype)
    t.producer = builder().dma_transpose(t.acc, src.acc, queue_key=queue)
    return t


def load_gather(table: Tensor, indices: Tile, queue=None) -> Tile:
    """Indirect DMA: row ``indices[p, 0]`` of the 2-D HBM ``table`` into partition p."""
    t = _fresh((indices.shape[0], table.shape[1]), table.dtype)
    t.producer = builder().dma_gather(t.acc, table.acc, indices.acc, queue_key=queue)
    return t


def store(dst: Tensor, value: Tile, queue=None) -> None:
    """SBUF -> HBM."""
    if not isinstance(dst, Tensor):
        raise TypeError(f"nl.store writes an HBM tensor view, got {type(dst).__name__}")
    if not isinstance(value, Tile):
        raise TypeError(f"nl.store takes a tile value, got {type(value).__name__}")
    if value.buffer == PSUM:
        value = copy(value, dtype=value.dtype)
    builder().dma_copy(dst.acc, value.acc, queue_key=queue, op="dma_copy")


def copy(x: Tile, dtype=None, engine="vector") -> Tile:
    """A copy of ``x`` in SBUF (PSUM -> SBUF eviction, dtype casts)."""
    t = _fresh(x.shape, dtype_name(dtype) if dtype else x.dtype)
    t.producer = builder().tensor_copy(t.acc, x.acc, engine=engine)
    return t


# -- TensorE ----------------------------------------------------------------------------------
def matmul(x: Tile, y: Tile, transpose_x: bool = False, bufs=None) -> Tile:
    """x @ y into a new FP32 PSUM tile. With ``transpose_x`` x is given as [K, M] (TensorE's stationary).

    ``bufs``: PSUM buffers for results of this call site (default: the kernel's default).
    """
    if not transpose_x:
        x = transpose(x, bufs=bufs)
        x = copy(x, dtype=y.dtype if y.dtype != "float32" or x.dtype == "float32" else "float32")
    M = x.acc.free_size
    N = y.acc.free_size
    t = _fresh((M, N), "float32", PSUM, bufs)
    t.producer = builder().nc_matmul(t.acc, x.acc, y.acc, accumulate=False)
    return t


def transpose(x: Tile, bufs=None) -> Tile:
    """[P, F] -> [F, P] on TensorE, into PSUM (FP32)."""
    t = _fresh((x.acc.free_size, x.shape[0]), "float32", PSUM, bufs)
    t.producer = builder().nc_transpose(t.acc, x.acc)
    return t


# -- elementwise ------------------------------------------------------------------------------
def _result_dtype(*xs, dtype=None) -> str:
    if dtype is not None:
        return dtype_name(dtype)
    ds = {x.dtype for x in xs if isinstance(x, Tile) and x.buffer != PSUM}
    if any(isinstance(x, Tile) and x.buffer == PSUM for x in xs):
        ds.add("float32")
    return ds.pop() if len(ds) == 1 else "float32"


def _is_pscalar(t: Tile, ref: Tile) -> bool:
    return isinstance(t, Tile) and t.acc.free_size == 1 and ref.acc.free_size != 1 and t.shape[0] == ref.shape[0]


def _binary_into(dst_acc, a, b, op, engine="vector"):
    bld = builder()
    if isinstance(a, Tile) and isinstance(b, Tile):
        if a.acc.free_size == b.acc.free_size:
            return bld.tensor_tensor(dst_acc, a.acc, b.acc, op, engine=engine)
        if _is_pscalar(b, a):
            return bld.tensor_scalar(dst_acc, a.acc, op, b.acc, engine=engine)
        if _is_pscalar(a, b):
            return bld.tensor_scalar(dst_acc, b.acc, op, a.acc, reverse0=True, engine=engine)
        raise ValueError(f"nl.{op}: shapes {a.shape} and {b.shape} do not match and neither is a per-partition "
                         f"scalar (P, 1)")
    if isinstance(a, Tile):
        return bld.tensor_scalar(dst_acc, a.acc, op, float(b), engine=engine)
    if isinstance(b, Tile):
        return bld.tensor_scalar(dst_acc, b.acc, op, float(a), reverse0=True, engine=engine)
    raise TypeError(f"nl.{op} needs at least one tile operand")


def _binary(op):
    def f(x, y, dtype=None, engine="vector") -> Tile:
        ref = x if isinstance(x, Tile) and not _is_pscalar(x, y if isinstance(y, Tile) else x) else y
        t = _fresh(ref.shape, _result_dtype(x, y, dtype=dtype))
        t.producer = _binary_into(t.acc, x, y, op, engine)
        return t
    f.__name__ = op
    f.__doc__ = f"Elementwise {op} of two tiles, a tile and a per-partition (P, 1) tile, or a tile and a number."
    return f


add = _binary("add")
subtract = _binary("subtract")
multiply = _binary("multiply")
divide = _binary("divide")
maximum = _binary("maximum")
minimum = _binary("minimum")
power = _binary("power")
greater = _binary("greater")
greater_equal = _binary("greater_equal")
less = _binary("less")
less_equal = _binary("less_equal")
equal = _binary("equal")
not_equal = _binary("not_equal")
logical_and = _binary("logical_and")
logical_or = _binary("logical_or")


def where(pred: Tile, x, y, dtype=None) -> Tile:
    """x where pred != 0, else y, on VectorE (a predicated select); a number operand is a filled tile."""
    ref = next(v for v in (pred, x, y) if isinstance(v, Tile))
    numbers = [v for v in (x, y) if not isinstance(v, Tile)]
    if numbers:
        # The fills share one allocation: tiles are attributed to the caller's source line, so
        # two fills and the result there would need three of its rotating buffers.
        P, *free = ref.shape
        filled = _fresh((P, len(numbers), *free), "float32")
        for i, v in enumerate(numbers):
            builder().memset(filled[:, i].acc, float(v), engine="gpsimd")
        fills = iter(filled[:, i] for i in range(len(numbers)))
        x = x if isinstance(x, Tile) else next(fills)
        y = y if isinstance(y, Tile) else next(fills)
    t = _fresh(ref.shape, _result_dtype(x, y, dtype=dtype))
    t.producer = builder().select(t.acc, pred.acc, x.acc, y.acc)
    return t


def activation(func: str, x: Tile, bias=None, scale=1.0, dtype=None, reduce_op=None, reduce_res: Tile = None) -> Tile:
    """func(x * scale + bias) on ScalarE; ``bias``/``scale`` are numbers or per-partition (P, 1) tiles."""
    t = _fresh(x.shape, _result_dtype(x, dtype=dtype))
    b = bias.acc if isinstance(bias, Tile) else bias
    if isinstance(b, (int, float)):
        b = float(b)
    s = scale.acc if isinstance(scale, Tile) else float(scale)
    t.producer = builder().activation(t.acc, x.acc, func, bias=b, scale=s, reduce_op=reduce_op,
                                      reduce_dst=reduce_res.acc if reduce_res is not None else None)
    return t


def _unary(func):
    def f(x: Tile, dtype=None) -> Tile:
        return activation(func, x, dtype=dtype)
    f.__name__ = func
    f.__doc__ = f"Elementwise {func} on ScalarE."
    return f


exp = _unary("exp")
log = _unary("log")
tanh = _unary("tanh")
sigmoid = _unary("sigmoid")
relu = _unary("relu")
gelu = _unary("gelu")
gelu_apprx_tanh = _unary("gelu_apprx_tanh")
gelu_dx = _unary("gelu_dx")
silu = _unary("silu")
silu_dx = _unary("silu_dx")
sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt")
square = _unary("square")
abs = _unary("abs")  # noqa: A001 - NKI's name
negative = _unary("negative")
reciprocal = _unary("reciprocal")
softplus = _unary("softplus")
erf = _unary("erf")
sin = _unary("sin")
cos = _unary("cos")
sign = _unary("sign")


# -- reductions -------------------------------------------------------------------------------
def _reduce(op, x: Tile, axis, keepdims=True, dtype=None, negate=False) -> Tile:
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    axes = tuple(a % len(x.shape) for a in axes)
    if keepdims:
        shape = tuple(1 if i in axes else s for i, s in enumerate(x.shape))
    else:
        shape = tuple(s for i, s in enumerate(x.shape) if i not in axes)
        if len(shape) == 1:
            shape = shape + (1,)
    t = _fresh(shape, _result_dtype(x, dtype=dtype))
    t.producer = builder().tensor_reduce(t.acc, x.acc, op, axes, negate=negate)
    return t


def sum(x: Tile, axis, keepdims=True, dtype=None) -> Tile:  # noqa: A001 - NKI's name
    """Sum over free axes (the partition axis is reduced with a matmul against ones)."""
    return _reduce("add", x, axis, keepdims, dtype)


def max(x: Tile, axis, keepdims=True, dtype=None, negate=False) -> Tile:  # noqa: A001
    return _reduce("max", x, axis, keepdims, dtype, negate)


def min(x: Tile, axis, keepdims=True, dtype=None) -> Tile:  # noqa: A001
    return _reduce("min", x, axis, keepdims, dtype)


def mean(x: Tile, axis, keepdims=True, dtype=None) -> Tile:
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    n = 1
    for a in axes:
        n *= x.shape[a]
    s = sum(x, axis, keepdims, dtype="float32")
    return multiply(s, 1.0 / n, dtype=dtype or (x.dtype if x.buffer != PSUM else "float32"))


def iota(shape, dtype="float32", base=0, partition_step=0, free_step=1) -> Tile:
    """t[p, f] = base + partition_step * p + free_step * f, generated on GpSimd."""
    t = _fresh(shape, dtype_name(dtype))
    t.producer = builder().iota(t.acc, base=base, partition_step=partition_step, free_step=free_step)
    return t


# -- Tile operators ---------------------------------------------------------------------------
def _tile_iadd(self, value):
    b = builder()
    if isinstance(value, Tile) and value.producer is not None and value.producer.op == "nc_matmul" \
            and value.producer.idx == len(b.instrs) - 1:
        p = value.producer
        b.retarget(p, self.acc)
        p.attrs["accumulate"] = True
        value.producer = None
    else:
        _binary_into(self.acc, self, value, "add")
    self._inplace = True
    return self


def _tile_inplace(op):
    def f(self, value):
        _binary_into(self.acc, self, value, op)
        self._inplace = True
        return self
    return f


Tile.__add__ = Tile.__radd__ = lambda self, o: add(self, o)
Tile.__sub__ = lambda self, o: subtract(self, o)
Tile.__rsub__ = lambda self, o: subtract(o, self)
Tile.__mul__ = Tile.__rmul__ = lambda self, o: multiply(self, o)
Tile.__truediv__ = lambda self, o: divide(self, o)
Tile.__neg__ = lambda self: multiply(self, -1.0)
Tile.__iadd__ = _tile_iadd
Tile.__isub__ = _tile_inplace("subtract")
Tile.__imul__ = _tile_inplace("multiply")
Tile.__itruediv__ = _tile_inplace("divide")
