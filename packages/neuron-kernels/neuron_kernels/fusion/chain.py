# Copyright 2026 The neuron-kernels Authors. Licensed under the Apache License, Version 2.0.
"""A fusable chain: pointwise and last-axis reduction steps over one [rows, cols] iteration space.

The chain is plain data (frozen, hashable: it is the generated kernel's cache key). Every value
has a layout relative to the iteration space:

- ``full``: [rows, cols], rows on partitions;
- ``col``: [rows, 1], one value per row (a reduction's result, a keepdim statistic);
- ``row``: [cols], the same row for every row (a bias or weight vector as an input; as a step,
  a sum over the rows, e.g. a bias or norm-weight gradient, which is only stored);
- ``scalar``: [1], one value (inputs only);
- ``lhs``: [rows, contract] and ``rhs``: [contract, cols], the operands of a matmul that computes
  the chain's first step (a matmul epilogue: bias, activation, residual add, norm and casts are
  applied to the product before it leaves the chip).

Steps read inputs (``("in", i)``), earlier steps (``("v", j)``) or immediates (``("c", x)``).
"""
from __future__ import annotations

import dataclasses

# op -> number of operands. Pointwise ops keep layouts (full if any operand is full);
# reductions take a full operand to a col result.
POINTWISE = {
    "add": 2, "subtract": 2, "multiply": 2, "divide": 2, "maximum": 2, "minimum": 2, "power": 2,
    "greater": 2, "greater_equal": 2, "less": 2, "less_equal": 2, "equal": 2, "not_equal": 2,
    "exp": 1, "log": 1, "tanh": 1, "sigmoid": 1, "relu": 1, "gelu": 1, "gelu_apprx_tanh": 1, "silu": 1,
    "sqrt": 1, "rsqrt": 1, "square": 1, "abs": 1, "negative": 1, "reciprocal": 1, "erf": 1, "sin": 1,
    "cos": 1, "sign": 1, "copy": 1,
}
REDUCTIONS = {"sum": 1, "max": 1, "min": 1, "mean": 1}
# Reductions over the rows (the partition axis): a full value -> one row, complete only after the
# last row block, so a chain stores it and no later step reads it.
ROW_REDUCTIONS = {"sum_rows": 1}
LAYOUTS = ("full", "col", "row", "scalar", "lhs", "rhs")
MATMUL = "matmul"   # step 0 only: ("in", lhs), ("in", rhs) -> full [rows, cols], fp32 accumulation
DTYPES = ("float32", "bfloat16", "float16")


class ChainError(ValueError):
    """The chain is not one the generator can turn into a kernel (op, layout or dtype)."""


@dataclasses.dataclass(frozen=True)
class Operand:
    layout: str
    dtype: str


@dataclasses.dataclass(frozen=True)
class Step:
    op: str
    args: tuple      # ("in", i) | ("v", j) | ("c", float)
    dtype: str       # element type of the result (rounding point, as the unfused op's output)


@dataclasses.dataclass(frozen=True)
class Chain:
    rows: int
    cols: int
    inputs: tuple    # Operand per HBM input, in argument order
    steps: tuple     # Step, in execution order
    outputs: tuple   # step indices stored to HBM, in result order
    contract: int = 0  # K of the matmul computing step 0 (0: the chain has no matmul)

    def input_shape(self, i: int) -> tuple:
        """The HBM shape of input ``i`` as the kernel reads it."""
        return {"full": (self.rows, self.cols), "col": (self.rows, 1), "row": (self.cols,), "scalar": (1,),
                "lhs": (self.rows, self.contract), "rhs": (self.contract, self.cols)}[self.inputs[i].layout]

    def output_shape(self, k: int) -> tuple:
        lay = self.layouts()[self.outputs[k]]
        return {"full": (self.rows, self.cols), "col": (self.rows, 1), "row": (self.cols,)}[lay]

    def layouts(self) -> tuple[str, ...]:
        """Each step's layout ("full" or "col"); raises ChainError for an unsupported chain."""
        if self.rows < 1 or self.cols < 1:
            raise ChainError(f"empty iteration space [{self.rows}, {self.cols}]")
        out: list[str] = []
        for i, s in enumerate(self.steps):
            if s.dtype not in DTYPES:
                raise ChainError(f"step {i} ({s.op}) has element type {s.dtype}; fused steps compute {DTYPES}")
            kinds = []
            for a in s.args:
                if a[0] == "in":
                    if not 0 <= a[1] < len(self.inputs):
                        raise ChainError(f"step {i} ({s.op}) reads input {a[1]} of {len(self.inputs)}")
                    lay = self.inputs[a[1]].layout
                    if lay not in LAYOUTS:
                        raise ChainError(f"input {a[1]} has layout {lay!r}; layouts: {LAYOUTS}")
                    if lay in ("lhs", "rhs") and s.op != MATMUL:
                        raise ChainError(f"step {i} ({s.op}) reads matmul operand {a[1]}; only step 0 "
                                         f"({MATMUL}) reads {lay} inputs")
                    kinds.append("full" if lay == "row" else "col" if lay == "scalar" else lay)
                elif a[0] == "v":
                    if not 0 <= a[1] < i:
                        raise ChainError(f"step {i} ({s.op}) reads step {a[1]}, which does not precede it")
                    if out[a[1]] == "row":
                        raise ChainError(f"step {i} ({s.op}) reads step {a[1]}, a sum over the rows, which is "
                                         "complete only after the last row block; store it instead")
                    kinds.append(out[a[1]])
                elif a[0] != "c":
                    raise ChainError(f"step {i} ({s.op}) has an operand of kind {a[0]!r}")
            if s.op == MATMUL:
                if i != 0 or kinds != ["lhs", "rhs"] or self.contract < 1:
                    raise ChainError(f"step {i}: {MATMUL} must be step 0 and read an lhs and an rhs input with "
                                     f"contract >= 1, got {kinds}, contract {self.contract}")
                out.append("full")
            elif s.op in POINTWISE:
                if len(s.args) != POINTWISE[s.op]:
                    raise ChainError(f"step {i}: {s.op} takes {POINTWISE[s.op]} operands, got {len(s.args)}")
                if not kinds:
                    raise ChainError(f"step {i}: {s.op} has only immediate operands")
                out.append("full" if "full" in kinds else "col")
            elif s.op in REDUCTIONS:
                if kinds != ["full"]:
                    raise ChainError(f"step {i}: {s.op} reduces a full [rows, cols] value, got {kinds}")
                out.append("col")
            elif s.op in ROW_REDUCTIONS:
                if kinds != ["full"]:
                    raise ChainError(f"step {i}: {s.op} reduces a full [rows, cols] value, got {kinds}")
                out.append("row")
            else:
                raise ChainError(f"step {i}: op {s.op!r} has no fused form; fusable ops: "
                                 f"{sorted(POINTWISE) + sorted(REDUCTIONS) + sorted(ROW_REDUCTIONS)}")
        for o in self.outputs:
            if not 0 <= o < len(self.steps):
                raise ChainError(f"output {o} is not a step of the chain ({len(self.steps)} steps)")
        return tuple(out)

    def describe(self) -> str:
        """One line: the ops in order, e.g. ``sub > exp > sum > div``."""
        return " > ".join(s.op for s in self.steps)
