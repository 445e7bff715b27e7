# Copyright 2026 The neuron-kernels Authors. Licensed under the Apache License, Version 2.0.
"""Chain -> tile-language source -> ``@jit`` kernel.

The generator writes the kernel as Python source (``kernel_source``, the dumpable form) with one
source line per step: the tile allocator rotates buffers per allocation line, so each step owns
its tiles and row block i+1 double-buffers against row block i. Rows go on partitions in blocks
of 128; the whole row (``cols`` elements) stays in one tile, so a row reduction is one
instruction and every intermediate value stays on chip: HBM is read once per input and written
once per output.
"""
from __future__ import annotations

import functools
import linecache

from .. import language as nl
from ..kernels._tiling import P
from .chain import REDUCTIONS, Chain, ChainError

# A whole row per tile; wider rows would need a second pass over the free dimension.
MAX_COLS = 8192
# Free-dimension chunk of a flat (pointwise-only) chain: small enough that every step's tile,
# double-buffered, fits in SBUF for long chains, large enough to amortise instruction overhead.
FLAT_CHUNK = 512


def is_flat(chain: Chain) -> bool:
    """Pointwise-only chains over full and scalar inputs ignore the row structure: they are tiled
    over the flat element space, 128 partitions wide, whatever the row length."""
    return (not any(s.op in REDUCTIONS for s in chain.steps)
            and all(o.layout in ("full", "scalar") for o in chain.inputs)
            and (chain.rows * chain.cols) % P == 0)


def _imm(x: float) -> str:
    return repr(float(x))


def kernel_source(chain: Chain, name: str) -> str:
    """The generated kernel's source text (a function ``name`` over the chain's HBM inputs)."""
    layouts = chain.layouts()
    if chain.cols > MAX_COLS:
        raise ChainError(f"rows of {chain.cols} elements exceed the fused kernel's {MAX_COLS}-element row tile")
    R, C = chain.rows, chain.cols
    flat = is_flat(chain)
    args = ", ".join(f"in{i}" for i in range(len(chain.inputs))) or ""
    lines = [f"def {name}({args}):"]
    for k, o in enumerate(chain.outputs):
        shape = (R, C) if layouts[o] == "full" else (R, 1)
        lines.append(f"    out{k} = nl.ndarray({shape}, {chain.steps[o].dtype!r}, buffer=nl.shared_hbm)")
    used = sorted({a[1] for s in chain.steps for a in s.args if a[0] == "in"})
    if flat:
        F = R * C // P
        for i in used:
            if chain.inputs[i].layout == "full":
                lines.append(f"    in{i} = in{i}.reshape(({P}, {F}))")
        for k in range(len(chain.outputs)):
            lines.append(f"    out{k}_flat = out{k}.reshape(({P}, {F}))")
        lines.append(f"    for f0 in range(0, {F}, {FLAT_CHUNK}):")
        lines.append(f"        fs = min({FLAT_CHUNK}, {F} - f0)")
        block, rs, store = "[:, f0:f0 + fs]", str(P), "_flat[:, f0:f0 + fs]"
    else:
        lines.append(f"    for r0 in range(0, {R}, {P}):")
        lines.append(f"        rs = min({P}, {R} - r0)")
        block, rs, store = "[r0:r0 + rs, :]", "rs", "[r0:r0 + rs, :]"
    for i in used:
        lay = chain.inputs[i].layout
        src = f"in{i}{block}" if lay in ("full", "col") else f"in{i}.broadcast_partitions({rs})"
        lines.append(f"        x{i} = nl.load({src})")

    def operand(a):
        return f"x{a[1]}" if a[0] == "in" else f"v{a[1]}" if a[0] == "v" else _imm(a[1])

    for j, s in enumerate(chain.steps):
        ops = [operand(a) for a in s.args]
        if s.op in REDUCTIONS:
            lines.append(f"        v{j} = nl.{s.op}({ops[0]}, axis=1, dtype={s.dtype!r})")
        elif s.op == "copy":
            lines.append(f"        v{j} = nl.copy({ops[0]}, dtype={s.dtype!r})")
        else:
            lines.append(f"        v{j} = nl.{s.op}({', '.join(ops)}, dtype={s.dtype!r})")
    for k, o in enumerate(chain.outputs):
        lines.append(f"        nl.store(out{k}{store}, v{o})")
    lines.append("    return " + (", ".join(f"out{k}" for k in range(len(chain.outputs))) or "None"))
    return "\n".join(lines) + "\n"


@functools.lru_cache(maxsize=512)
def generate(chain: Chain, name: str = "fused") -> nl.Kernel:
    """The chain as a traced-on-demand tile kernel (``.programs``, ``.schedule``, ``.run``)."""
    src = kernel_source(chain, name)
    filename = f"<neuron_kernels.fusion {name} {abs(hash(chain)):x}>"
    # Registered with linecache so tracebacks and the allocator's locations show the generated line.
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    scope = {"nl": nl}
    exec(compile(src, filename, "exec"), scope)  # noqa: S102 - source generated above from plain data
    return nl.jit(scope[name])
