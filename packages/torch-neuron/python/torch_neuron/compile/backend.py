# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""The Dynamo backend ``neuron``: Dynamo graph -> AOTAutograd (forward, backward, inference) ->
per-signature lowering (``pipeline``) -> the lowered graphs run on ``neuron``.

AOTAutograd gets a decomposition table that splits softmax, log-softmax, SiLU and their
backwards, GELU's backward (no library kernel covers its tanh form) and a few composite
pointwise ops into pointwise and reduction ops (GELU itself stays one op: the activation engine
computes it in one instruction), so they become fusable chains,
while matmul, attention and norm ops stay whole for their library kernels; its partitioner is
the min-cut rematerialization partitioner (cheap pointwise ops are recomputed in the backward
instead of saved) unless ``options={"partitioner": "default"}``.
"""
from __future__ import annotations

import functools
import itertools
import threading
import time

import torch
import torch.fx as fx

from . import pipeline, stats
from .options import CompileOptions, from_compile_kwargs

aten = torch.ops.aten
_graph_ids = itertools.count()


@functools.cache
def decompositions() -> dict:
    from torch._decomp import get_decompositions
    return get_decompositions([
        aten._softmax, aten._log_softmax, aten._softmax_backward_data, aten._log_softmax_backward_data,
        aten.silu, aten.silu_backward, aten.hardtanh, aten.leaky_relu,
        aten.mse_loss, aten.mse_loss_backward, aten.addcmul, aten.addcdiv, aten.rsub, aten.sigmoid_backward,
        aten.tanh_backward, aten.gelu_backward, aten.elu, aten.softplus, aten.hardsigmoid, aten.hardswish,
    ])


def _profile(args) -> str:
    from ..native.bridge import device_profile
    for a in args:
        if isinstance(a, torch.Tensor) and a.device.type == "neuron":
            return device_profile(a.device)
    from ..native import estimate
    return estimate.profile


def _signature(args) -> tuple:
    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            out.append((tuple(a.shape), a.dtype, a.device.type))
        elif isinstance(a, (int, float, bool, torch.SymInt)):
            out.append(int(a) if isinstance(a, torch.SymInt) else a)
        else:
            out.append(type(a).__name__)
    return tuple(out)


class CompiledGraph:
    """One AOT graph: lowered on first call per input signature, then the lowered graph runs."""

    def __init__(self, gm: fx.GraphModule, options: CompileOptions, name: str):
        self.gm = gm
        self.options = options
        self.name = name
        self.lowered: dict[tuple, pipeline.Lowering] = {}
        self._lock = threading.Lock()
        stats.add("partitions")

    def lowering_for(self, args) -> pipeline.Lowering:
        sig = _signature(args)
        lw = self.lowered.get(sig)
        if lw is None:
            with self._lock:
                lw = self.lowered.get(sig)
                if lw is None:
                    name = self.name if not self.lowered else f"{self.name}_s{len(self.lowered)}"
                    lw = pipeline.Lowering(name, self.options, _profile(args), self.gm)
                    lw = self.lowered[sig] = pipeline.run(lw, args)
        return lw

    def __call__(self, args):
        lw = self.lowering_for(args)
        out = lw.lowered(*args)
        args.clear()
        return out


def _compiler(options: CompileOptions, graph_id: int, kind: str):
    def compile_graph(gm: fx.GraphModule, example_inputs):
        cg = CompiledGraph(gm, options, f"g{graph_id}_{kind}")
        def run(args):
            return cg(args)
        run._boxed_call = True
        run.compiled_graph = cg
        return run
    return compile_graph


def partition_fn(options: CompileOptions):
    from torch._functorch.partitioners import default_partition, min_cut_rematerialization_partition
    if options.partitioner == "default":
        return default_partition
    return functools.partial(min_cut_rematerialization_partition, compiler="inductor")


def compile_fx_graph(gm: fx.GraphModule, example_inputs, options: CompileOptions):
    from torch._functorch.aot_autograd import aot_module_simplified

    gid = next(_graph_ids)
    stats.add("graphs")
    t0 = time.perf_counter()
    try:
        return aot_module_simplified(
            gm, example_inputs,
            fw_compiler=_compiler(options, gid, "forward"),
            bw_compiler=_compiler(options, gid, "backward"),
            inference_compiler=_compiler(options, gid, "inference"),
            decompositions=decompositions(),
            partition_fn=partition_fn(options),
            keep_inference_input_mutations=True,
        )
    finally:
        stats.stage("aot", time.perf_counter() - t0)


def neuron(gm: fx.GraphModule, example_inputs, **kwargs):
    """``torch.compile(model, backend="neuron", mode=... | options={...})``."""
    return compile_fx_graph(gm, example_inputs, from_compile_kwargs(**kwargs))
