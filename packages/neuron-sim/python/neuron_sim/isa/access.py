# Copyright 2026 The neuron-sim Authors. Licensed under the Apache License, Version 2.0.
"""The strided-view algebra of the instruction stream: ``Buffer`` (a tensor in HBM, SBUF or PSUM)
and ``Access`` (a strided view of one: slicing, reshapes, partition broadcasts, the rectangle it
touches), which instructions read and write."""

from __future__ import annotations

from .dtypes import itemsize

HBM, SBUF, PSUM = "hbm", "sbuf", "psum"


class Buffer:
    """A tensor in HBM, SBUF or PSUM. For SBUF/PSUM, ``shape[0]`` is the partition dimension."""

    __slots__ = ("id", "name", "kind", "shape", "dtype", "itemsize", "phys", "site", "loc", "row_bytes", "nbytes",
                 "instance")

    def __init__(self, id, name, kind, shape, dtype, phys, site, loc):
        self.id = id
        self.name = name
        self.kind = kind
        self.shape = tuple(int(s) for s in shape)
        self.dtype = dtype
        self.itemsize = itemsize(dtype)
        self.phys = phys
        self.site = site
        self.loc = loc
        self.instance = 0
        n = 1
        for s in self.shape[1:]:
            n *= s
        self.row_bytes = n * self.itemsize
        self.nbytes = self.row_bytes * (self.shape[0] if self.shape else 1)

    def __repr__(self):
        return f"{self.name}:{self.kind}{list(self.shape)}:{self.dtype}"


