"""The error (or warning) a stream race produces: both ops, both streams, the tensor and its
allocation, and the Python stacks of both launches."""
from __future__ import annotations

import traceback

from .memory import Access, Block


class StreamRaceError(RuntimeError):
    """Two launches on different neuron streams touch the same memory, at least one writes,
    and nothing orders them (TORCH_NEURON_SANITIZE)."""


class StreamRaceWarning(RuntimeWarning):
    """A stream race reported as a warning (TORCH_NEURON_SANITIZE=warn)."""


def _stream(key) -> str:
    dev, sid = key
    return f"stream {sid}{' (default)' if sid == 0 else ''} of neuron:{dev}"


def _stack(stack) -> str:
    if stack is None:
        return "    (not recorded)\n"
    frames = traceback.StackSummary.from_list(list(stack))
    return "".join("  " + line for line in frames.format())


def _verb(a: Access) -> str:
    return "writes" if a.is_write else "reads"


def format_race(cur: Access, prev: Access, block: Block) -> str:
    prev_verb = "wrote" if prev.is_write else "read"
    lines = [
        f"neuron stream race: {cur.op} {_verb(cur)} a tensor ({cur.tensor}) on {_stream(cur.stream)}, "
        f"which {prev.op} last {prev_verb} on {_stream(prev.stream)}, with no event record/wait, "
        f"wait_stream or synchronize between the two launches.",
        f"Memory: {block.describe()}.",
    ]
    if prev.freed_from:
        lines.append(
            f"The earlier access was to a previous allocation of this memory ({prev.freed_from}): it was "
            f"freed while still in use on {_stream(prev.stream)} and reused on {_stream(cur.stream)}. "
            f"Call tensor.record_stream(stream) with that stream before the tensor is freed, or make the "
            f"allocating stream wait for that stream (wait_stream, events) before the free.")
    else:
        lines.append(
            f"Make {_stream(cur.stream)} wait for {_stream(prev.stream)} "
            f"(current_stream().wait_stream(other), or Event.record() on one and Event.wait() on the "
            f"other), or synchronize in between.")
    lines.append(f"Current access: {cur.op} on {_stream(cur.stream)} (tensor {cur.tensor}), at:")
    lines.append(_stack(cur.stack).rstrip("\n"))
    lines.append(f"Previous access: {prev.op} on {_stream(prev.stream)} (tensor {prev.tensor}), at:")
    lines.append(_stack(prev.stack).rstrip("\n"))
    if block.alloc_stack is not None:
        lines.append("Allocation of the current memory, at:")
        lines.append(_stack(block.alloc_stack).rstrip("\n"))
    lines.append("TORCH_NEURON_SANITIZE=warn reports races as warnings; 0 turns the sanitizer off.")
    return "\n".join(lines)
