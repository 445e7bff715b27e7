# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""The Dynamo backend ``neuron``: Dynamo graph -> AOTAutograd (forward, backward, inference) ->
per-signature lowering (``pipeline``) -> the lowered graphs run on ``neuron``.

AOTAutograd gets a decomposition table that splits softmax, log-softmax, SiLU and their backwards
and a few composite pointwise ops into pointwise and reduction ops, so they become fusable chains
(GELU stays one op: the activation engine computes it in one instruction; GELU's backward and
layer norm with its backward stay one op too and are expanded into steps inside their chain, so
the host reference computes each as the one op eager runs),
while matmul and attention ops stay whole (mm/addmm start fused chains whose epilogue is the
pointwise work after them, see ``chains``); its partitioner is
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

from . import freeze, neff, pipeline, stats
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
        aten.tanh_backward, aten.elu, aten.softplus, aten.hardsigmoid, aten.hardswish,
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


def _fallback_counts() -> dict:
    """Host-fallback executions per op so far (the device's op counters)."""
    from .. import get_fallback_ops
    return get_fallback_ops()


class CompiledGraph:
    """One AOT graph: lowered on first call per input signature, then the lowered graph runs."""

    def __init__(self, gm: fx.GraphModule, options: CompileOptions, name: str):
        self.gm = gm
        self.options = options
        self.name = name
        self.lowered: dict[tuple, pipeline.Lowering] = {}
        self._lock = threading.Lock()
        self._counted: set[str] = set()
        self._static: pipeline.Lowering | None = None    # lowerings whose host nodes are counted (on their first run)
        self._launches: dict[str, neff.GraphLaunch] = {}  # per lowering: how its runs reach the timeline
        stats.add("partitions")

    def lowering_for(self, args) -> pipeline.Lowering:
        # A graph without symbolic sizes has one signature (Dynamo guards its shapes, dtypes and
        # devices): its lowering is reused without recomputing the signature per call.
        if self._static is not None:
            return self._static
        sig = _signature(args)
        lw = self.lowered.get(sig)
        if lw is None:
            with self._lock:
                lw = self.lowered.get(sig)
                if lw is None:
                    name = self.name if not self.lowered else f"{self.name}_s{len(self.lowered)}"
                    lw = pipeline.Lowering(name, self.options, _profile(args), self.gm)
                    lw = self.lowered[sig] = pipeline.run(lw, args)
                    if not pipeline._symbolic(self.gm):
                        self._static = lw
        return lw

    def _run(self, lw: pipeline.Lowering, args):
        if not self.options.graph_launch:
            return lw.lowered(*args)
        gl = self._launches.get(lw.name)
        if gl is None:
            gl = self._launches[lw.name] = neff.GraphLaunch(lw.name, lw.profile, self.options.sbuf_residency)
        out = gl.run(lw.lowered, args)
        if gl.latency_ns is not None and lw.name not in stats.graph_launches():
            stats.graph_launch(lw.name, gl.latency_ns, gl.parts, gl.hbm_bytes, gl.resident_bytes)
        return out

    def __call__(self, args):
        lw = self.lowering_for(args)
        if lw.name in self._counted:
            out = self._run(lw, args)
        else:
            before = _fallback_counts()
            out = self._run(lw, args)
            after = _fallback_counts()
            self._counted.add(lw.name)
            pipeline.count_host_nodes(lw, {op: n - before.get(op, 0) for op, n in after.items()
                                           if n > before.get(op, 0)})
        args.clear()
        return out


def _compiler(options: CompileOptions, graph_id: int, kind: str, param_positions=()):
    def compile_graph(gm: fx.GraphModule, example_inputs):
        n_inputs = sum(1 for n in gm.graph.nodes if n.op == "placeholder")
        # The inference graph takes Dynamo's inputs in order (parameters among them) unless
        # AOTAutograd rewrote them (deduplicated or synthetic-base inputs): then nothing is folded.
        folded = (freeze.split(gm, param_positions)
                  if kind == "inference" and options.freeze_parameters and param_positions
                  and n_inputs == len(example_inputs) else None)
        cg = CompiledGraph(folded.gm if folded else gm, options, f"g{graph_id}_{kind}")
        consts = freeze.Constants(folded) if folded else None

        def run(args):
            if consts is not None:
                consts.extend(args)
            return cg(args)
        run._boxed_call = True
        run.compiled_graph = cg
        run.constants = consts
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
    params = tuple(i for i, x in enumerate(example_inputs) if isinstance(x, torch.nn.Parameter))
    t0 = time.perf_counter()
    try:
        return aot_module_simplified(
            gm, example_inputs,
            fw_compiler=_compiler(options, gid, "forward"),
            bw_compiler=_compiler(options, gid, "backward"),
            inference_compiler=_compiler(options, gid, "inference", params),
            decompositions=decompositions(),
            partition_fn=partition_fn(options),
            keep_inference_input_mutations=True,
        )
    finally:
        stats.stage("aot", time.perf_counter() - t0)


def neuron(gm: fx.GraphModule, example_inputs, **kwargs):
    """``torch.compile(model, backend="neuron", mode=... | options={...})``."""
    return compile_fx_graph(gm, example_inputs, from_compile_kwargs(**kwargs))