class Access:
    """A strided view of a buffer: per dimension (start, count, step, kept).

    HBM views may reinterpret the buffer with a different contiguous ``view_shape`` and may
    carry a stride-0 leading broadcast dimension of ``bcast`` rows (a partition broadcast).
    """

    __slots__ = ("buf", "view_shape", "dims", "bcast", "shape", "_index", "_rect")

    def __init__(self, buf: Buffer, view_shape=None, dims=None, bcast: int = 0):
        self.buf = buf
        vs = buf.shape if view_shape is None else view_shape
        self.view_shape = vs
        if dims is None:
            dims = tuple([(0, n, 1, True) for n in vs])
        self.dims = dims
        self.bcast = bcast
        shp = tuple([d[1] for d in dims if d[3]])
        self.shape = ((bcast,) + shp) if bcast else shp
        self._index = None
        self._rect = None

    # -- construction -------------------------------------------------------------------
    def sub(self, index) -> "Access":
        """The view ``self[index]`` with numpy basic-indexing semantics (ints, slices, Ellipsis)."""
        if not isinstance(index, tuple):
            index = (index,)
        kept = [i for i, d in enumerate(self.dims) if d[3]]
        nd = len(kept) + (1 if self.bcast else 0)
        if any(ix is Ellipsis for ix in index):
            pos = next(i for i, ix in enumerate(index) if ix is Ellipsis)
            fill = nd - (len(index) - 1)
            index = index[:pos] + (slice(None),) * fill + index[pos + 1:]
        if len(index) > nd:
            raise IndexError(f"too many indices ({len(index)}) for a view of rank {nd} {self.shape}")
        index = tuple(index) + (slice(None),) * (nd - len(index))
        bcast = self.bcast
        if bcast:
            ix0, index = index[0], index[1:]
            if isinstance(ix0, slice):
                a, b, st = ix0.indices(bcast)
                if st != 1:
                    raise IndexError("a broadcast partition dimension only takes unit-step slices")
                bcast = max(0, b - a)
            else:
                raise IndexError("integer index on a broadcast partition dimension; slice it instead")
        dims = list(self.dims)
        for ix, di in zip(index, kept):
            start, count, step, _ = dims[di]
            if isinstance(ix, slice):
                a, b, st = ix.indices(count)
                if st <= 0:
                    raise IndexError(f"negative or zero slice step {st} is not supported")
                n = max(0, (b - a + st - 1) // st)
                dims[di] = (start + a * step, n, step * st, True)
            else:
                i = int(ix)
                if i < 0:
                    i += count
                if not 0 <= i < count:
                    raise IndexError(f"index {ix} out of range for dimension of size {count}")
                dims[di] = (start + i * step, 1, step, False)
        return Access(self.buf, self.view_shape, tuple(dims), bcast)

    def reshape(self, shape) -> "Access":
        """A contiguous reinterpretation of a whole, unsliced HBM tensor."""
        shape = tuple(int(s) for s in shape)
        if -1 in shape:
            known = 1
            for s in shape:
                if s != -1:
                    known *= s
            total = 1
            for s in self.view_shape:
                total *= s
            shape = tuple(total // known if s == -1 else s for s in shape)
        if not self.is_whole() or self.bcast:
            raise ValueError(f"reshape needs a whole tensor view, got a slice of shape {self.shape}")
        n0 = n1 = 1
        for s in self.view_shape:
            n0 *= s
        for s in shape:
            n1 *= s
        if n0 != n1:
            raise ValueError(f"cannot reshape {self.shape} ({n0} elements) to {shape} ({n1} elements)")
        return Access(self.buf, shape)

    def broadcast_partitions(self, rows: int) -> "Access":
        """Prefix a stride-0 partition dimension of ``rows`` (DMA broadcast of one row to many partitions)."""
        if self.bcast:
            raise ValueError("view already has a broadcast partition dimension")
        return Access(self.buf, self.view_shape, self.dims, rows)

    def is_whole(self) -> bool:
        return all(s == 0 and c == n and st == 1 and k for (s, c, st, k), n in zip(self.dims, self.view_shape))

    # -- derived geometry ---------------------------------------------------------------
    @property
    def index(self):
        if self._index is None:
            self._index = tuple(slice(s, s + (c - 1) * st + 1, st) if k else s
                                for (s, c, st, k) in self.dims)
        return self._index

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def partitions(self) -> int:
        """Partition count (first view dimension) for SBUF/PSUM; rows for HBM."""
        return self.shape[0] if self.shape else 1

    @property
    def free_size(self) -> int:
        n = 1
        for s in self.shape[1:]:
            n *= s
        return n

    def _strides(self):
        st, acc = [], 1
        for s in reversed(self.view_shape):
            st.append(acc)
            acc *= s
        return list(reversed(st))

    @property
    def partition_start(self) -> int:
        return self.dims[0][0]

    def rect(self):
        """(phys, p0, p1, byte_lo, byte_hi): the bounding region used for dependency tracking."""
        if self._rect is None:
            b = self.buf
            strides = self._strides()
            if b.kind == HBM:
                lo = hi = 0
                for (s, c, st, k), sd in zip(self.dims, strides):
                    lo += s * sd
                    hi += (s + max(c - 1, 0) * st) * sd
                self._rect = (b.phys, 0, 1, lo * b.itemsize, (hi + 1) * b.itemsize)
            else:
                s0, c0, st0, _ = self.dims[0]
                lo = hi = 0
                for (s, c, st, k), sd in zip(self.dims[1:], strides[1:]):
                    lo += s * sd
                    hi += (s + max(c - 1, 0) * st) * sd
                self._rect = (b.phys, s0, s0 + (c0 - 1) * st0 + 1, lo * b.itemsize, (hi + 1) * b.itemsize)
        return self._rect

    def contiguous_run(self, skip_first: bool = True) -> int:
        """Elements in the innermost contiguous run of the view (excluding the partition dimension)."""
        strides = self._strides()
        eff = [(c, st * sd) for (s, c, st, k), sd in zip(self.dims, strides) if k]
        if skip_first and not self.bcast and eff:
            eff = eff[1:]
        run = 1
        for c, es in reversed(eff):
            if c == 1:
                continue
            if es == run:
                run *= c
            else:
                break
        return run

    def __repr__(self):
        parts = []
        for (s, c, st, k) in self.dims:
            if not k:
                parts.append(str(s))
            elif st == 1:
                parts.append(f"{s}:{s + c}")
            else:
                parts.append(f"{s}:{s + (c - 1) * st + 1}:{st}")
        b = f"bcast{self.bcast}," if self.bcast else ""
        resh = "" if self.view_shape == self.buf.shape else f".reshape{list(self.view_shape)}"
        return f"{self.buf.name}{resh}[{b}{','.join(parts)}]"
