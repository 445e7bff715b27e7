# Copyright 2026 The neuron-sim Authors. Licensed under the Apache License, Version 2.0.
"""Timing model: a per-engine schedule of a Program, without touching data.

Each compute engine (TensorE, VectorE, ScalarE, GpSimd) runs its instructions in program
order; each DMA queue (one per issuing source line unless the kernel names one) runs in
order too, and its transfers share the 16 DMA engines, taking the earliest gap in which
every engine serving the transfer's partitions is free. An instruction starts when its
engine (or queue) is free and the regions it reads or overwrites are ready. Costs follow
the rules of thumb cited in costs.py; the derivation of each formula is given beside it.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
from typing import Sequence

from . import costs as _costs
from .access import HBM, PSUM, SBUF
from .program import Instr, Program
from .regions import _hbm_rect, _hbm_row_bytes, _Regions

ENGINE_LABEL = {"tensor": "TensorE", "vector": "VectorE", "scalar": "ScalarE", "gpsimd": "GpSimdE"}
_16BIT = ("bfloat16", "float16")


class InstrCost:
    __slots__ = ("engine", "occupancy_ns", "latency_ns", "fixed_ns", "engines", "nbytes")

    def __init__(self, engine, occupancy_ns, latency_ns=0.0, fixed_ns=0.0, engines=(), nbytes=0):
        self.engine = engine
        self.occupancy_ns = occupancy_ns
        self.latency_ns = latency_ns
        self.fixed_ns = fixed_ns
        self.engines = engines
        self.nbytes = nbytes


def _clock(c: _costs.CoreCosts, engine: str) -> float:
    return {"tensor": c.tensor_ghz, "vector": c.vector_ghz, "scalar": c.scalar_ghz, "gpsimd": c.gpsimd_ghz}[engine]


def instr_cost(ins: Instr, c: _costs.CoreCosts) -> InstrCost:
    """The modelled cost of one instruction on NeuronCore ``c``."""
    if ins.engine == "dma":
        return _dma_cost(ins, c)
    ghz = _clock(c, ins.engine)
    op = ins.op
    if op == "nc_matmul":
        a = ins.attrs
        # C §4.3: average max(min(64, N_stationary), N_moving) cycles back to back; FP32 4x.
        cyc = max(min(c.mm_init_cycles, a["M"]), a["N"])
        if a["fp32"]:
            cyc *= c.mm_fp32_factor
        # Result visible after one PSUM write access (C §4.4: ~60 cycles per access).
        return InstrCost("tensor", cyc / ghz, c.access_overhead_cycles / ghz)
    if op == "nc_transpose":
        a = ins.attrs
        cyc = max(a["P"], min(c.mm_init_cycles, a["F"]))            # C §4.3 nc_transpose (TensorE)
        if ins.reads[0].buf.dtype == "float32":
            # C §4.3: FP32 at the FP32 matmul rate; NC-v3+ transpose mode is 2x faster than that.
            cyc *= c.mm_fp32_factor // (2 if c.core != "NC-v2" else 1)
        return InstrCost("tensor", cyc / ghz, c.access_overhead_cycles / ghz)
    dst = ins.writes[0]
    src = ins.reads[0] if ins.reads else dst
    n = src.free_size if op == "tensor_reduce" else dst.free_size
    if op == "tensor_tensor":
        a, b = ins.reads[0], ins.reads[1]
        kinds = {a.buf.kind, b.buf.kind}
        all16 = all(x.buf.dtype == "bfloat16" for x in (a, b, dst))
        one_pass = kinds == {PSUM, SBUF} or (all16 and PSUM not in kinds and
                                              ins.attrs["op"] in ("add", "multiply", "subtract"))
        cyc = n if one_pass else 2 * n                               # C §4.3 tensor_tensor
    elif op in ("tensor_scalar", "tensor_copy"):
        cyc = n                                                      # C §4.3 tensor_scalar / tensor_copy
        if ins.engine == "vector" and c.vector_perf_mode and \
                src.buf.dtype in _16BIT and dst.buf.dtype in _16BIT:
            # C §4.3 NC-v3 perf mode: 4x SBUF->SBUF contiguous, 2x with PSUM or non-contiguous.
            fast = src.buf.kind == SBUF and dst.buf.kind == SBUF and src.contiguous_run() == src.free_size
            cyc = n / (4 if fast else 2)
    elif op in ("activation", "activation_reduce"):
        cyc = n                                                      # C §4.3 activation: max(MIN_II, N)
    elif op == "tensor_reduce":
        half = src.buf.dtype == "bfloat16" and dst.buf.dtype == "bfloat16" and ins.attrs["op"] in ("add", "max")
        cyc = n / 2 if half else n                                   # C §4.3 tensor_reduce
    elif op == "memset":
        cyc = n / 2 if dst.buf.dtype in _16BIT and ins.attrs["value"] == 0 else n   # C §4.3 memset
    elif op == "iota":
        cyc = c.gpsimd_start_cycles + n                              # C §4.3 iota: 150 + N
    else:
        cyc = n
    if op != "iota":
        cyc = max(c.min_ii_cycles, cyc)
    if op == "activation_reduce":
        cyc += c.min_ii_cycles                                       # C §4.3: + MIN_II (ActReadAccumulator)
    # Each instruction pays one tensor-access request (C §4.4, ~60 cycles); a dependent successor
    # also waits for the static overhead (~100 cycles, C §4.3) and the result write (~60 cycles).
    # Check: a chain of dependent 1-element ScalarE activations issues every 64 + 60 + 160 = 284
    # cycles, against the published ~264 cycles on NC-v2 (C §1.7).
    occ = (cyc + c.access_overhead_cycles) / ghz
    lat = (c.static_overhead_cycles + c.access_overhead_cycles) / ghz
    return InstrCost(ins.engine, occ, lat)


def _dma_cost(ins: Instr, c: _costs.CoreCosts) -> InstrCost:
    dst = ins.writes[0]
    src = ins.reads[0]
    onchip = dst if dst.buf.kind != HBM else src
    far = src if onchip is dst else dst
    rows = onchip.shape[0] if onchip.shape else 1
    elem = max(dst.buf.itemsize, src.buf.itemsize)
    nbytes = dst.size * elem
    row_elems = max(1, onchip.free_size) if onchip.buf.kind != HBM else max(1, dst.size // max(rows, 1))
    if ins.op == "dma_gather":
        chunks_per_row = 1                                           # one descriptor per gathered row
    else:
        run = max(1, far.contiguous_run(skip_first=True))
        chunks_per_row = -(-row_elems // min(run, row_elems))
    n_desc = rows * chunks_per_row
    ppe = c.dma_partitions_per_engine
    p0 = onchip.dims[0][0] if onchip.buf.kind != HBM else 0
    first = (p0 // ppe) % c.dma_engines
    n_eng = min(c.dma_engines, max(1, -(-rows // ppe)))
    engines = tuple((first + i) % c.dma_engines for i in range(n_eng))
    # Per engine: payload at the streaming rate plus a fixed cost per descriptor (costs.py derivation).
    t = (nbytes / n_eng) / c.dma_bytes_per_ns + (n_desc / n_eng) * c.dma_descriptor_ns
    if ins.op == "dma_transpose":
        eff = c.dma_transpose_efficiency_hbm if HBM in (src.buf.kind, dst.buf.kind) else c.dma_transpose_efficiency_sbuf
        t /= eff                                                     # C §4.5 DMA transpose efficiency
    if ins.op == "dma_gather":
        t += c.dge_ns                                                # C §4.5: ~600 ns per DGE instruction
    # C §4.5: ~1300 ns descriptor setup / semaphore-to-start before a transfer moves data.
    return InstrCost("dma", t, 0.0, c.dma_fixed_ns, engines, nbytes)


class _EngineIntervals:
    """Merged busy intervals of one DMA engine, for earliest-gap placement."""

    __slots__ = ("starts", "ends")

    def __init__(self):
        self.starts: list[float] = []
        self.ends: list[float] = []

    def earliest(self, t: float, dur: float) -> float:
        starts, ends = self.starts, self.ends
        i = bisect.bisect_right(ends, t)
        while i < len(starts) and starts[i] < t + dur:
            t = max(t, ends[i])
            i += 1
        return t

    def add(self, s: float, e: float) -> None:
        starts, ends = self.starts, self.ends
        i = bisect.bisect_left(starts, s)
        if i > 0 and ends[i - 1] >= s - 1e-6:
            i -= 1
            if e > ends[i]:
                ends[i] = e
        else:
            starts.insert(i, s)
            ends.insert(i, e)
        while i + 1 < len(starts) and starts[i + 1] <= ends[i] + 1e-6:
            if ends[i + 1] > ends[i]:
                ends[i] = ends[i + 1]
            del starts[i + 1]
            del ends[i + 1]

    def busy(self) -> float:
        return sum(e - s for s, e in zip(self.starts, self.ends))


class Schedule:
    """The result of ``schedule``: per-instruction start/end (ns) and per-engine figures."""

    def __init__(self, program: Program, costs: _costs.CoreCosts, start, end, cost, busy, dma_intervals,
                 latency_ns: float):
        self.program = program
        self.costs = costs
        self.start = start
        self.end = end
        self.cost = cost
        self.busy_ns = busy
        self._dma = dma_intervals
        self.latency_ns = latency_ns
        self.dma_bytes = sum(c.nbytes for c in cost)
        self.flops = sum(i.attrs.get("flops", 0) for i in program.instrs)
        merged = _EngineIntervals()
        for iv in dma_intervals:
            for s, e in zip(iv.starts, iv.ends):
                merged.add(s, e)
        # "dma_transfer": some DMA engine moves data. "dma": some DMA queue is working on a transfer,
        # counting its descriptor setup / semaphore-to-start phase (C §4.5) as the profiler's DMA
        # rows do.
        self.busy_ns["dma_transfer"] = merged.busy()
        queues = _EngineIntervals()
        for ins, s, c in zip(program.instrs, start, cost):
            if ins.engine == "dma":
                queues.add(s - c.fixed_ns, s + c.occupancy_ns)
        self.busy_ns["dma"] = queues.busy()

    @property
    def n_instructions(self) -> int:
        return len(self.start)

    def utilization(self) -> dict[str, float]:
        """Fraction of the kernel's latency each engine is active ("dma": any DMA engine active)."""
        lat = self.latency_ns or 1.0
        return {k: v / lat for k, v in self.busy_ns.items()}

    def tensor_peak_fraction(self) -> float:
        """Achieved FLOP rate as a fraction of TensorE peak (BF16 peak, or FP32 peak for FP32 matmuls)."""
        if not self.flops or not self.latency_ns:
            return 0.0
        fp32 = any(i.op == "nc_matmul" and i.attrs["fp32"] for i in self.program.instrs)
        return self.flops / (self.latency_ns * 1e-9) / self.costs.tensor_peak_flops(fp32=fp32)

    def timeline(self) -> dict[str, list[tuple[float, float, str, str]]]:
        """Per engine (DMA per queue): (start_ns, end_ns, op, kernel source line) in start order."""
        out: dict[str, list] = {}
        for ins, s, e in zip(self.program.instrs, self.start, self.end):
            key = f"DMA q{ins.queue}" if ins.engine == "dma" else ENGINE_LABEL[ins.engine]
            out.setdefault(key, []).append((s, e, ins.op, ins.loc))
        for v in out.values():
            v.sort()
        return out

    def chrome_trace(self, pid: int = 0) -> dict:
        """A Chrome trace-event document (chrome://tracing, Perfetto): one row per engine and DMA queue."""
        events = []
        rows = {}
        for ins, s, e, c in zip(self.program.instrs, self.start, self.end, self.cost):
            key = f"DMA q{ins.queue}" if ins.engine == "dma" else ENGINE_LABEL[ins.engine]
            tid = rows.setdefault(key, len(rows))
            args = {"loc": ins.loc, "idx": ins.idx}
            if ins.engine == "dma":
                args["bytes"] = c.nbytes
            events.append({"name": ins.op, "ph": "X", "ts": s / 1000.0, "dur": max(e - s, 0) / 1000.0,
                           "pid": pid, "tid": tid, "args": args})
        for key, tid in rows.items():
            events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": key}})
        events.append({"name": "process_name", "ph": "M", "pid": pid,
                       "args": {"name": f"{self.program.name} ({self.costs.profile} {self.costs.core})"}})
        return {"traceEvents": events, "displayTimeUnit": "ns"}

    def save_chrome_trace(self, path: str) -> None:
        with open(path, "w") as f:
            json.dump(self.chrome_trace(), f)

    def summary(self) -> str:
        u = self.utilization()
        parts = ", ".join(f"{k} {100 * v:.1f}%" for k, v in sorted(u.items()))
        return (f"{self.program.name} on {self.costs.profile}: {self.latency_ns / 1000:.3f} us, "
                f"{self.n_instructions} instructions, DMA {self.dma_bytes / 1e6:.2f} MB; active: {parts}")


