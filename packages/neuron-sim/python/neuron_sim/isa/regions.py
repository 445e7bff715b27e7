# Copyright 2026 The neuron-sim Authors. Licensed under the Apache License, Version 2.0.
"""Which earlier accesses an access must wait for: per physical buffer, the boxes of rows x bytes
that instructions read and wrote, and how an HBM view maps to such a box (the dependency
bookkeeping of ``timing``)."""

from __future__ import annotations

from .access import HBM
from .program import Program


class _Regions:
    """Access records of one physical buffer as boxes of rows x bytes-in-row, bucketed on both
    axes so a lookup only visits records near the accessed box. SBUF/PSUM rows are partitions;
    an HBM buffer is cut into rows of ``row_bytes`` (see ``_hbm_row_bytes``), so a tile of a
    row-major tensor is an exact box rather than the byte range from its first to last element.
    A record is [p0, p1, b0, b1, end, visible, alive]."""

    __slots__ = ("pshift", "shift", "writes", "reads")

    def __init__(self, row_bytes: int, rows: int = 128):
        # ~64 buckets per row (at least 256 B each), at most ~16 row buckets of >= 128 rows.
        self.shift = max(8, (max(row_bytes, 1) // 64).bit_length())
        self.pshift = max(7, (max(rows, 1) // 16).bit_length())
        self.writes: dict[int, list] = {}
        self.reads: dict[int, list] = {}

    def _keys(self, p0, p1, b0, b1):
        sh, ps = self.shift, self.pshift
        cols = range(b0 >> sh, ((b1 - 1) >> sh) + 1)
        r0, r1 = p0 >> ps, (p1 - 1) >> ps
        if r0 == r1:
            base = r0 << 32
            return [base | k for k in cols]
        return [(r << 32) | k for r in range(r0, r1 + 1) for k in cols]

    def ready(self, rect, is_write: bool) -> float:
        _, p0, p1, b0, b1 = rect
        t = 0.0
        for k in self._keys(p0, p1, b0, b1):
            for r in self.writes.get(k, ()):
                if r[6] and r[0] < p1 and p0 < r[1] and r[2] < b1 and b0 < r[3]:
                    v = r[4] if is_write else r[5]
                    if v > t:
                        t = v
            if is_write:
                for r in self.reads.get(k, ()):
                    if r[6] and r[4] > t and r[0] < p1 and p0 < r[1] and r[2] < b1 and b0 < r[3]:
                        t = r[4]
        return t

    def record(self, rect, is_write: bool, end: float, vis: float) -> None:
        _, p0, p1, b0, b1 = rect
        rec = [p0, p1, b0, b1, end, vis, True]
        keys = self._keys(p0, p1, b0, b1)
        if is_write:
            # Records inside a newer write are superseded: whoever depends on them also depends on it.
            for table in (self.writes, self.reads):
                for k in keys:
                    lst = table.get(k)
                    if lst:
                        for r in lst:
                            if p0 <= r[0] and r[1] <= p1 and b0 <= r[2] and r[3] <= b1:
                                r[6] = False
                        lst[:] = [r for r in lst if r[6]]
            dst = self.writes
        else:
            for k in keys:
                lst = self.reads.get(k)
                if lst:
                    for r in lst:
                        if r[4] <= end and p0 <= r[0] and r[1] <= p1 and b0 <= r[2] and r[3] <= b1:
                            r[6] = False
                    lst[:] = [r for r in lst if r[6]]
            dst = self.reads
        for k in keys:
            dst.setdefault(k, []).append(rec)


def _hbm_row_bytes(program: Program) -> dict[int, int]:
    """Per HBM physical buffer, the row length (bytes) most of its accesses view it with: the
    inner extent of a view of rank >= 2. A buffer only ever seen flat is one row."""
    votes: dict[int, dict[int, int]] = {}
    for ins in program.instrs:
        for a in (*ins.reads, *ins.writes):
            b = a.buf
            if b.kind != HBM or len(a.view_shape) < 2 or a.view_shape[0] < 2:
                continue
            n = b.itemsize
            for s in a.view_shape[1:]:
                n *= s
            v = votes.setdefault(b.phys, {})
            v[n] = v.get(n, 0) + 1
    return {phys: max(v, key=v.get) for phys, v in votes.items()}


def _hbm_rect(a, row: int):
    """(phys, row0, row1, byte0, byte1) of an HBM access in rows of ``row`` bytes: the dimensions
    whose byte step is a multiple of the row walk rows, the others bytes within a row. A view that
    crosses row ends within one dimension falls back to the rows it spans, whole."""
    b = a.buf
    isz = b.itemsize
    base = rows = cols = 0
    acc = 1
    for (s, c, st, _), n in zip(reversed(a.dims), reversed(a.view_shape)):
        base += s * acc
        if c > 1:
            step = st * acc * isz
            if step % row == 0:
                rows += (c - 1) * (step // row)
            else:
                cols += (c - 1) * step
        acc *= n
    base *= isz
    r0, c0 = divmod(base, row)
    if c0 + cols + isz <= row:
        return (b.phys, r0, r0 + rows + 1, c0, c0 + cols + isz)
    hi = base + rows * row + cols + isz
    r1 = (hi - 1) // row
    if r1 == r0:
        return (b.phys, r0, r0 + 1, c0, hi - r0 * row)
    return (b.phys, r0, r1 + 1, 0, row)
