# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""Parameter folding for inference graphs.

In a compiled inference graph, the work done on parameters alone (the bf16 casts autocast inserts
before each matmul, transposes made contiguous) gives the same result on every call while the
parameters do not change. ``split`` moves that work into a separate graph of the parameters; its
outputs become extra inputs of the main graph. ``Constants`` runs it on the first call and again
only when a parameter was replaced or modified (its storage or version counter changed; a
parameter created under ``torch.inference_mode`` has no version counter, so then every call), so
the projected time of an inference step holds no per-call weight casts, as with a compiler that
treats weights as constants. The folded values cost device memory beside the parameters (a bf16
copy of each autocast weight); ``options={"freeze_parameters": False}`` turns folding off.
"""
from __future__ import annotations

import dataclasses

import torch
import torch.fx as fx

aten = torch.ops.aten
prims = torch.ops.prims

# Ops whose result depends on their tensor input only; the views among them alone gain nothing.
_VIEWS = {aten.t.default, aten.permute.default, aten.transpose.int, aten.view.default,
          aten._unsafe_view.default, aten.reshape.default, aten.unsqueeze.default, aten.squeeze.dim,
          aten.slice.Tensor, aten.select.int}
_COPIES = {prims.convert_element_type.default, aten._to_copy.default, aten.clone.default}
FOLDABLE = _VIEWS | _COPIES


@dataclasses.dataclass(frozen=True)
class Folded:
    gm: fx.GraphModule          # the inference graph: its inputs, then the folded values
    const: fx.GraphModule       # the parameters at ``positions`` -> the folded values
    positions: tuple


def _on_neuron(node: fx.Node) -> bool:
    val = node.meta.get("val")
    return isinstance(val, torch.Tensor) and val.device.type == "neuron"


def _derived(graph: fx.Graph, frozen: set) -> dict:
    """Nodes computed from frozen inputs alone by FOLDABLE ops -> whether a copy is on their path."""
    derived = {n: False for n in frozen}
    for n in graph.nodes:
        if n.op != "call_function" or n.target not in FOLDABLE or not _on_neuron(n):
            continue
        inputs = n.all_input_nodes
        if inputs and all(i in derived for i in inputs):
            derived[n] = n.target in _COPIES or any(derived[i] for i in inputs)
    return derived


def split(gm: fx.GraphModule, positions) -> Folded | None:
    """The folded form of inference graph ``gm`` whose inputs at ``positions`` are parameters,
    or None when nothing is worth folding (``gm`` itself is not modified)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    positions = tuple(p for p in positions if p < len(placeholders))
    derived = _derived(gm.graph, {placeholders[p] for p in positions})
    frontier = [n for n, copied in derived.items() if copied and n.op != "placeholder"
                and any(u not in derived for u in n.users)]
    if not frontier:
        return None

    const = fx.Graph()
    env = {}
    for p in positions:
        env[placeholders[p]] = const.placeholder(placeholders[p].name)
    for n in gm.graph.nodes:
        if n in derived and n.op != "placeholder":
            env[n] = const.node_copy(n, lambda a: env[a])
    const.output(tuple(env[n] for n in frontier))

    main = fx.Graph()
    main_env = {}
    main.output(main.graph_copy(gm.graph, main_env))
    last = main_env[placeholders[-1]]
    for i, n in enumerate(frontier):
        with main.inserting_after(last):
            last = main.placeholder(f"folded_{i}")
        last.meta = dict(n.meta)
        main_env[n].replace_all_uses_with(last)
    main.eliminate_dead_code()
    return Folded(fx.GraphModule(gm, main), fx.GraphModule(gm, const), positions)


class Constants:
    """The folded values of one graph's parameters, recomputed when a parameter changes."""

    def __init__(self, folded: Folded):
        self.folded = folded
        self.key = None
        self.values: tuple = ()
        self.computed = 0      # how often the values were (re)computed

    def extend(self, args: list) -> None:
        """Appends the folded values for the parameters in ``args`` to it."""
        params = [args[p] for p in self.folded.positions]
        # Inference tensors have no version counter (in-place changes are not seen): no reuse.
        key = None if any(t.is_inference() for t in params) else \
            tuple((id(t), t.data_ptr(), t._version) for t in params)
        if key is None or key != self.key:
            with torch.no_grad():
                self.values = tuple(self.folded.const(*params))
            self.key = key
            self.computed += 1
        args.extend(self.values)
