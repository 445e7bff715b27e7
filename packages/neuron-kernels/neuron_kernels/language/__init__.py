# Copyright 2026 The neuron-kernels Authors. Licensed under the Apache License, Version 2.0.
"""The tile language: NKI-shaped kernels over HBM tensors and SBUF/PSUM tiles.

    import neuron_kernels.language as nl

    @nl.jit
    def add(a, b):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range((a.shape[0] + 127) // 128):
            rows = slice(i * 128, (i + 1) * 128)
            nl.store(out[rows], nl.add(nl.load(a[rows]), nl.load(b[rows])))
        return out

Partition-first tiles (dimension 0 <= 128 partitions); slices past the end are clipped like
numpy slices, so ragged edges produce smaller tiles.
"""

from . import isa, ops
from .core import Tensor, Tile
from .jit import Kernel, LaunchSchedule, Signature, TensorSpec, jit, specialize, trace
from .ops import *  # noqa: F401,F403 - the operator namespace is the API
from .ops import abs, max, min, sum  # noqa: F401,A004 - NKI names shadowing builtins on purpose

__all__ = ["isa", "Tensor", "Tile", "Kernel", "LaunchSchedule", "Signature", "TensorSpec", "jit", "specialize",
           "trace"] + [n for n in dir(ops) if not n.startswith("_") and n not in (
               "annotations", "Iterable", "Tensor", "Tile", "builder", "ctx", "new_hbm", "new_tile", "dtype_name",
               "HBM", "PSUM", "SBUF")]
