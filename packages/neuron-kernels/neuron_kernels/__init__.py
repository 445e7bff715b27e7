# Copyright 2026 The neuron-kernels Authors. Licensed under the Apache License, Version 2.0.
"""neuron_kernels: an NKI-style tile language and kernel library for the simulated Trainium.

- ``neuron_kernels.language`` (``nl``): write kernels; ``@nl.jit`` traces them into ISA programs.
- ``neuron_kernels.kernels``: the library (matmul, elementwise, reductions, softmax, norms, ...).
- ``lookup(aten_op, dtype)``: the op table's entry for an ATen op, with ``run`` (values) and
  ``estimate_ns`` (simulated device time).
"""

from importlib import metadata as _metadata

from . import language
from .language import TensorSpec, jit
from .registry import OpEntry, lookup, native_ops, table

__version__ = _metadata.version("neuron-kernels")  # written once, in pyproject.toml

__all__ = ["language", "jit", "TensorSpec", "lookup", "OpEntry", "native_ops", "table", "__version__"]
