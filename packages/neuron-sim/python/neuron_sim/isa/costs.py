# Copyright 2026 The neuron-sim Authors. Licensed under the Apache License, Version 2.0.
"""ISA-level cost and geometry figures per NeuronCore version: the one source for the timing model.

Source tags: F = shared/facts/trainium-and-torchneuron.md, C = shared/facts/trainium-calibration.md.
[D] marks a figure derived from published numbers (the derivation is given), [A] an assumption
no published figure fixes (the field is the knob); everything else is quoted. The runtime's chip-level profile table (src/runtime/profiles.cpp) cites the
same sections for the figures both need.
"""

from __future__ import annotations

import dataclasses

KIB = 1024


@dataclasses.dataclass(frozen=True)
class CoreCosts:
    """Figures for one NeuronCore of a hardware profile. Cycle counts are in the named engine's clock."""

    profile: str
    core: str
    # Engine clocks in GHz (C §4.1).
    tensor_ghz: float
    vector_ghz: float
    scalar_ghz: float
    gpsimd_ghz: float
    # Geometry (C §4.1, F §5.2, F §7 nl.tile_size).
    partitions: int
    sbuf_bytes_per_partition: int
    psum_bytes_per_partition: int
    psum_banks: int
    pe_rows: int                      # contraction (K) per matmul
    stationary_fmax: int              # M per matmul
    moving_fmax: int                  # N per matmul (one 2 KiB PSUM bank of fp32)
    vector_psum_fmax: int             # VectorE free size limit when PSUM is accessed (F §6)
    # TensorE (C §4.3 "Estimated instruction cost", F §6).
    mm_init_cycles: int               # MM_INIT_LATENCY: II = max(min(64, N_stationary), N_moving)
    mm_fp32_factor: int               # "FP32 ~4x slower"
    # Vector/Scalar/GpSimd (C §4.3, §4.4, F §6).
    min_ii_cycles: int                # MIN_II
    static_overhead_cycles: int       # "~100 cycles" when tiny or dependent back-to-back
    access_overhead_cycles: int       # "~60 cycles" per SBUF/PSUM tensor access request
    gpsimd_start_cycles: int          # GPSIMD_START for iota/affine_select/local_gather
    vector_perf_mode: bool            # NC-v3+ VectorE 2x/4x BF16 perf mode (C §4.3)
    # DMA (C §4.5, §1.6, §1.1).
    dma_engines: int
    dma_partitions_per_engine: int
    dma_bytes_per_ns: float           # per-engine streaming rate used by the model
    dma_peak_bytes_per_ns: float      # per-engine documented peak (for rooflines)
    dma_descriptor_ns: float          # per contiguous descriptor (one chunk of one partition row)
    dma_fixed_ns: float               # descriptor setup + semaphore-to-start latency per transfer
    dge_ns: float                     # hardware descriptor generation per indirect DMA (0: none)
    dma_transpose_efficiency_hbm: float
    dma_transpose_efficiency_sbuf: float
    hbm_bytes_per_ns: float           # this core's share of HBM bandwidth
    # A compiled graph (one NEFF, ``timing.schedule_graph``): the per-engine DMA streaming rate of
    # compiler-generated transfers, and the share of SBUF that holds graph intermediates between
    # kernels (the rest holds the kernels' own tiles).
    graph_dma_bytes_per_ns: float
    graph_resident_fraction: float

    def tensor_peak_flops(self, fp32: bool = False) -> float:
        """[D] 128 x 128 PEs x 2 FLOP x TensorE clock; FP32 at 1/mm_fp32_factor (C §4.7.2)."""
        f = self.pe_rows * self.stationary_fmax * 2 * self.tensor_ghz * 1e9
        return f / self.mm_fp32_factor if fp32 else f

    @property
    def sbuf_bytes(self) -> int:
        return self.partitions * self.sbuf_bytes_per_partition

    @property
    def psum_bank_bytes(self) -> int:
        return self.psum_bytes_per_partition // self.psum_banks


_COMMON = dict(
    partitions=128,                        # C §4.1: 128 SBUF partitions
    psum_bytes_per_partition=16 * KIB,     # C §4.1: PSUM 2 MiB = 128 x 16 KiB
    psum_banks=8,                          # C §4.1: 8 banks x 2 KiB (512 fp32) per partition
    pe_rows=128,                           # C §4.3: stationary <= 128x128
    stationary_fmax=128,                   # F §7 gemm_stationary_fmax
    moving_fmax=512,                       # F §7 gemm_moving_fmax; one PSUM bank of fp32
    vector_psum_fmax=4096,                 # F §6: free dim <= 4K elems when in PSUM
    mm_init_cycles=64,                     # C §4.3: MM_INIT_LATENCY = 64 cycles
    mm_fp32_factor=4,                      # C §4.3: FP32 ~4x slower (checked by C §1.2 v3: 99% of 19.66 TF)
    min_ii_cycles=64,                      # C §4.3: MIN_II ~ 64 engine cycles
    static_overhead_cycles=100,            # C §4.3 arch guide: "~100 engine cycles" static overhead
    access_overhead_cycles=60,             # C §4.4: tensor access overhead ~60 cycles
    gpsimd_start_cycles=150,               # C §4.3: GPSIMD_START ~150
    dma_engines=16,                        # C §4.5: 16 DMA engines per NeuronCore
    dma_partitions_per_engine=8,           # C §4.5: each engine maps to 8 SBUF partitions
    dma_fixed_ns=1300.0,                   # C §4.5: ~1300 ns cross-engine fixed transfer overhead
    dma_transpose_efficiency_hbm=0.9,      # C §4.5: DMA transpose HBM->SBUF up to 90%
    dma_transpose_efficiency_sbuf=0.5,     # C §4.5: SBUF->SBUF up to 50%
    # [A] Half of SBUF keeps intermediates of a compiled graph on chip between its kernels.
    graph_resident_fraction=0.5,
)

