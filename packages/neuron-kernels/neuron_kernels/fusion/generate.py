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
import re

from .. import language as nl
from ..kernels._tiling import P
from .chain import MATMUL, REDUCTIONS, ROW_REDUCTIONS, Chain, ChainError

# A whole row per tile; wider rows would need a second pass over the free dimension.
MAX_COLS = 8192
# Free-dimension chunk of a flat (pointwise-only) chain: small enough that every step's tile,
# double-buffered, fits in SBUF for long chains, large enough to amortise instruction overhead.
FLAT_CHUNK = 512
# Row blocks computed side by side per loop iteration (see ``_interleave``).
LANES = 2
# Sums over rows: columns per matmul (one 2 KiB PSUM bank of fp32) and the PSUM banks they may use
# (8 per partition, C §4.1; the rest stay free for the chain's other tiles).
ROW_SUM_CHUNK = 512
ROW_SUM_BANKS = 6
# SBUF bytes per partition for a fused matmul's resident rhs (the library GEMM's moving budget).
MATMUL_RHS_BUDGET = 64 * 1024


def is_flat(chain: Chain) -> bool:
    """Pointwise-only chains over full and scalar inputs ignore the row structure: they are tiled
    over the flat element space, 128 partitions wide, whatever the row length."""
    return (not chain.contract and not any(s.op in REDUCTIONS or s.op in ROW_REDUCTIONS for s in chain.steps)
            and all(o.layout in ("full", "scalar") for o in chain.inputs)
            and (chain.rows * chain.cols) % P == 0)


def _imm(x: float) -> str:
    return repr(float(x))


# ScalarE activation functions a unary step maps to; they fold a preceding x * scale + bias.
ACTIVATIONS = frozenset(["exp", "log", "tanh", "sigmoid", "relu", "gelu", "gelu_apprx_tanh", "silu", "sqrt",
                         "rsqrt", "square", "abs", "negative", "reciprocal", "erf", "sin", "cos", "sign"])
# Binary ops an ALU instruction applies against a per-partition scalar or an immediate.
SCALAR_OPS = frozenset(["add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "greater",
                        "greater_equal", "less", "less_equal", "equal", "not_equal"])
# Engine clocks (GHz, trn2) and the ~60-cycle access overhead per instruction, for balancing the
# chain's instructions over the engines that can run them (timing model, C §4.3/§4.4).
_GHZ = {"vector": 0.96, "gpsimd": 1.2, "scalar": 1.2}
_ACCESS = 60


