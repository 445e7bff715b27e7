# Copyright 2026 The neuron-sim Authors. Licensed under the Apache License, Version 2.0.
"""The checked builder of a ``Program``.

``ProgramBuilder`` appends one instruction per ISA call and checks it against the NeuronCore's
constraints at once, so an error names the instruction and the kernel source line that issued
it (the innermost frame outside the simulator and the registered tile languages).
"""

from __future__ import annotations

import os
import sys
from typing import Sequence

from . import costs as _costs
from .access import HBM, PSUM, SBUF, Access, Buffer
from .dtypes import FLOAT_TYPES, LOW_PRECISION_MATMUL, dtype_name, itemsize
from .errors import BankError, CapacityError, DTypeError, IsaError, MemoryKindError, PartitionError, ShapeError
from .program import ENGINES, Instr, Program

# Frames from these directories are the simulator or a tile language, never the user's kernel.
_INTERNAL_DIRS: list[str] = [os.path.dirname(os.path.abspath(__file__)) + os.sep]


def register_internal_path(path: str) -> None:
    """Mark a package directory as internal so source locations skip its frames (used by tile languages)."""
    p = os.path.dirname(os.path.abspath(path)) + os.sep if os.path.isfile(path) else os.path.abspath(path) + os.sep
    if p not in _INTERNAL_DIRS:
        _INTERNAL_DIRS.append(p)
        _CODE_INTERNAL.clear()


_CODE_INTERNAL: dict = {}


def _is_internal(code) -> bool:
    r = _CODE_INTERNAL.get(code)
    if r is None:
        r = _CODE_INTERNAL[code] = code.co_filename.startswith(tuple(_INTERNAL_DIRS))
    return r


def _user_frames(limit: int = 4) -> tuple[tuple[str, int, int], ...]:
    """The innermost user frames (file, line, bytecode offset) that led to this ISA call."""
    f = sys._getframe(2)
    out = []
    while f is not None and len(out) < limit:
        code = f.f_code
        if not _is_internal(code):
            # The bytecode offset tells apart several calls on one source line.
            out.append((code.co_filename, f.f_lineno, f.f_lasti))
        elif out:
            break
        f = f.f_back
    return tuple(out)


def _fmt_loc(frames) -> str:
    if not frames:
        return "<unknown>"
    fn, line, _ = frames[0]
    return f"{fn}:{line}"


_TT_OPS = frozenset(["add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "greater",
                     "greater_equal", "less", "less_equal", "equal", "not_equal", "bypass", "abs_max",
                     "logical_and", "logical_or"])
_REDUCE_OPS = frozenset(["add", "max", "min", "multiply"])
ACT_FUNCS = frozenset(["identity", "copy", "exp", "log", "tanh", "sigmoid", "relu", "gelu", "gelu_apprx_tanh",
                       "silu", "square", "sqrt", "rsqrt", "reciprocal", "abs", "sign", "negative", "softplus",
                       "sin", "cos", "erf", "gelu_dx", "silu_dx", "sigmoid_dx"])