# [D] Per-descriptor cost: C §1.2 v2 moves, per 16-engine step, 8 rows x 2 KiB (rhs) + 8 rows x
# 512 B (lhsT) per engine in 39.89 ms / 32768 = 1217 ns with DMA 99.93% active; at 23 B/ns the
# payload takes 890 ns, leaving 327 ns / 16 descriptors = 20 ns each. That puts a 2 KiB row at
# 82% and a 4 KiB row at 90% of peak, the "near peak" / "saturates" regimes of C §4.5.
_DESCRIPTOR_NS = 20.0

PROFILES: dict[str, CoreCosts] = {
    "trn1": CoreCosts(
        profile="trn1", core="NC-v2",
        tensor_ghz=2.8, vector_ghz=1.12, scalar_ghz=1.4, gpsimd_ghz=1.4,   # C §4.1
        sbuf_bytes_per_partition=192 * KIB,                                # C §4.1: 24 MiB
        vector_perf_mode=False,                                            # C §4.3: NC-v3+ only
        # [D] NC-v2 NKI loads reach ~104 GB/s per core in every DMA-bound step of C §1.1
        # (5.37 GB in 51.8 ms; 4.36 GB in 42.96 ms; 2.2 GB in 22.07 ms): with 20 ns descriptors
        # that is 7.2 B/ns per engine. The DMA guide's 17 B/ns peak (C §4.5) is kept for rooflines.
        dma_bytes_per_ns=7.2, dma_peak_bytes_per_ns=17.0,
        # [D] Compiled graphs stream at the documented 17 B/ns peak (C §4.5), not at the NKI
        # tutorial's 7.2: AWS's published trn1 p50 of BERT-base at batch 1 on one core (0.943 ms,
        # "Trn1/Trn1n Inference Performance", Real Time table) reads its 170 MB of bf16 weights
        # at >= 180 GB/s, which 16 engines at 7.2 B/ns (115 GB/s) cannot.
        graph_dma_bytes_per_ns=17.0,
        dma_descriptor_ns=_DESCRIPTOR_NS,
        dge_ns=0.0,                                                        # C §4.5: DGE is NC-v3+
        hbm_bytes_per_ns=410.0,                                            # F §5.1: 820 GB/s / 2 cores
        **_COMMON,
    ),
    "trn2": CoreCosts(
        profile="trn2", core="NC-v3",
        tensor_ghz=2.4, vector_ghz=0.96, scalar_ghz=1.2, gpsimd_ghz=1.2,   # C §4.1
        sbuf_bytes_per_partition=224 * KIB,                                # C §4.1: 28 MiB
        vector_perf_mode=True,                                             # C §4.3 NC-v3 perf mode
        dma_bytes_per_ns=23.0, dma_peak_bytes_per_ns=23.0,                 # C §4.5/§1.6: 32 KiB in 1416 ns
        graph_dma_bytes_per_ns=23.0,                                       # the same rate in graphs
        dma_descriptor_ns=_DESCRIPTOR_NS,
        dge_ns=600.0,                                                      # C §4.5: ~600 ns per DGE instruction
        hbm_bytes_per_ns=362.5,                                            # F §5.1: 2.9 TB/s / 8 cores
        **_COMMON,
    ),
    "trn3": CoreCosts(
        profile="trn3", core="NC-v4",
        tensor_ghz=2.4, vector_ghz=1.2, scalar_ghz=1.2, gpsimd_ghz=1.2,    # C §4.1
        sbuf_bytes_per_partition=256 * KIB,                                # C §4.1: 32 MiB
        vector_perf_mode=True,                                             # C §4.1: 512 BF16 elem/cycle
        dma_bytes_per_ns=33.0, dma_peak_bytes_per_ns=33.0,                 # C §4.5: 33 B/ns (TRN3)
        graph_dma_bytes_per_ns=33.0,                                       # the same rate in graphs
        dma_descriptor_ns=_DESCRIPTOR_NS,
        dge_ns=600.0,                                                      # C §4.5: NC-v3+ DGE
        hbm_bytes_per_ns=612.5,                                            # F §5.1: 4.9 TB/s / 8 cores
        **_COMMON,
    ),
}

DEFAULT_PROFILE = "trn2"


def get_costs(profile: str | CoreCosts | None = None) -> CoreCosts:
    """The figures for ``profile`` ("trn1", "trn2", "trn3"); None means trn2, the default profile."""
    if isinstance(profile, CoreCosts):
        return profile
    name = profile or DEFAULT_PROFILE
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown hardware profile {name!r}; choose one of {sorted(PROFILES)}") from None
