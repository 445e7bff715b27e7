"""Who last wrote and read each device block, and on which stream, across frees and reuse.

A block is one allocation of the caching allocator (a storage's base address). A freed
block leaves a "freed range" with its accesses on streams other than its own, less the
streams named by record_stream (the allocator holds such a block back until their work is
done). A later allocation over that range inherits those accesses, so its first use on its
stream conflicts with them unless the streams synchronised: free on one stream and reuse on
another without record_stream is reported like any other unordered access.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Optional

from .clocks import StreamKey

# Freed ranges kept at most; the oldest are forgotten first (a device synchronisation
# forgets them all).
MAX_FREED_RANGES = 20000


@dataclass
class Access:
    op: str
    stream: StreamKey
    seq: int
    is_write: bool
    tensor: str            # shape and dtype of the tensor the op saw
    stack: object          # traceback.StackSummary (lines looked up when reported)
    freed_from: str = ""   # set when the access was to an earlier allocation of the memory


@dataclass
class Block:
    ptr: int
    size: int
    device: int
    stream: Optional[StreamKey]     # the stream it was allocated for (None: before enabling)
    alloc_op: str = ""
    alloc_stack: object = None
    write: Optional[Access] = None
    reads: dict[StreamKey, Access] = field(default_factory=dict)  # latest read per stream

    def describe(self) -> str:
        where = (f"allocated by {self.alloc_op} on stream {self.stream[1]}" if self.stream and self.alloc_op
                 else "allocated before the sanitizer started")
        return f"block 0x{self.ptr:x} of {self.size} bytes on neuron:{self.device}, {where}"


@dataclass
class FreedRange:
    ptr: int
    end: int
    write: Optional[Access]
    reads: list[Access]


class DeviceMemory:
    def __init__(self) -> None:
        self.blocks: dict[int, Block] = {}
        self._freed_starts: list[int] = []
        self._freed: list[FreedRange] = []   # sorted by start, parallel to _freed_starts

    def block(self, ptr: int, size: int, device: int) -> Block:
        b = self.blocks.get(ptr)
        if b is None:
            b = self.blocks[ptr] = Block(ptr, size, device, None)
        return b

    def allocate(self, ptr: int, size: int, device: int, stream: StreamKey, op: str, stack: object) -> None:
        b = Block(ptr, size, device, stream, op, stack)
        end = ptr + size
        # Freed ranges overlapping [ptr, end): the new block inherits their accesses; a range
        # it covers whole is consumed (its history lives on in this block).
        i = bisect.bisect_left(self._freed_starts, ptr)
        while i > 0 and self._freed[i - 1].end > ptr:
            i -= 1
        keep_s, keep_r = self._freed_starts[:i], self._freed[:i]
        for j in range(i, len(self._freed)):
            r = self._freed[j]
            if r.ptr >= end or r.end <= ptr:
                keep_s.append(r.ptr)
                keep_r.append(r)
                continue
            if r.write is not None and (b.write is None or b.write.seq < r.write.seq):
                b.write = r.write
            for a in r.reads:
                b.reads.setdefault(a.stream, a)
            if not (r.ptr >= ptr and r.end <= end):
                keep_s.append(r.ptr)
                keep_r.append(r)
        self._freed_starts, self._freed = keep_s, keep_r
        self.blocks[ptr] = b

    def free(self, ptr: int, size: int, device: int, stream: StreamKey, recorded: tuple[int, ...]) -> None:
        b = self.blocks.pop(ptr, None)
        if b is None:
            return
        # The next user of the block allocates on `stream`, after every stream in `recorded`.
        spared = {stream} | {(device, s) for s in recorded}
        gone = f"{b.describe()}, since freed"
        write = b.write if b.write is not None and b.write.stream not in spared else None
        reads = [a for k, a in b.reads.items() if k not in spared]
        if write is None and not reads:
            return
        if write is not None:
            write = _freed(write, gone)
        reads = [_freed(a, gone) for a in reads]
        i = bisect.bisect_left(self._freed_starts, ptr)
        self._freed_starts.insert(i, ptr)
        self._freed.insert(i, FreedRange(ptr, ptr + size, write, reads))
        if len(self._freed) > MAX_FREED_RANGES:
            del self._freed_starts[0], self._freed[0]

    def forget_history(self, device: int) -> None:
        """The host waited for every stream of ``device``: their accesses so far are ordered
        before everything later, so they need not be kept."""
        for b in self.blocks.values():
            if b.write is not None and b.write.stream[0] == device:
                b.write = None
            for k in [k for k in b.reads if k[0] == device]:
                del b.reads[k]
        keep = [r for r in self._freed
                if (r.write is not None and r.write.stream[0] != device)
                or any(a.stream[0] != device for a in r.reads)]
        self._freed = keep
        self._freed_starts = [r.ptr for r in keep]


def _freed(a: Access, gone: str) -> Access:
    if a.freed_from:
        return a
    return Access(a.op, a.stream, a.seq, a.is_write, a.tensor, a.stack, gone)
