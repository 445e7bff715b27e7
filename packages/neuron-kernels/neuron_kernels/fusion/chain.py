# Copyright 2026 The neuron-kernels Authors. Licensed under the Apache License, Version 2.0.
"""A fusable chain: pointwise and last-axis reduction steps over one [rows, cols] iteration space.

The chain is plain data (frozen, hashable: it is the generated kernel's cache key). Every value
has a layout relative to the iteration space:

- ``full``: [rows, cols], rows on partitions;
- ``col``: [rows, 1], one value per row (a reduction's result, a keepdim statistic);
- ``row``: [cols], the same row for every row (a bias or weight vector; inputs only);
- ``scalar``: [1], one value (inputs only).

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
LAYOUTS = ("full", "col", "row", "scalar")
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
                    kinds.append("full" if lay == "row" else "col" if lay == "scalar" else lay)
                elif a[0] == "v":
                    if not 0 <= a[1] < i:
                        raise ChainError(f"step {i} ({s.op}) reads step {a[1]}, which does not precede it")
                    kinds.append(out[a[1]])
                elif a[0] != "c":
                    raise ChainError(f"step {i} ({s.op}) has an operand of kind {a[0]!r}")
            if s.op in POINTWISE:
                if len(s.args) != POINTWISE[s.op]:
                    raise ChainError(f"step {i}: {s.op} takes {POINTWISE[s.op]} operands, got {len(s.args)}")
                if not kinds:
                    raise ChainError(f"step {i}: {s.op} has only immediate operands")
                out.append("full" if "full" in kinds else "col")
            elif s.op in REDUCTIONS:
                if kinds != ["full"]:
                    raise ChainError(f"step {i}: {s.op} reduces a full [rows, cols] value, got {kinds}")
                out.append("col")
            else:
                raise ChainError(f"step {i}: op {s.op!r} has no fused form; fusable ops: "
                                 f"{sorted(POINTWISE) + sorted(REDUCTIONS)}")
        for o in self.outputs:
            if not 0 <= o < len(self.steps):
                raise ChainError(f"output {o} is not a step of the chain ({len(self.steps)} steps)")
        return tuple(out)

    def describe(self) -> str:
        """One line: the ops in order, e.g. ``sub > exp > sum > div``."""
        return " > ".join(s.op for s in self.steps)
