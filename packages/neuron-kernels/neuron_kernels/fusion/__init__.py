# Copyright 2026 The neuron-kernels Authors. Licensed under the Apache License, Version 2.0.
"""Fusion: chains of pointwise and row-reduction steps as one generated tile kernel each.

Torch-free: a compiler front end (torch_neuron.compile) describes a chain as plain data
(``Chain``); ``generate`` writes it as tile-language source and returns the ``@jit`` kernel, whose
``schedule`` gives the chain's device time and HBM bytes and whose ``run`` computes its values.
"""
from .chain import DTYPES, LAYOUTS, POINTWISE, REDUCTIONS, Chain, ChainError, Operand, Step
from .generate import MAX_COLS, generate, kernel_source

__all__ = ["Chain", "ChainError", "Operand", "Step", "POINTWISE", "REDUCTIONS", "LAYOUTS", "DTYPES",
           "MAX_COLS", "generate", "kernel_source"]
