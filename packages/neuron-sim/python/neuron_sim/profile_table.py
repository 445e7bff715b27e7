"""The hardware profiles as a documented table: figures per chip and per core, with sources.

``python -m neuron_sim.profile_table --markdown`` prints the table that the package
README carries between its ``profile-table`` markers; a test keeps the two equal.
Source tags: F = shared/facts/trainium-and-torchneuron.md, C =
shared/facts/trainium-calibration.md (the same citations as the runtime's
profile definitions in src/runtime/profiles.cpp).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Callable

from .docgen import run_doc_command
from .device import DeviceProperties, profile_properties, profiles

GIB = 1 << 30
KIB = 1 << 10


@dataclasses.dataclass(frozen=True)
class Figure:
    label: str
    value: Callable[[DeviceProperties], str]
    source: str


def _num(x: float) -> str:
    return f"{x:,.4g}" if x < 1e4 else f"{x:,.0f}"


FIGURES = (
    Figure("NeuronCores per chip (physical)", lambda p: str(p.physical_cores_per_chip), "F §5.1"),
    Figure("Default LNC (physical cores per logical core)", lambda p: str(p.lnc), "F §5.4"),
    Figure("Logical cores (torch devices) per chip", lambda p: str(p.logical_cores_per_chip), "F §5.4"),
    Figure("HBM per chip (GiB)", lambda p: _num(p.hbm_capacity * p.logical_cores_per_chip / GIB), "F §5.1"),
    Figure("HBM per logical core (GiB)", lambda p: _num(p.hbm_capacity / GIB), "F §5.1 / logical cores"),
    Figure("HBM bandwidth per chip (GB/s)",
           lambda p: _num(p.hbm_bandwidth * p.logical_cores_per_chip / 1e9), "F §5.1"),
    Figure("TensorE dense BF16 per logical core (TFLOPS)", lambda p: _num(p.peak_flops_bf16 / 1e12), "C §4.2, F §5.2"),
    Figure("TensorE FP8 per logical core (TFLOPS; trn1 cFP8, trn3 MXFP8)", lambda p: _num(p.peak_flops_fp8 / 1e12), "C §4.2, F §5.2"),
    Figure("TensorE FP32 per logical core (TFLOPS)", lambda p: _num(p.peak_flops_fp32 / 1e12), "C §4.2, F §5.2"),
    Figure("VectorE FP32 per logical core (TFLOPS)", lambda p: _num(p.vector_flops_fp32 / 1e12), "C §4.2"),
    Figure("TensorE / VectorE / ScalarE / GpSimd clock (GHz)",
           lambda p: " / ".join(_num(c / 1e9) for c in (p.tensor_clock_hz, p.vector_clock_hz,
                                                        p.scalar_clock_hz, p.gpsimd_clock_hz)), "C §4.1"),
    Figure("SBUF (partitions x KiB)", lambda p: f"{p.sbuf_partitions} x {p.sbuf_bytes_per_partition // KIB}", "C §4.1"),
    Figure("PSUM per partition (KiB, banks)",
           lambda p: f"{p.psum_bytes_per_partition // KIB}, {p.psum_banks}", "C §4.1"),
    Figure("DMA engines per physical core x GB/s each",
           lambda p: f"{p.dma_engines} x {_num(p.dma_engine_bandwidth / 1e9)}", "C §4.5, §4.7.1"),
    Figure("DMA fixed overhead per transfer (ns)", lambda p: _num(p.dma_fixed_overhead_ns), "C §4.5"),
    Figure("Kernel launch overhead (ns)", lambda p: _num(p.launch_overhead_ns), "C §4.6"),
    Figure("Chip-to-chip link per chip (GB/s)", lambda p: _num(p.chip_link_bandwidth / 1e9), "F §5.1"),
    Figure("Host link per direction (GB/s)", lambda p: _num(p.host_link_bandwidth / 1e9),
           "assumed PCIe Gen4 x16 (trn1) / Gen5 x16 (trn2, trn3); no published figure"),
    Figure("NeuronCore version (compute capability)",
           lambda p: f"{p.compute_capability_major}.{p.compute_capability_minor}", "F §5.2"),
)

# Instance types by (profile, chips), F §5.3; other chip counts have no instance.
_INSTANCES = {
    ("trn1", 1): "trn1.2xlarge",
    ("trn1", 16): "trn1.32xlarge",
    ("trn2", 1): "trn2.3xlarge",
    ("trn2", 16): "trn2.48xlarge",
    ("trn2", 64): "Trn2 UltraServer",
    ("trn3", 64): "Trn3 Gen1 UltraServer",
}


def instance_type(profile: str, chips: int) -> str:
    """The AWS instance with ``chips`` chips of ``profile``, or a description when none has that count."""
    return _INSTANCES.get((profile, chips), f"{profile} x{chips} chips (no instance type of this size)")


def markdown() -> str:
    """The profile table (each profile at its default LNC) as Markdown."""
    names = profiles()
    props = [profile_properties(name) for name in names]
    lines = ["| Figure | " + " | ".join(names) + " | Source |",
             "|---|" + "---|" * len(names) + "---|"]
    for fig in FIGURES:
        lines.append(f"| {fig.label} | " + " | ".join(fig.value(p) for p in props) + f" | {fig.source} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m neuron_sim.profile_table", description=__doc__.splitlines()[0])
    return run_doc_command(parser, argv, "profile-table", markdown)


if __name__ == "__main__":
    sys.exit(main())
