# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""``torch.compile(backend="neuron")``.

- ``options``: the frozen options object (mode= / options= of torch.compile).
- ``backend``: the Dynamo backend: AOTAutograd with fusion-friendly decompositions and the
  min-cut partitioner, then per-signature lowering.
- ``pipeline``: the named passes (specialize, classify, fuse, generate, lower).
- ``chains``: finding fusable pointwise/reduction chains in ATen graphs.
- ``lowering``: chains as ``neuron_kernels.fusion`` kernels; the lowered graph.
- ``kernels``: generated kernels at run time; which nodes the kernel library serves.
- ``cache``: generated kernels on disk; ``stats``: ``torch_neuron.compile_stats()``.
- ``routing``: plain ``torch.compile(model)`` on neuron inputs.
"""
from .backend import neuron as neuron_backend
from .options import MODES, CompileOptions, valid_options
from .stats import clear as clear_compile_stats
from .stats import get as compile_stats

__all__ = ["neuron_backend", "CompileOptions", "MODES", "valid_options", "compile_stats", "clear_compile_stats"]
