"""Device and profile properties against the published figures of the fact sheets.

F = shared/facts/trainium-and-torchneuron.md, C = shared/facts/trainium-calibration.md.
"""

from __future__ import annotations

import dataclasses
import os
import re

import pytest

import neuron_sim as ns

GIB = 1 << 30
KIB = 1 << 10

# Per chip, F §5.1: physical cores, HBM bytes, HBM bytes/s, dense BF16 FLOP/s, chip link bytes/s.
CHIP = {
    "trn1": (2, 32 * GIB, 820e9, 190e12, 384e9),
    "trn2": (8, 96 * GIB, 2.9e12, 667e12, 1.28e12),
    "trn3": (8, 144 * GIB, 4.9e12, 671e12, 2.56e12),
}
# Per physical core: F §5.2 / C §4.1-4.2 (TensorE GHz, SBUF KiB per partition, BF16 TFLOPS,
# DMA engines, NeuronCore version).
CORE = {
    "trn1": (2.8e9, 192, 92e12, 16, 2),
    "trn2": (2.4e9, 224, 79e12, 16, 3),
    "trn3": (2.4e9, 256, 79e12, 16, 4),
}
DEFAULT_LNC = {"trn1": 1, "trn2": 2, "trn3": 2}  # F §5.4


def test_profiles_are_the_three_generations():
    assert ns.profiles() == ["trn1", "trn2", "trn3"]


@pytest.mark.parametrize("profile", ["trn1", "trn2", "trn3"])
def test_profile_figures_match_fact_sheet(profile):
    cores, hbm, hbm_bw, bf16_chip, link = CHIP[profile]
    clock, sbuf_kib, bf16_core, dma, version = CORE[profile]
    p = ns.profile_properties(profile)
    assert p.profile == profile and p.lnc == DEFAULT_LNC[profile]
    assert p.physical_cores_per_chip == cores
    assert p.logical_cores_per_chip == cores // p.lnc
    assert p.hbm_capacity * p.logical_cores_per_chip == hbm
    assert p.hbm_bandwidth * p.logical_cores_per_chip == pytest.approx(hbm_bw)
    assert p.peak_flops_bf16 == pytest.approx(bf16_core * p.lnc)
    # F §6: the chip figure exceeds cores x per-core TensorE peak by ~5% ("unexplained in docs").
    assert p.peak_flops_bf16 * p.logical_cores_per_chip == pytest.approx(bf16_chip, rel=0.06)
    assert p.chip_link_bandwidth == pytest.approx(link)
    assert p.tensor_clock_hz == pytest.approx(clock)
    assert (p.sbuf_partitions, p.sbuf_bytes_per_partition) == (128, sbuf_kib * KIB)
    # C §4.1: PSUM 2 MiB = 128 partitions x 16 KiB in 8 banks, on every generation.
    assert (p.psum_bytes_per_partition, p.psum_banks) == (16 * KIB, 8)
    assert p.dma_engines == dma
    assert p.compute_capability_major == version
    assert p.total_memory == p.hbm_capacity


def test_trn2_fp8_is_twice_bf16_and_lnc1_halves_the_share():
    lnc2, lnc1 = ns.profile_properties("trn2", 2), ns.profile_properties("trn2", 1)
    # C §4.2: NC-v3 158 TF FP8 ("double FP8" is 2x BF16).
    assert lnc2.peak_flops_fp8 == pytest.approx(2 * lnc2.peak_flops_bf16)
    assert lnc1.hbm_capacity == 12 * GIB and lnc2.hbm_capacity == 24 * GIB
    assert lnc1.peak_flops_bf16 == pytest.approx(lnc2.peak_flops_bf16 / 2)
    assert lnc1.logical_cores_per_chip == 8
    assert "LNC=1" in lnc1.name and "LNC=2" in lnc2.name


def test_invalid_profile_requests():
    with pytest.raises(ns.InvalidValueError, match="trn7"):
        ns.profile_properties("trn7")
    with pytest.raises(ns.InvalidValueError, match="LNC 2"):
        ns.profile_properties("trn1", 2)


def test_default_configuration_devices():
    assert ns.device_count() == 4
    for i in range(4):
        p = ns.get_device_properties(i)
        assert (p.device, p.logical_core, p.chip, p.lnc) == (i, i, 0, 2)
        assert p.physical_cores == [2 * i, 2 * i + 1]
        assert p.hbm_capacity == 24 * GIB
        assert ns.mem_get_info(i)[1] == 24 * GIB
    static = dataclasses.asdict(ns.profile_properties("trn2"))
    live = dataclasses.asdict(ns.get_device_properties(0))
    assert live == static


def test_properties_dataclass_has_every_header_field():
    header = open(os.path.join(ns.get_include(), "neuron_sim", "neuron_sim.h")).read()
    body = re.search(r"typedef struct nsimDeviceProperties \{(.*?)\} nsimDeviceProperties;", header, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    fields = re.findall(r"\b(\w+)(?:\[\d+\])?\s*;", body)
    assert [f.name for f in dataclasses.fields(ns.DeviceProperties)] == fields


def test_properties_are_frozen():
    p = ns.get_device_properties(0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.hbm_capacity = 1


def test_invalid_device_index():
    for bad in (4, -1, 1000):
        with pytest.raises(ns.InvalidDeviceError) as info:
            ns.get_device_properties(bad)
        assert str(bad) in info.value.message
        assert info.value.code == ns.ErrorCode.INVALID_DEVICE


def test_queue_priority_range_is_cuda_like():
    assert ns.queue_priority_range() == (0, -1)