class _Plan:
    """The chain's steps as instructions: each ``ins`` entry emits one ISA instruction for one or
    more steps. Only float32 intermediates with a single reader are folded into their reader, so
    every rounding point of the unfused ops is kept."""

    def __init__(self, chain: Chain, layouts):
        self.chain, self.layouts = chain, layouts
        self.uses = [0] * len(chain.steps)
        for s in chain.steps:
            for a in s.args:
                if a[0] == "v":
                    self.uses[a[1]] += 1
        for o in chain.outputs:
            self.uses[o] += 2
        self.ins: dict[int, dict] = {}     # step -> instruction producing v{step}
        self.folded: set[int] = set()

    def kind(self, a) -> str:
        if a[0] == "c":
            return "imm"
        if a[0] == "v":
            return self.layouts[a[1]]
        lay = self.chain.inputs[a[1]].layout
        return "full" if lay == "row" else "col" if lay == "scalar" else lay

    def scalar_form(self, j):
        """(tensor operand, op, scalar operand, reverse) when step j is one tensor_scalar op."""
        s = self.chain.steps[j]
        if s.op not in SCALAR_OPS or len(s.args) != 2:
            return None
        a, b = s.args
        ka, kb = self.kind(a), self.kind(b)
        lay = self.layouts[j]

        def scalar_ok(k):
            return k == "imm" or (k == "col" and lay == "full")

        if ka == lay and scalar_ok(kb):
            return a, s.op, b, False
        if kb == lay and scalar_ok(ka):
            return b, s.op, a, True
        return None

    def foldable(self, a) -> bool:
        """v{i} may be computed inside its only reader (not stored, not read twice, fp32)."""
        return (a[0] == "v" and self.uses[a[1]] == 1 and a[1] not in self.folded
                and self.chain.steps[a[1]].dtype == "float32" and self.ins.get(a[1], {}).get("kind") == "ts"
                and self.ins[a[1]].get("op1") is None)

    def build(self):
        for j, s in enumerate(self.chain.steps):
            if s.op == MATMUL:
                self.ins[j] = {"kind": "matmul", "lhs": s.args[0][1], "rhs": s.args[1][1]}
            elif s.op in REDUCTIONS:
                self.ins[j] = self._reduction(j)
            elif s.op in ROW_REDUCTIONS:
                self.ins[j] = {"kind": "rowsum", "src": s.args[0]}
            elif s.op in ACTIVATIONS:
                self.ins[j] = self._activation(j)
            elif self.scalar_form(j) is not None:
                self.ins[j] = self._tensor_scalar(j)
            elif s.op == "copy":
                self.ins[j] = {"kind": "copy", "src": s.args[0]}
            else:
                self.ins[j] = {"kind": "tt", "args": s.args}
        return self

    def _fold(self, i):
        self.folded.add(i)
        return self.ins[i]

    def _activation(self, j):
        x = self.chain.steps[j].args[0]
        scale, bias = ("c", 1.0), None
        if self.foldable(x):
            t = self.ins[x[1]]
            if t["op0"] == "add" or (t["op0"] == "subtract" and not t["rev0"] and t["operand0"][0] == "c"):
                self._fold(x[1])
                bias = t["operand0"] if t["op0"] == "add" else ("c", -t["operand0"][1])
                x = t["src"]
                if self.foldable(x):
                    t = self.ins[x[1]]
                    if t["op0"] == "multiply":
                        self._fold(x[1])
                        scale, x = t["operand0"], t["src"]
            elif t["op0"] == "multiply":
                self._fold(x[1])
                scale, x = t["operand0"], t["src"]
        return {"kind": "act", "func": self.chain.steps[j].op, "src": x, "scale": scale, "bias": bias}

    def _tensor_scalar(self, j):
        x, op, c, rev = self.scalar_form(j)
        if self.foldable(x):
            t = self._fold(x[1])
            return {"kind": "ts", "src": t["src"], "op0": t["op0"], "operand0": t["operand0"], "rev0": t["rev0"],
                    "op1": op, "operand1": c, "rev1": rev}
        return {"kind": "ts", "src": x, "op0": op, "operand0": c, "rev0": rev, "op1": None}

    def _reduction(self, j):
        s = self.chain.steps[j]
        x = s.args[0]
        # exp > sum and friends: ScalarE reduces along the free axis as it writes the activation.
        if (s.op == "sum" and s.dtype == "float32" and x[0] == "v" and self.ins[x[1]]["kind"] == "act"
                and "reduce" not in self.ins[x[1]] and self.layouts[x[1]] == "full"):
            self.ins[x[1]]["reduce"] = j
            return {"kind": "fused_reduce", "of": x[1]}
        return {"kind": "reduce", "src": x}

    def engines(self, flat_free: int) -> dict[int, str]:
        """Each instruction's engine: ScalarE for activations, VectorE for reductions, the least
        loaded of the capable engines for the rest (estimated busy time per row block)."""
        load = dict.fromkeys(_GHZ, 0.0)
        out = {}
        flexible = []
        for j, ins in self.ins.items():
            if j in self.folded or ins["kind"] in ("fused_reduce", "rowsum"):
                continue
            n = 1 if self.layouts[j] == "col" else flat_free
            kind = ins["kind"]
            if kind == "act":
                cands = ("scalar",)
            elif kind == "matmul":       # the PSUM eviction (GpSimd cannot read PSUM)
                cands = ("vector", "scalar")
            elif kind == "reduce":
                cands = ("vector",)
            elif kind == "tt":
                cands = ("vector", "gpsimd")
            else:
                cands = ("vector", "gpsimd", "scalar")
            costs = {}
            for e in cands:
                cyc = max(64, n * (2 if kind == "tt" else 1))
                if e == "vector" and kind in ("ts", "copy") and self.chain.steps[j].dtype in ("bfloat16", "float16") \
                        and all(self._dtype(a) in ("bfloat16", "float16") for a in self._reads(ins)):
                    cyc = max(64, cyc / 4)
                costs[e] = (cyc + _ACCESS) / _GHZ[e]
            if len(cands) == 1:
                load[cands[0]] += costs[cands[0]]
                out[j] = cands[0]
            else:
                flexible.append((j, costs))
        # Longest first onto the engine that finishes it earliest (the pipelined row blocks are
        # bound by the busiest engine, not by step order).
        for j, costs in sorted(flexible, key=lambda jc: -min(jc[1].values())):
            best = min(costs, key=lambda e: (load[e] + costs[e], e != "vector"))
            load[best] += costs[best]
            out[j] = best
        return out

    def _reads(self, ins):
        if ins["kind"] == "tt":
            return [a for a in ins["args"] if a[0] != "c"]
        return [ins["src"]]

    def _dtype(self, a):
        return _src_dtype(self.chain, a)


