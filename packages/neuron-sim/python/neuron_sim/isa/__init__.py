# Copyright 2026 The neuron-sim Authors. Licensed under the Apache License, Version 2.0.
"""The Trainium ISA simulator: the living definition of the NeuronCore instruction set.

Pure Python + numpy (no compiled extension): a ``ProgramBuilder`` records checked
instructions over HBM / SBUF / PSUM buffers into a ``Program``; ``execute`` runs it on
numpy arrays (bf16/fp8 via ml_dtypes, FP32 PSUM accumulation, NaN-poisoned memory) and
``schedule`` places it on a per-engine timeline using the figures in ``costs``.
"""

from .costs import DEFAULT_PROFILE, PROFILES, CoreCosts, get_costs
from .dtypes import DTYPES, dtype_name
from .errors import (BankError, CapacityError, DTypeError, IsaError, MemoryKindError, PartitionError,
                     ShapeError)
from .execute import execute
from .access import HBM, PSUM, SBUF, Access, Buffer
from .builder import ProgramBuilder, register_internal_path
from .program import Instr, Program
from .timing import GraphSchedule, Schedule, instr_cost, schedule, schedule_graph, schedule_grid

__all__ = [
    "DEFAULT_PROFILE", "PROFILES", "CoreCosts", "get_costs", "DTYPES", "dtype_name",
    "IsaError", "PartitionError", "ShapeError", "DTypeError", "MemoryKindError", "BankError", "CapacityError",
    "execute", "HBM", "SBUF", "PSUM", "Access", "Buffer", "Instr", "Program", "ProgramBuilder",
    "register_internal_path", "GraphSchedule", "Schedule", "instr_cost", "schedule", "schedule_graph",
    "schedule_grid",
]