class ProgramBuilder:
    """Appends checked instructions. One builder traces one kernel for one core of one profile."""

    def __init__(self, name: str = "kernel", profile=None, default_bufs: int = 2):
        self.costs = _costs.get_costs(profile)
        self.name = name
        self.default_bufs = default_bufs
        self.buffers: list[Buffer] = []
        self.instrs: list[Instr] = []
        self.inputs: list[Buffer] = []
        self.outputs: list[Buffer] = []
        self._phys: dict = {}
        self._sites: dict = {}   # site key -> dict(kind, bufs, count, bytes, loc)
        self._queues: dict = {}

    # -- memory ---------------------------------------------------------------------------
    def hbm(self, name, shape, dtype, role="temp") -> Access:
        dt = dtype_name(dtype)
        b = Buffer(len(self.buffers), name, HBM, shape, dt, self._new_phys(("hbm", len(self.buffers))), None,
                   _fmt_loc(_user_frames()))
        self.buffers.append(b)
        if role == "input":
            self.inputs.append(b)
        elif role == "output":
            self.outputs.append(b)
        return Access(b)

    def alloc(self, shape, dtype, kind=SBUF, bufs=None, name=None) -> Access:
        """A new SBUF/PSUM tile, uninitialised. Tiles allocated at one source line rotate over ``bufs`` slots."""
        frames = _user_frames()
        loc = _fmt_loc(frames)
        dt = dtype_name(dtype)
        shape = tuple(int(s) for s in shape)
        what = "nl.ndarray" if kind == SBUF else "nl.ndarray(psum)"  # the allocation call, for errors
        if kind not in (SBUF, PSUM):
            raise MemoryKindError(what, loc, f"unknown on-chip buffer {kind!r}", "use 'sbuf' or 'psum'")
        if len(shape) < 2:
            raise ShapeError(what, loc, f"tile shape {shape} needs a partition and at least one free dimension",
                             "allocate (partitions, free...) tiles")
        c = self.costs
        if shape[0] > c.partitions or shape[0] < 1:
            raise PartitionError(what, loc, f"partition dimension {shape[0]} exceeds maximum {c.partitions} "
                                 f"(tile shape {shape})", "split the first dimension into tiles of <= 128")
        row = itemsize(dt)
        for s in shape[1:]:
            row *= s
        if kind == PSUM:
            cap = c.psum_bytes_per_partition
            row_alloc = -(-row // c.psum_bank_bytes) * c.psum_bank_bytes
        else:
            cap = c.sbuf_bytes_per_partition
            row_alloc = row
        if row_alloc > cap:
            raise CapacityError(what, loc, f"tile {shape} {dt} needs {row_alloc} bytes per partition; "
                                f"{kind.upper()} has {cap} per partition on {c.core}",
                                "tile the free dimension into smaller pieces")
        site = (kind,) + frames
        s = self._sites.get(site)
        if s is None:
            s = self._sites[site] = {"kind": kind, "bufs": bufs or self.default_bufs, "count": 0, "bytes": 0,
                                     "loc": loc, "first": len(self.instrs), "last": -1}
        elif bufs:
            s["bufs"] = bufs
        slot = s["count"] % s["bufs"]
        s["count"] += 1
        s["bytes"] = max(s["bytes"], row_alloc)
        b = Buffer(len(self.buffers), name or f"t{len(self.buffers)}", kind, shape, dt,
                   self._new_phys((site, slot)), site, loc)
        b.instance = s["count"] - 1
        self.buffers.append(b)
        return Access(b)

    def _new_phys(self, key) -> int:
        p = self._phys.get(key)
        if p is None:
            p = self._phys[key] = len(self._phys)
        return p

    # -- instruction emission -------------------------------------------------------------
    def _emit(self, op, engine, reads, writes, attrs, loc, queue=None) -> Instr:
        ins = Instr(len(self.instrs), op, engine, reads, writes, attrs, loc, queue)
        self.instrs.append(ins)
        for a in reads:
            self._touch(a)
        for a in writes:
            self._touch(a)
        return ins

    def _touch(self, a: Access):
        site = a.buf.site
        if site is not None:
            s = self._sites[site]
            i = len(self.instrs) - 1
            if s["count"] - 1 - a.buf.instance >= s["bufs"]:
                ins = self.instrs[-1]
                raise CapacityError(ins.op, ins.loc, f"tile {a.buf.name} allocated at {a.buf.loc} is used after "
                                    f"{s['count'] - 1 - a.buf.instance} newer allocations at that line, but the line "
                                    f"rotates over only bufs={s['bufs']} buffers, so its memory was reused",
                                    f"pass bufs={s['count'] - a.buf.instance} (or more) to that allocation, or "
                                    f"allocate one tile with a block dimension")
            if s["last"] < 0:
                s["first"] = i
            s["last"] = max(s["last"], i)

    def retarget(self, ins: Instr, new_dst: Access) -> None:
        """Point the single output of ``ins`` at ``new_dst`` (an assignment ``tile[...] = op(...)``)."""
        old = ins.writes[0]
        if tuple(new_dst.shape) != tuple(old.shape):
            raise ShapeError(ins.op, ins.loc, f"cannot assign a result of shape {old.shape} to a view of shape "
                             f"{new_dst.shape}", "make the target slice the same shape as the value")
        self._check_dst_compatible(ins, new_dst)
        site = old.buf.site
        if site is not None:
            s = self._sites[site]
            if s["first"] >= ins.idx:      # the temporary was never used: it occupies no memory
                s["last"] = -1
        ins.writes = [new_dst] + list(ins.writes[1:])
        self._touch(new_dst)

    def _check_dst_compatible(self, ins, dst):
        if ins.engine == "dma":
            if dst.buf.kind == PSUM:
                raise MemoryKindError(ins.op, ins.loc, "DMA cannot write PSUM", "load into an SBUF tile")
        elif dst.buf.kind == HBM:
            raise MemoryKindError(ins.op, ins.loc, f"{ins.engine} engine cannot write HBM",
                                  "write an SBUF tile and store it with a DMA")
        if ins.op == "nc_matmul" or ins.op == "nc_transpose":
            self._check_matmul_dst(ins.op, ins.loc, dst, ins.attrs.get("n_free", dst.free_size))
        elif dst.buf.kind != HBM:
            self._check_partition_start(ins.op, ins.loc, dst)

    def _check_onchip(self, op, loc, *accs):
        for a in accs:
            if a.buf.kind == HBM:
                raise MemoryKindError(op, loc, f"operand {a!r} is in HBM; compute engines read SBUF/PSUM only",
                                      "load it into SBUF with nl.load / dma_copy first")

    def _check_partition_start(self, op, loc, a: Access):
        if a.buf.kind == HBM:
            return
        p0, n = a.dims[0][0], a.shape[0] if a.shape else 1
        if a.dims[0][2] != 1:
            raise PartitionError(op, loc, f"operand {a!r} strides the partition dimension",
                                 "use a unit-step partition slice")
        ok = (p0 == 0) if n > 64 else (p0 in (0, 64)) if n > 32 else (p0 in (0, 32, 64, 96))
        if not ok:
            raise PartitionError(op, loc, f"operand {a!r} spans {n} partitions starting at partition {p0}; "
                                 f"an access of >64 partitions must start at 0, 33-64 at 0/64, <=32 at 0/32/64/96",
                                 "start the partition slice on an allowed boundary")

    def _check_same_partitions(self, op, loc, *accs):
        ps = {a.shape[0] for a in accs if a.buf.kind != HBM}
        if len(ps) > 1:
            raise ShapeError(op, loc, "operands span different partition counts: "
                             + ", ".join(f"{a!r} {a.shape}" for a in accs), "slice operands to the same partitions")

    def _check_compute(self, op, loc, engine, dst, srcs, same_free=True):
        if engine not in ENGINES:
            raise ValueError(f"{op} at {loc}: unknown engine {engine!r}; choose one of {ENGINES}")
        if op == "tensor_tensor" and engine not in ("vector", "gpsimd"):
            raise IsaError(op, loc, f"tensor_tensor runs on VectorE or GpSimd, not {engine}",
                           "pass engine='vector'")
        self._check_onchip(op, loc, dst, *srcs)
        for a in (dst,) + tuple(srcs):
            self._check_partition_start(op, loc, a)
        self._check_same_partitions(op, loc, dst, *srcs)
        if same_free:
            for s in srcs:
                if s.free_size != dst.free_size:
                    raise ShapeError(op, loc, f"operand {s!r} has shape {s.shape} but destination {dst!r} has "
                                     f"shape {dst.shape}", "use operands with equal free sizes")
        if engine in ("vector", "scalar", "gpsimd"):
            for a in (dst,) + tuple(srcs):
                if a.buf.kind == PSUM and a.free_size > self.costs.vector_psum_fmax:
                    raise ShapeError(op, loc, f"PSUM operand {a!r} has {a.free_size} elements per partition; "
                                     f"{engine} engine PSUM accesses are limited to {self.costs.vector_psum_fmax}",
                                     "split the free dimension")
        if engine == "gpsimd":
            for a in (dst,) + tuple(srcs):
                if a.buf.kind == PSUM:
                    raise MemoryKindError(op, loc, f"GpSimd cannot access PSUM operand {a!r}",
                                          "use engine='vector' or 'scalar'")

    def _scalar_operand(self, op, loc, v, dst, name):
        """A per-partition scalar: a python number or a [P, 1] on-chip access."""
        if isinstance(v, Access):
            self._check_onchip(op, loc, v)
            if v.free_size != 1 or v.shape[0] != dst.shape[0]:
                raise ShapeError(op, loc, f"{name} operand {v!r} has shape {v.shape}; a per-partition scalar "
                                 f"must be ({dst.shape[0]}, 1)", "reduce or slice it to one element per partition")
            return [v]
        return []

    # -- ISA instructions -----------------------------------------------------------------
    def dma_copy(self, dst: Access, src: Access, queue_key=None, op="dma_copy") -> Instr:
        frames = _user_frames()
        loc = _fmt_loc(frames)
        self._check_dma(op, loc, dst, src)
        if tuple(dst.shape) != tuple(src.shape):
            raise ShapeError(op, loc, f"destination {dst!r} has shape {dst.shape} but source {src!r} has shape "
                             f"{src.shape}", "slice both sides to the same shape")
        return self._emit(op, "dma", [src], [dst], {}, loc, self._queue(queue_key, frames))

    def dma_transpose(self, dst: Access, src: Access, queue_key=None) -> Instr:
        op = "dma_transpose"
        frames = _user_frames()
        loc = _fmt_loc(frames)
        self._check_dma(op, loc, dst, src)
        if len(src.shape) != 2 or tuple(dst.shape) != tuple(reversed(src.shape)):
            raise ShapeError(op, loc, f"transposing {src!r} {src.shape} into {dst!r} {dst.shape}: destination must "
                             f"be the 2-D transpose of the source", "allocate the destination as (cols, rows)")
        return self._emit(op, "dma", [src], [dst], {}, loc, self._queue(queue_key, frames))

    def dma_gather(self, dst: Access, table: Access, indices: Access, queue_key=None) -> Instr:
        """dst[p, :] = table[indices[p, 0], :] (indirect DMA, one descriptor per row)."""
        op = "dma_gather"
        frames = _user_frames()
        loc = _fmt_loc(frames)
        self._check_dma(op, loc, dst, table)
        if table.buf.kind != HBM or len(table.shape) != 2:
            raise MemoryKindError(op, loc, f"gather table {table!r} must be a 2-D HBM view", "pass an HBM tensor")
        if indices.buf.kind == HBM or indices.free_size != 1:
            raise ShapeError(op, loc, f"indices {indices!r} {indices.shape} must be an on-chip (P, 1) tile",
                             "load the indices into SBUF as (rows, 1)")
        if indices.buf.dtype not in ("int32", "uint32"):
            raise DTypeError(op, loc, f"indices dtype {indices.buf.dtype}; indirect DMA takes int32/uint32",
                             "cast the index tile to int32")
        if dst.shape[0] != indices.shape[0] or dst.free_size != table.shape[1]:
            raise ShapeError(op, loc, f"destination {dst.shape} must be (len(indices)={indices.shape[0]}, "
                             f"row={table.shape[1]})", "size the destination as (indices, table columns)")
        return self._emit(op, "dma", [table, indices], [dst], {"rows": table.shape[0]}, loc,
                          self._queue(queue_key, frames))

    def _check_dma(self, op, loc, dst, src):
        for a in (dst, src):
            if a.buf.kind == PSUM:
                raise MemoryKindError(op, loc, f"DMA cannot access PSUM operand {a!r}",
                                      "copy PSUM to SBUF with tensor_copy (nl.copy) first")
        if dst.buf.kind == HBM and src.buf.kind == HBM and op != "dma_copy":
            raise MemoryKindError(op, loc, "HBM to HBM is only supported by dma_copy", "stage through SBUF")
        for a in (dst, src):
            if a.buf.kind == SBUF and a.shape[0] > self.costs.partitions:
                raise PartitionError(op, loc, f"partition dimension {a.shape[0]} exceeds maximum "
                                     f"{self.costs.partitions}", "split into tiles of <= 128 rows")
        if (dst.buf.dtype in FLOAT_TYPES) != (src.buf.dtype in FLOAT_TYPES) and op != "dma_gather":
            raise DTypeError(op, loc, f"DMA cast from {src.buf.dtype} to {dst.buf.dtype} is not supported "
                             f"(DMA casts go through FP32 between float types)", "cast on VectorE with tensor_copy")

    def _queue(self, key, loc):
        k = key if key is not None else loc
        q = self._queues.get(k)
        if q is None:
            q = self._queues[k] = len(self._queues)
        return q

    def nc_matmul(self, dst: Access, stationary: Access, moving: Access, accumulate: bool = False) -> Instr:
        """dst[M, N] (+)= stationary[K, M].T @ moving[K, N] on TensorE, accumulating FP32 in PSUM."""
        op = "nc_matmul"
        loc = _fmt_loc(_user_frames())
        c = self.costs
        for a, nm in ((stationary, "stationary"), (moving, "moving")):
            if a.buf.kind != SBUF:
                raise MemoryKindError(op, loc, f"{nm} operand {a!r} is in {a.buf.kind.upper()}; TensorE reads SBUF",
                                      "copy it to SBUF first")
            self._check_partition_start(op, loc, a)
        K, M, N = stationary.shape[0], stationary.free_size, moving.free_size
        if K > c.pe_rows:
            raise PartitionError(op, loc, f"contraction (partition) dimension {K} exceeds maximum {c.pe_rows}",
                                 "split K into chunks of <= 128 and accumulate in PSUM")
        if moving.shape[0] != K:
            raise ShapeError(op, loc, f"stationary {stationary.shape} and moving {moving.shape} contract over "
                             f"different partition counts ({K} vs {moving.shape[0]})", "slice both to the same K")
        if M > c.stationary_fmax:
            raise ShapeError(op, loc, f"stationary free size {M} exceeds maximum {c.stationary_fmax} "
                             f"(shape {stationary.shape})", "tile M into chunks of <= 128")
        if N > c.moving_fmax:
            raise ShapeError(op, loc, f"moving free size {N} exceeds maximum {c.moving_fmax} "
                             f"(shape {moving.shape})", "tile N into chunks of <= 512 (one PSUM bank of fp32)")
        sd, md = stationary.buf.dtype, moving.buf.dtype
        if not ((sd == "float32" and md == "float32") or (sd in LOW_PRECISION_MATMUL and md in LOW_PRECISION_MATMUL)):
            raise DTypeError(op, loc, f"stationary dtype {sd} and moving dtype {md}: TensorE takes both fp32 or both "
                             f"16/8-bit floats", "cast one operand (nl.copy(x, dtype=...))")
        if dst.shape[0] != M or dst.free_size != N:
            raise ShapeError(op, loc, f"destination {dst!r} has shape {dst.shape}; expected ({M}, {N})",
                             "size the PSUM tile (M, N)")
        self._check_matmul_dst(op, loc, dst, N)
        flops = 2 * K * M * N
        return self._emit(op, "tensor", [stationary, moving], [dst],
                          {"accumulate": bool(accumulate), "K": K, "M": M, "N": N, "fp32": sd == "float32",
                           "flops": flops}, loc)

    def _check_matmul_dst(self, op, loc, dst, n_free):
        c = self.costs
        if dst.buf.kind != PSUM:
            raise MemoryKindError(op, loc, f"destination {dst!r} is in {dst.buf.kind.upper()}; TensorE writes PSUM",
                                  "allocate the result with buffer=psum")
        allowed = ("float32", "bfloat16") if c.core == "NC-v4" else ("float32",)
        if op == "nc_matmul" and dst.buf.dtype not in allowed:
            raise DTypeError(op, loc, f"PSUM accumulation dtype {dst.buf.dtype}; {c.core} accumulates in "
                             f"{'/'.join(allowed)}", "allocate the PSUM tile as float32")
        _, p0, p1, b0, b1 = dst.rect()
        bank = c.psum_bank_bytes
        if b0 // bank != (b1 - 1) // bank:
            raise BankError(op, loc, f"destination {dst!r} covers PSUM bytes [{b0}, {b1}) per partition, crossing "
                            f"the {bank}-byte bank boundary at {(b0 // bank + 1) * bank}",
                            "keep each matmul output within one 2 KiB bank (<= 512 fp32 per partition)")
        self._check_partition_start(op, loc, dst)

    def nc_transpose(self, dst: Access, src: Access) -> Instr:
        """dst[F, P] = src[P, F].T on TensorE (a matmul against identity) into PSUM."""
        op = "nc_transpose"
        loc = _fmt_loc(_user_frames())
        c = self.costs
        if src.buf.kind != SBUF:
            raise MemoryKindError(op, loc, f"source {src!r} must be in SBUF", "copy it to SBUF first")
        self._check_partition_start(op, loc, src)
        P, F = src.shape[0], src.free_size
        if F > c.stationary_fmax:
            raise ShapeError(op, loc, f"free size {F} exceeds {c.stationary_fmax}; the transpose becomes the "
                             f"partition dimension", "transpose 128x128 blocks")
        if dst.shape[0] != F or dst.free_size != P:
            raise ShapeError(op, loc, f"destination {dst.shape} must be ({F}, {P})", "allocate (free, partitions)")
        self._check_matmul_dst(op, loc, dst, P)
        return self._emit(op, "tensor", [src], [dst], {"P": P, "F": F, "n_free": P}, loc)

    def tensor_tensor(self, dst, a, b, op, engine="vector") -> Instr:
        name = "tensor_tensor"
        loc = _fmt_loc(_user_frames())
        if op not in _TT_OPS:
            raise ValueError(f"{name} at {loc}: unknown op {op!r}; choose one of {sorted(_TT_OPS)}")
        self._check_compute(name, loc, engine, dst, (a, b))
        return self._emit(name, engine, [a, b], [dst], {"op": op}, loc)

    def select(self, dst, pred, on_true, on_false, engine="vector") -> Instr:
        """dst = on_true where pred != 0, else on_false (a predicated copy; NaN/inf in the unselected
        operand do not leak into the result, as they would through arithmetic masking)."""
        name = "select"
        loc = _fmt_loc(_user_frames())
        self._check_compute(name, loc, engine, dst, (pred, on_true, on_false))
        return self._emit(name, engine, [pred, on_true, on_false], [dst], {}, loc)

    def tensor_scalar(self, dst, src, op0, operand0, reverse0=False, op1=None, operand1=None, reverse1=False,
                      engine="vector") -> Instr:
        name = "tensor_scalar"
        loc = _fmt_loc(_user_frames())
        for o in (op0, op1):
            if o is not None and o not in _TT_OPS:
                raise ValueError(f"{name} at {loc}: unknown op {o!r}; choose one of {sorted(_TT_OPS)}")
        self._check_compute(name, loc, engine, dst, (src,))
        reads = [src] + self._scalar_operand(name, loc, operand0, dst, "operand0")
        if op1 is not None:
            reads += self._scalar_operand(name, loc, operand1, dst, "operand1")
        return self._emit(name, engine, reads, [dst], {"op0": op0, "operand0": operand0, "reverse0": reverse0,
                                                       "op1": op1, "operand1": operand1, "reverse1": reverse1}, loc)

    def activation(self, dst, src, func, bias=None, scale=1.0, reduce_op=None, reduce_dst=None) -> Instr:
        """dst = func(src * scale + bias) on ScalarE; with ``reduce_op`` also reduce_dst = reduce(dst) along free."""
        name = "activation_reduce" if reduce_op else "activation"
        loc = _fmt_loc(_user_frames())
        if func not in ACT_FUNCS:
            raise ValueError(f"{name} at {loc}: unknown activation {func!r}; choose one of {sorted(ACT_FUNCS)}")
        self._check_compute(name, loc, "scalar", dst, (src,))
        for a in (dst, src):
            if a.buf.dtype not in FLOAT_TYPES:
                raise DTypeError(name, loc, f"operand {a!r} dtype {a.buf.dtype}; activations take float types",
                                 "cast with tensor_copy first")
        reads = [src] + self._scalar_operand(name, loc, bias, dst, "bias") + \
            self._scalar_operand(name, loc, scale, dst, "scale")
        writes = [dst]
        if reduce_op:
            if reduce_op not in ("add", "max", "min"):
                raise ValueError(f"{name} at {loc}: reduce_op {reduce_op!r} must be add/max/min")
            if reduce_dst is None or reduce_dst.free_size != 1 or reduce_dst.shape[0] != dst.shape[0]:
                raise ShapeError(name, loc, f"reduce destination must be ({dst.shape[0]}, 1)",
                                 "allocate a (P, 1) tile for the reduction")
            self._check_onchip(name, loc, reduce_dst)
            writes.append(reduce_dst)
        return self._emit(name, "scalar", reads, writes, {"func": func, "bias": bias, "scale": scale,
                                                          "reduce_op": reduce_op}, loc)

    def tensor_reduce(self, dst, src, op, axes, engine="vector", negate=False) -> Instr:
        """dst = reduce(src) over the given free axes (tile dimensions >= 1)."""
        name = "tensor_reduce"
        loc = _fmt_loc(_user_frames())
        if op not in _REDUCE_OPS:
            raise ValueError(f"{name} at {loc}: unknown reduce op {op!r}; choose one of {sorted(_REDUCE_OPS)}")
        axes = tuple(sorted(int(x) for x in ((axes,) if isinstance(axes, int) else axes)))
        nd = len(src.shape)
        if not axes or any(x < 1 or x >= nd for x in axes):
            raise ShapeError(name, loc, f"axes {axes} of a rank-{nd} tile: reductions run over free axes "
                             f"1..{nd - 1}; the partition axis needs a matmul or partition reduce",
                             "transpose or reduce across partitions with a ones-matmul")
        keep = 1
        for i, s in enumerate(src.shape[1:], start=1):
            if i not in axes:
                keep *= s
        self._check_compute(name, loc, engine, dst, (src,), same_free=False)
        if dst.free_size != keep:
            raise ShapeError(name, loc, f"destination {dst.shape} must hold {keep} elements per partition "
                             f"after reducing {src.shape} over axes {axes}", "size the destination accordingly")
        return self._emit(name, engine, [src], [dst], {"op": op, "axes": axes, "negate": negate}, loc)

    def tensor_copy(self, dst, src, engine="vector") -> Instr:
        name = "tensor_copy"
        loc = _fmt_loc(_user_frames())
        self._check_compute(name, loc, engine, dst, (src,))
        return self._emit(name, engine, [src], [dst], {}, loc)

    def memset(self, dst, value, engine="vector") -> Instr:
        name = "memset"
        loc = _fmt_loc(_user_frames())
        self._check_compute(name, loc, engine, dst, ())
        return self._emit(name, engine, [], [dst], {"value": value}, loc)

    def iota(self, dst, base=0, partition_step=0, free_step=1) -> Instr:
        """dst[p, f] = base + partition_step * p + free_step * f (flattened free index) on GpSimd."""
        name = "iota"
        loc = _fmt_loc(_user_frames())
        self._check_compute(name, loc, "gpsimd", dst, ())
        return self._emit(name, "gpsimd", [], [dst], {"base": base, "partition_step": partition_step,
                                                      "free_step": free_step}, loc)

    # -- finishing ------------------------------------------------------------------------
    def set_outputs(self, outs: Sequence[Access]) -> None:
        self.outputs = [o.buf for o in outs]

    def finish(self) -> Program:
        self._check_capacity()
        return Program(self.name, self.costs.profile, self.buffers, self.instrs, self.inputs, self.outputs,
                       dict(self._sites))

    def _check_capacity(self):
        c = self.costs
        for kind, cap, unit in ((SBUF, c.sbuf_bytes_per_partition, "bytes"), (PSUM, c.psum_bytes_per_partition, "bytes")):
            events = []
            for key, s in self._sites.items():
                if s["kind"] != kind or s["last"] < 0:
                    continue
                foot = s["bufs"] * s["bytes"]
                events.append((s["first"], foot, key))
                events.append((s["last"] + 1, -foot, key))
            events.sort(key=lambda e: (e[0], e[1]))
            live, peak, at = 0, 0, 0
            for idx, d, _ in events:
                live += d
                if live > peak:
                    peak, at = live, idx
            if peak > cap:
                ins = self.instrs[min(at, len(self.instrs) - 1)]
                live_sites = sorted(((s["bufs"] * s["bytes"], s["bufs"], s["bytes"], s["loc"])
                                     for s in self._sites.values()
                                     if s["kind"] == kind and s["first"] <= at <= s["last"]), reverse=True)[:4]
                desc = "; ".join(f"{loc}: {b} x {nb} B" for _, b, nb, loc in live_sites)
                raise CapacityError(ins.op, ins.loc, f"{kind.upper()} needs {peak} bytes per partition at this "
                                    f"instruction but {c.core} has {cap} (largest live tiles, bufs x bytes: {desc})",
                                    "reduce tile sizes or pass a smaller bufs= to the largest allocations")
