# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""Projected step time, utilisation and HBM fit of user steps on a Trainium profile.

    with torch_neuron.projection.region() as proj:
        for batch in loader:
            train_step(batch)
            proj.step()
    print(proj.text())

``python -m torch_neuron.projection --profiles trn1,trn2,trn3 script.py [args]`` runs a script
once per profile and writes a Markdown and a self-contained HTML report with plots; with
``--batch-arg=--batch`` it also finds the largest batch that fits each profile's HBM
(``torch_neuron.projection.capacity``). The aggregation is neuron_sim.projection's; this module
only brackets the region with device events.
"""
from __future__ import annotations

import json
import os
import time

import neuron_sim
import torch
from neuron_sim.projection import Assumptions, summarize, transformer_flops_per_token

from .shape_execution import ShapeOnlyRun, shape_only

__all__ = ["Assumptions", "Region", "region", "ShapeOnlyRun", "shape_only", "transformer_flops_per_token"]

# Set by the CLI in the child it runs: every region appends its summary to this JSON-lines file.
OUTPUT_ENV = "TORCH_NEURON_PROJECTION_OUT"


class Region:
    """A bracketed run of steps on one neuron device; ``summary`` once it has ended."""

    def __init__(self, device: int | None = None, name: str = "region", assumptions: Assumptions | None = None,
                 record: bool = True):
        self.record = record  # append the summary to the CLI's output file, when run by the CLI
        self.device = torch.neuron.current_device() if device is None else int(device)
        self.name = name
        self.assumptions = assumptions or Assumptions()
        self.steps = 0
        self.summary: dict | None = None

    def __enter__(self) -> "Region":
        torch.neuron.synchronize(self.device)
        neuron_sim.reset_peak_counters(self.device)
        self._host_start = time.time_ns()
        self._start = torch.neuron.Event(enable_timing=True)
        self._start.record(torch.neuron.current_stream(self.device))
        return self

    def step(self) -> None:
        """Marks the end of one user step."""
        self.steps += 1

    def __exit__(self, *exc) -> None:
        end = torch.neuron.Event(enable_timing=True)
        end.record(torch.neuron.current_stream(self.device))
        end.synchronize()
        region_ns = self._start.elapsed_time(end) * 1e6
        records = [r for r in neuron_sim.timeline(self.device) if r.host_ns >= self._host_start]
        peak = neuron_sim.counters(self.device)["peak_bytes_in_use"]
        props = neuron_sim.get_device_properties(self.device)
        self.summary = summarize(records, props, steps=self.steps or 1, peak_bytes=peak, region_ns=region_ns,
                                 assumptions=self.assumptions)
        self.summary["name"] = self.name
        # Out-of-memory errors so far in this process, also those the script caught itself.
        self.summary["num_ooms"] = int(torch.neuron.memory_stats(self.device).get("num_ooms", 0))
        oom = exc[0] is not None and issubclass(exc[0], torch.OutOfMemoryError)
        if oom:
            # The run needed more than the core's HBM: it does not fit, whatever the high-water.
            self.summary["fits"] = False
            self.summary["out_of_memory"] = str(exc[1]).splitlines()[0]
        out = os.environ.get(OUTPUT_ENV)
        if out and self.record and (exc[0] is None or oom):
            with open(out, "a") as f:
                f.write(json.dumps(self.summary) + "\n")

    def text(self) -> str:
        """A few lines for a terminal."""
        from .report import terminal_lines

        return "\n".join(terminal_lines(self.summary)) if self.summary else "(region not ended)"


def region(device: int | None = None, name: str = "region", assumptions: Assumptions | None = None) -> Region:
    """A context manager that projects the steps run inside it (call ``.step()`` after each)."""
    return Region(device, name, assumptions)