def _transpose_on_chip(ins: Instr, c: _costs.CoreCosts) -> tuple[InstrCost, float]:
    """A transposing load of a tensor already in SBUF, done the way on-chip data is transposed:
    TensorE transposes 128 x 128 blocks into PSUM (C §4.3 nc_transpose), and a copy takes the
    result out of PSUM (C §4.3 tensor_copy). Returns the TensorE cost and the copy's occupancy
    (ns at the slower clock of ScalarE and VectorE, either of which may run it)."""
    src, dst = ins.reads[0], ins.writes[0]
    rows, cols = src.shape[0], src.shape[1]
    fp32 = dst.buf.dtype == "float32"
    per_block = max(min(rows, c.pe_rows), min(c.mm_init_cycles, min(cols, c.pe_rows)))
    if fp32:
        per_block *= c.mm_fp32_factor // (2 if c.core != "NC-v2" else 1)
    blocks = -(-rows // c.pe_rows) * -(-cols // c.pe_rows)
    copy_cycles = -(-cols // c.partitions) * (max(c.min_ii_cycles, rows) + c.access_overhead_cycles)
    return (InstrCost("tensor", blocks * per_block / c.tensor_ghz, c.access_overhead_cycles / c.tensor_ghz),
            copy_cycles / min(c.scalar_ghz, c.vector_ghz))


def _stays_on_chip(ins: Instr, keys: dict, loads: set, stores: set) -> bool:
    """Whether DMA ``ins`` only loads tensors already in SBUF and stores tensors nobody reads
    from HBM (a graph's resident intermediates)."""
    hbm = False
    for a in ins.reads:
        if a.buf.kind == HBM:
            if keys.get(a.buf.phys) not in loads:
                return False
            hbm = True
    for a in ins.writes:
        if a.buf.kind == HBM:
            if keys.get(a.buf.phys) not in stores:
                return False
            hbm = True
    return hbm


class _Engines:
    """Engine state shared by the programs placed one after another on one NeuronCore: when
    each compute engine is free, each DMA engine's busy intervals, and the busy totals."""

    def __init__(self, c: _costs.CoreCosts):
        self.c = c
        self.engine_free = {"tensor": 0.0, "vector": 0.0, "scalar": 0.0, "gpsimd": 0.0}
        self.busy = {"tensor": 0.0, "vector": 0.0, "scalar": 0.0, "gpsimd": 0.0}
        self.dma = [_EngineIntervals() for _ in range(c.dma_engines)]
        self.queue_start: dict = {}
        self.last = 0.0
        self.floor = 0.0      # no instruction starts before this (the end of the last barrier)

    def place(self, program: Program, part=0, hbm_keys=None, after=None, before=None, on_chip=None):
        """Schedules ``program``'s instructions on the engines; returns (start, end, cost) lists.

        ``hbm_keys`` maps HBM buffers (by phys) to the graph-level tensors they are bound to;
        an access to such a buffer also waits for ``after[key]`` (reads: the last write made
        visible by an earlier program; writes: that or the last read) and the program's own
        accesses are returned per key in ``before`` (key -> [write visible, read end]).
        ``on_chip`` = (keys loaded from SBUF, keys never stored): a transfer whose every HBM
        access is to such a tensor moves nothing (the data stays in SBUF) but keeps its order;
        a transposing load of one becomes a TensorE transpose and a PSUM copy."""
        c = self.c
        instrs = program.instrs
        written = set()
        for ins in instrs:
            for a in ins.writes:
                written.add(a.buf.phys)
        hbm_row = _hbm_row_bytes(program)
        regions: dict[int, _Regions] = {}
        for b in program.buffers:
            if b.phys not in regions:
                if b.kind == HBM:
                    row = hbm_row.setdefault(b.phys, max(b.nbytes, 1))
                    regions[b.phys] = _Regions(row, -(-b.nbytes // row))
                else:
                    regions[b.phys] = _Regions(b.row_bytes)

        def rect_of(a):
            return _hbm_rect(a, hbm_row[a.buf.phys]) if a.buf.kind == HBM else a.rect()
        keys = hbm_keys or {}
        engine_free, busy, dma, queue_start = self.engine_free, self.busy, self.dma, self.queue_start
        start, end, costs_out = [], [], []
        last = self.last
        loads_on_chip, stores_on_chip = on_chip or ((), ())
        for ins in instrs:
            ic = instr_cost(ins, c)
            evacuate = 0.0
            if on_chip and ic.engine == "dma" and _stays_on_chip(ins, keys, loads_on_chip, stores_on_chip):
                if ins.op == "dma_transpose":
                    ic, evacuate = _transpose_on_chip(ins, c)
                else:
                    ic = InstrCost("dma", 0.0)
            ready = self.floor
            rrects = [rect_of(a) for a in ins.reads if a.buf.phys in written]
            wrects = [rect_of(a) for a in ins.writes]
            for rect in rrects:
                t = regions[rect[0]].ready(rect, False)
                if t > ready:
                    ready = t
            for rect in wrects:
                t = regions[rect[0]].ready(rect, True)
                if t > ready:
                    ready = t
            if keys:
                for a in ins.reads:
                    k = keys.get(a.buf.phys)
                    if k is not None and k in after:
                        ready = max(ready, after[k][0])
                for a in ins.writes:
                    k = keys.get(a.buf.phys)
                    if k is not None and k in after:
                        ready = max(ready, after[k][0], after[k][1])
            if ic.engine == "dma":
                q = (part, ins.queue)
                t = max(ready + ic.fixed_ns, queue_start.get(q, 0.0))
                dur = ic.occupancy_ns
                while True:
                    moved = False
                    for e in ic.engines:
                        t2 = dma[e].earliest(t, dur)
                        if t2 > t:
                            t, moved = t2, True
                    if not moved:
                        break
                s, f = t, t + dur
                for e in ic.engines:
                    dma[e].add(s, f)
                queue_start[q] = s
                vis = f
            else:
                s = max(ready, engine_free[ic.engine])
                f = s + ic.occupancy_ns
                engine_free[ic.engine] = f
                busy[ic.engine] += ic.occupancy_ns
                vis = f + ic.latency_ns
                if evacuate:
                    # The PSUM result leaves through whichever of ScalarE and VectorE frees first.
                    e = min(("scalar", "vector"), key=engine_free.get)
                    s2 = max(vis, engine_free[e])
                    f = s2 + evacuate
                    engine_free[e] = f
                    busy[e] += evacuate
                    vis = f + c.access_overhead_cycles / _clock(c, e)
            for rect in rrects:
                regions[rect[0]].record(rect, False, f, f)
            for rect in wrects:
                regions[rect[0]].record(rect, True, f, vis)
            if keys:
                for a in ins.reads:
                    k = keys.get(a.buf.phys)
                    if k is not None:
                        r = before.setdefault(k, [0.0, 0.0])
                        r[1] = max(r[1], f)
                for a in ins.writes:
                    k = keys.get(a.buf.phys)
                    if k is not None:
                        r = before.setdefault(k, [0.0, 0.0])
                        r[0] = max(r[0], vis)
            start.append(s)
            end.append(f)
            if vis > last:
                last = vis
            costs_out.append(ic)
        self.last = last
        return start, end, costs_out

    def barrier(self, duration_ns: float) -> tuple[float, float]:
        """Work the model does not see inside (a launch known by its duration only): it starts
        when everything before it has finished, and nothing after it starts before it ends."""
        s = max([self.last, self.floor, *self.engine_free.values()] + [iv.ends[-1] for iv in self.dma if iv.ends])
        f = s + duration_ns
        self.floor = self.last = f
        return s, f


def schedule(program: Program, profile=None) -> Schedule:
    """Schedule ``program`` on one NeuronCore of ``profile`` (default: the profile it was traced for)."""
    c = _costs.get_costs(profile or program.profile)
    eng = _Engines(c)
    start, end, costs_out = eng.place(program)
    return Schedule(program, c, start, end, costs_out, eng.busy, eng.dma, eng.last)


class GraphSchedule:
    """The result of ``schedule_graph``: one launch made of several programs."""

    def __init__(self, latency_ns: float, busy_ns: dict, spans: list, dma_bytes: int, n_instructions: int,
                 resident_bytes: int = 0):
        self.latency_ns = latency_ns
        self.busy_ns = busy_ns
        self.spans = spans                  # (start, end) ns of each part, in order
        self.dma_bytes = dma_bytes
        self.n_instructions = n_instructions
        self.resident_bytes = resident_bytes  # HBM traffic the kernels' programs name but SBUF served

    def utilization(self) -> dict[str, float]:
        lat = self.latency_ns or 1.0
        return {k: v / lat for k, v in self.busy_ns.items()}


def schedule_graph(parts: Sequence, profile=None, keep=None) -> GraphSchedule:
    """Schedule the kernels of one compiled graph as a single launch on one NeuronCore, the way
    the Neuron compiler turns a graph into one NEFF: every engine (and DMA queue) runs the
    kernels' instructions in graph order with no launch between them, so a kernel's loads of
    tensors nobody in the graph writes (weights, graph inputs) start while earlier kernels
    still compute, and its engines start as soon as theirs are free. Transfers stream at the
    profile's ``graph_dma_bytes_per_ns``.

    ``parts`` in graph order, each either ``(program, hbm_keys)`` -- ``hbm_keys`` maps the
    program's HBM buffers (``Buffer.phys``) to hashable keys naming the graph's tensors, so an
    access waits for the earlier programs' writes to the same tensor (reads), or for their
    reads and writes of it (writes), at whole-tensor granularity -- or a number: a launch known
    only by its duration (ns), placed as a barrier after everything before it.

    ``keep``: the keys of tensors that must reach HBM (the graph's inputs and outputs). Given,
    the graph's other tensors of at most ``graph_resident_fraction`` of SBUF stay on chip between
    kernels, as the compiler allocates them in SBUF: they are never stored, and a kernel reading
    one an earlier kernel wrote loads nothing (it waits for the write all the same); a
    transposing load of one is a TensorE transpose and a copy out of PSUM. A kept tensor an
    earlier kernel wrote is stored and also read from SBUF. None: every tensor passes through HBM."""
    eng = None
    after: dict = {}
    spans, n, nbytes, resident = [], 0, 0, 0
    small: set = set()
    if keep is not None:
        c0 = _graph_costs(profile, parts)
        budget = c0.graph_resident_fraction * c0.sbuf_bytes
        size: dict = {}
        for part in parts:
            if not isinstance(part, (int, float)) and part[1]:
                bufs = {b.phys: b.nbytes for b in part[0].buffers}
                for phys, k in part[1].items():
                    size[k] = max(size.get(k, 0), bufs.get(phys, 0))
        small = {k for k, b in size.items() if b <= budget}
    stores = small - set(keep or ())
    produced: set = set()
    for i, part in enumerate(parts):
        if isinstance(part, (int, float)):
            if eng is None:
                eng = _Engines(_graph_costs(profile, parts))
            spans.append(eng.barrier(float(part)))
            continue
        program, keys = part
        if eng is None:
            eng = _Engines(_graph_costs(profile, parts))
        before: dict = {}
        on_chip = (produced & small, stores) if small and keys else None
        start, end, cost = eng.place(program, i, keys or {}, after, before, on_chip)
        for k, (w, r) in before.items():
            a = after.setdefault(k, [0.0, 0.0])
            a[0], a[1] = max(a[0], w), max(a[1], r)
            if w:
                produced.add(k)
        spans.append((min(start, default=eng.last), max(end, default=eng.last)))
        n += len(start)
        nbytes += sum(c.nbytes for c in cost)
        if on_chip:
            resident += sum(instr_cost(ins, eng.c).nbytes for ins, c in zip(program.instrs, cost)
                            if ins.engine == "dma" and not c.nbytes)
    if eng is None:
        return GraphSchedule(0.0, {}, [], 0, 0)
    busy = dict(eng.busy)
    merged = _EngineIntervals()
    for iv in eng.dma:
        for s, e in zip(iv.starts, iv.ends):
            merged.add(s, e)
    busy["dma"] = merged.busy()
    return GraphSchedule(eng.last, busy, spans, nbytes, n, resident)


def _graph_costs(profile, parts) -> _costs.CoreCosts:
    """The core figures a graph is scheduled with: its profile's, at the graph DMA rate."""
    if profile is None:
        profile = next((p[0].profile for p in parts if not isinstance(p, (int, float))), None)
    c = _costs.get_costs(profile or _costs.DEFAULT_PROFILE)
    return dataclasses.replace(c, dma_bytes_per_ns=c.graph_dma_bytes_per_ns)


def schedule_grid(programs: Sequence[Program], profile=None) -> list[Schedule]:
    """Schedule a multi-core launch: one program per core, each on its own NeuronCore."""
    return [schedule(p, profile) for p in programs]
