# Copyright 2026 The neuron-sim Authors. Licensed under the Apache License, Version 2.0.
"""Errors raised for ISA constraint violations. Each names the instruction and the kernel source line."""

from __future__ import annotations


class IsaError(Exception):
    """A hardware constraint violated by one instruction.

    ``instruction`` is the ISA operation (e.g. "nc_matmul"), ``location`` the kernel source
    line that issued it ("file.py:12"), ``hint`` what to change.
    """

    kind = "constraint"

    def __init__(self, instruction: str, location: str, detail: str, hint: str = ""):
        self.instruction = instruction
        self.location = location
        self.detail = detail
        self.hint = hint
        msg = f"{instruction} at {location}: {detail}"
        if hint:
            msg += f". {hint}"
        super().__init__(msg)


class PartitionError(IsaError):
    kind = "partition"


class ShapeError(IsaError):
    kind = "shape"


class DTypeError(IsaError):
    kind = "dtype"


class MemoryKindError(IsaError):
    """An operand in a memory the instruction cannot reach (e.g. DMA into PSUM)."""
    kind = "memory"


class BankError(IsaError):
    kind = "bank"


class CapacityError(IsaError):
    kind = "capacity"


__all__ = ["IsaError", "PartitionError", "ShapeError", "DTypeError", "MemoryKindError", "BankError", "CapacityError"]
