# Copyright 2026 The neuron-sim Authors. Licensed under the Apache License, Version 2.0.
"""The instruction stream: instructions over ``Access`` views and the ``Program`` that holds them.

A ``Program`` is the intermediate form between a traced kernel and the two back ends
(``execute`` for values, ``schedule`` for time). ``builder.ProgramBuilder`` appends one
instruction per ISA call and checks it; the views are in ``access``.
"""

from __future__ import annotations

from .access import HBM, Access

ENGINES = ("tensor", "vector", "scalar", "gpsimd")


class Instr:
    """One ISA instruction. ``reads``/``writes`` are Accesses; ``attrs`` holds the op's parameters."""

    __slots__ = ("idx", "op", "engine", "reads", "writes", "attrs", "loc", "queue")

    def __init__(self, idx, op, engine, reads, writes, attrs, loc, queue=None):
        self.idx = idx
        self.op = op
        self.engine = engine
        self.reads = reads
        self.writes = writes
        self.attrs = attrs
        self.loc = loc
        self.queue = queue

    def __repr__(self):
        a = " ".join(f"{k}={v!r}" for k, v in self.attrs.items() if not isinstance(v, Access))
        w = ", ".join(map(repr, self.writes))
        r = ", ".join(map(repr, self.reads))
        q = f"[q{self.queue}]" if self.queue is not None else ""
        return f"{self.idx:5d} {self.engine:7s}{q} {self.op:16s} {w} <- {r} {a}".rstrip()


class Program:
    """A traced kernel: buffers, an instruction stream, inputs and outputs (pure data)."""

    def __init__(self, name, profile, buffers, instrs, inputs, outputs, sites):
        self.name = name
        self.profile = profile
        self.buffers = buffers
        self.instrs = instrs
        self.inputs = inputs
        self.outputs = outputs
        self.sites = sites

    def dump(self) -> str:
        lines = [f"program {self.name} profile={self.profile}"]
        lines.append("inputs: " + ", ".join(map(repr, self.inputs)))
        lines.append("outputs: " + ", ".join(map(repr, self.outputs)))
        for b in self.buffers:
            if b.kind != HBM:
                lines.append(f"  alloc {b!r} phys={b.phys} at {b.loc}")
        lines.extend(repr(i) for i in self.instrs)
        return "\n".join(lines)

    def __len__(self):
        return len(self.instrs)
