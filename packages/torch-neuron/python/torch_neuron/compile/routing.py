# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""Plain ``torch.compile(model)`` (the default Inductor backend) on ``neuron`` inputs.

Inductor generates C++/Triton code for host and CUDA-like devices; it has no code generator for
``neuron``. When ``torch._inductor.compile_fx`` is first imported, its ``compile_fx`` (what
torch.compile's Inductor wrapper calls with each Dynamo graph) is wrapped: a graph with a
``neuron`` tensor among its inputs goes to the neuron backend with default options (Inductor's
mode and option patches do not apply to it), every other graph to Inductor unchanged.
"""
from __future__ import annotations

import functools

import torch

from .._lazy_import_hooks import when_imported


def on_neuron(example_inputs) -> bool:
    for x in example_inputs:
        if isinstance(x, torch.Tensor) and x.device.type == "neuron":
            return True
    return False


def _wrap(module) -> None:
    inductor = module.compile_fx
    if getattr(inductor, "_neuron_routing", False):
        return

    @functools.wraps(inductor)
    def compile_fx(model_, example_inputs_, *args, **kwargs):
        if isinstance(model_, torch.fx.GraphModule) and on_neuron(example_inputs_):
            from .backend import compile_fx_graph
            from .options import CompileOptions
            return compile_fx_graph(model_, example_inputs_, CompileOptions())
        return inductor(model_, example_inputs_, *args, **kwargs)

    compile_fx._neuron_routing = True
    module.compile_fx = compile_fx


def install() -> None:
    when_imported("torch._inductor.compile_fx", _wrap)