def _matmul_dtype(chain: Chain) -> str:
    a, b = (chain.inputs[x[1]].dtype for x in chain.steps[0].args)
    return "float32" if "float32" in (a, b) else a


def _matmul_head(chain: Chain, row_sum_banks: int) -> list[str]:
    """The resident rhs [contract, cols], loaded once (as the library GEMM's moving block, F §7)."""
    K, C = chain.contract, chain.cols
    KT = -(-K // P)
    cdt = _matmul_dtype(chain)
    size = 2 if cdt in ("bfloat16", "float16") else 4
    if KT * C * size > MATMUL_RHS_BUDGET:
        raise ChainError(f"a resident rhs of [{K}, {C}] {cdt} needs {KT * C * size} bytes per partition; the fused "
                         f"matmul keeps at most {MATMUL_RHS_BUDGET}")
    banks = LANES * 2 * -(-C // ROW_SUM_CHUNK)
    if banks + row_sum_banks > 8:
        raise ChainError(f"a fused matmul with {C} columns needs {banks} PSUM banks (+{row_sum_banks} for sums over "
                         "rows); a partition has 8")
    b = chain.steps[0].args[1][1]
    lines = [f"    rhs = nl.ndarray(({P}, {KT}, {C}), {cdt!r}, buffer=nl.sbuf, bufs=1)"]
    for kt in range(KT):
        k0, ks = kt * P, min(P, K - kt * P)
        lines.append(f"    rhs[:{ks}, {kt}, :] = nl.load(in{b}[{k0}:{k0 + ks}, :], dtype={cdt!r})")
    return lines


def _matmul_body(chain: Chain, ins: dict, dt: str, engine: str) -> list[str]:
    """Step 0 for one row block: lhs^T through DMA transposes, the product in PSUM (fp32, 512-column
    banks), evicted to SBUF in the step's dtype for the epilogue steps."""
    K, C = chain.contract, chain.cols
    KT = -(-K // P)
    cdt = _matmul_dtype(chain)
    a = ins["lhs"]
    lines = [f"        x{a} = nl.ndarray(({P}, {KT}, {P}), {cdt!r})"]
    for kt in range(KT):
        k0, ks = kt * P, min(P, K - kt * P)
        lines.append(f"        x{a}[:{ks}, {kt}, :rs] = nl.load_transpose2d(in{a}[r0:r0 + rs, {k0}:{k0 + ks}], "
                     f"dtype={cdt!r})")
    lines.append(f"        p0 = nl.ndarray((rs, {C}), 'float32', buffer=nl.psum)")
    for j0 in range(0, C, ROW_SUM_CHUNK):
        js = min(ROW_SUM_CHUNK, C - j0)
        for kt in range(KT):
            ks = min(P, K - kt * P)
            lines.append(f"        nl.isa.nc_matmul(p0[:, {j0}:{j0 + js}], x{a}[:{ks}, {kt}, :rs], "
                         f"rhs[:{ks}, {kt}, {j0}:{j0 + js}], accumulate={kt > 0})")
    lines.append(f"        v0 = nl.copy(p0, dtype={dt}, engine={engine!r})")
    return lines


def _src_dtype(chain: Chain, a) -> str:
    return chain.steps[a[1]].dtype if a[0] == "v" else chain.inputs[a[1]].dtype


_LANE_NAMES = re.compile(r"\b(x\d+|v\d+|p\d+|f0|fs|r0|rs)\b")


def _interleave(body: list[str], guard: str) -> list[str]:
    """The loop body once per lane (row block), statement by statement: each engine runs its
    instructions in order, so interleaving two independent blocks lets one block's instruction
    fill the wait on the other's dependency (software pipelining)."""
    lanes = []
    for ln in range(LANES):
        def rename(m, ln=ln):
            w = m.group(1)
            return f"{w[0]}{ln}" if w in ("f0", "r0") else f"{w}{ln}" if w in ("fs", "rs") else f"{w}_{ln}"
        lanes.append([_LANE_NAMES.sub(rename, line) for line in body])
    out = []
    for i in range(len(body)):
        for ln in range(LANES):
            line = lanes[ln][i]
            out.append(line if ln == 0 else f"        if {guard}{ln} > 0: {line.strip()}")
    return out


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
        lines.append(f"    out{k} = nl.ndarray({chain.output_shape(k)}, {chain.steps[o].dtype!r}, buffer=nl.shared_hbm)")
    # Sums over the rows: a ones-vector matmul per row block on TensorE ([rs, 1].T @ [rs, cols]),
    # accumulating in one PSUM row across row blocks (C §4.3: TensorE contracts over partitions).
    row_sums = [j for j, s in enumerate(chain.steps) if s.op in ROW_REDUCTIONS]
    banks = sum(-(-C // ROW_SUM_CHUNK) for _ in row_sums)
    if banks > ROW_SUM_BANKS:
        raise ChainError(f"{len(row_sums)} sums over rows of {C} elements need {banks} PSUM banks; the fused "
                         f"kernel keeps at most {ROW_SUM_BANKS} for them")
    for dt in sorted({_src_dtype(chain, chain.steps[j].args[0]) for j in row_sums}):
        lines.append(f"    ones_{dt} = nl.full(({P}, 1), 1.0, {dt!r})")
    for j in row_sums:
        lines.append(f"    acc{j} = nl.ndarray((1, {C}), 'float32', buffer=nl.psum, bufs=1)")
    if chain.contract:
        lines += _matmul_head(chain, banks)
    used = sorted({a[1] for s in chain.steps for a in s.args if a[0] == "in"
                   and chain.inputs[a[1]].layout not in ("lhs", "rhs")})
    plan = _Plan(chain, layouts).build()
    # Row vectors (bias, norm weights) are the same in every row block: loaded into the partitions
    # once, before the row loop, instead of a partition-broadcast DMA per block.
    vectors = [i for i in used if chain.inputs[i].layout not in ("full", "col")]
    for i in vectors:
        lines.append(f"    bc{i} = nl.load(in{i}.broadcast_partitions({P if flat else min(R, P)}))")
    if flat:
        F = R * C // P
        for i in used:
            if chain.inputs[i].layout == "full":
                lines.append(f"    in{i} = in{i}.reshape(({P}, {F}))")
        for k in range(len(chain.outputs)):
            lines.append(f"    out{k}_flat = out{k}.reshape(({P}, {F}))")
        lines.append(f"    for f0 in range(0, {F}, {LANES * FLAT_CHUNK}):")
        for ln in range(LANES):
            lines += [f"        f{ln} = f0 + {ln * FLAT_CHUNK}"] if ln else []
            lines.append(f"        fs{ln} = min({FLAT_CHUNK}, {F} - f{ln})")
        block, rs, store = "[:, f0:f0 + fs]", str(P), "_flat[:, f0:f0 + fs]"
        free = min(FLAT_CHUNK, F)
        guard = "fs"
    else:
        lines.append(f"    for r0 in range(0, {R}, {LANES * P}):")
        for ln in range(LANES):
            lines += [f"        r{ln} = r0 + {ln * P}"] if ln else []
            lines.append(f"        rs{ln} = min({P}, {R} - r{ln})")
        block, rs, store = "[r0:r0 + rs, :]", "rs", "[r0:r0 + rs, :]"
        free = C
        guard = "rs"
    engine = plan.engines(free)
    head, lines = lines, []
    for i in used:
        lines.append(f"        x{i} = bc{i}[:{rs}]" if i in vectors else f"        x{i} = nl.load(in{i}{block})")

    def operand(a):
        return f"x{a[1]}" if a[0] == "in" else f"v{a[1]}" if a[0] == "v" else _imm(a[1])

    for j, s in enumerate(chain.steps):
        ins = plan.ins[j]
        kind = ins["kind"]
        if j in plan.folded or kind == "fused_reduce":
            continue
        dt = repr(s.dtype)
        eng = engine.get(j)
        if kind == "matmul":
            lines += _matmul_body(chain, ins, repr(s.dtype), engine[j])
        elif kind == "rowsum":
            src = operand(ins["src"])
            ones = f"ones_{_src_dtype(chain, ins['src'])}"
            for c0 in range(0, C, ROW_SUM_CHUNK):
                cs = min(ROW_SUM_CHUNK, C - c0)
                lines.append(f"        nl.isa.nc_matmul(acc{j}[:, {c0}:{c0 + cs}], {ones}[:rs, :], "
                             f"{src}[:, {c0}:{c0 + cs}], accumulate=r0 > 0)")
        elif kind == "reduce":
            lines.append(f"        v{j} = nl.{s.op}({operand(ins['src'])}, axis=1, dtype={dt})")
        elif kind == "act":
            red = ins.get("reduce")
            if red is not None:
                lines.append(f"        v{red} = nl.ndarray(({rs}, 1), {chain.steps[red].dtype!r})")
            bias = "None" if ins["bias"] is None else operand(ins["bias"])
            tail = f", reduce_op='add', reduce_res=v{red}" if red is not None else ""
            lines.append(f"        v{j} = nl.activation({s.op!r}, {operand(ins['src'])}, bias={bias}, "
                         f"scale={operand(ins['scale'])}, dtype={dt}{tail})")
        elif kind == "ts":
            src = operand(ins["src"])
            op1 = "" if ins["op1"] is None else (f", op1={ins['op1']!r}, operand1={operand(ins['operand1'])}, "
                                                   f"reverse1={ins['rev1']}")
            lines.append(f"        v{j} = nl.ndarray({src}.shape, {dt})")
            lines.append(f"        nl.isa.tensor_scalar(v{j}, {src}, {ins['op0']!r}, {operand(ins['operand0'])}, "
                         f"reverse0={ins['rev0']}{op1}, engine={eng!r})")
        elif kind == "copy":
            lines.append(f"        v{j} = nl.copy({operand(ins['src'])}, dtype={dt}, engine={eng!r})")
        else:
            ops = ", ".join(operand(a) for a in ins["args"])
            lines.append(f"        v{j} = nl.{s.op}({ops}, dtype={dt}, engine={eng!r})")
    for k, o in enumerate(chain.outputs):
        if layouts[o] != "row":
            lines.append(f"        nl.store(out{k}{store}, v{o})")
    lines = head + _interleave(lines, guard)
    for k, o in enumerate(chain.outputs):
        if layouts[o] == "row":
            lines.append(f"    nl.store(out{k}.reshape((1, {C})), nl.copy(acc{o}, dtype={chain.steps[o].dtype!r}))")
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
