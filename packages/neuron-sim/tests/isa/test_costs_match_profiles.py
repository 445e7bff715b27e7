"""The ISA cost model (isa/costs.py) and the runtime's hardware profiles (profiles.cpp) state
the same published figures twice, in two languages; this test is what keeps them equal."""

import pytest

import neuron_sim as ns
from neuron_sim.isa import costs

GHZ = 1e9
BYTES_PER_NS = 1e9  # bytes/ns -> bytes/s


@pytest.mark.parametrize("name", ns.profiles())
def test_cost_model_figures_equal_the_runtime_profile(name):
    c = costs.get_costs(name)
    p = ns.profile_properties(name, lnc=1)  # one physical core: the cost model's unit
    pairs = {
        "tensor clock": (p.tensor_clock_hz, c.tensor_ghz * GHZ),
        "vector clock": (p.vector_clock_hz, c.vector_ghz * GHZ),
        "scalar clock": (p.scalar_clock_hz, c.scalar_ghz * GHZ),
        "gpsimd clock": (p.gpsimd_clock_hz, c.gpsimd_ghz * GHZ),
        "SBUF partitions": (p.sbuf_partitions, c.partitions),
        "SBUF bytes per partition": (p.sbuf_bytes_per_partition, c.sbuf_bytes_per_partition),
        "PSUM bytes per partition": (p.psum_bytes_per_partition, c.psum_bytes_per_partition),
        "PSUM banks": (p.psum_banks, c.psum_banks),
        "DMA engines": (p.dma_engines, c.dma_engines),
        "DMA engine peak bandwidth": (p.dma_engine_bandwidth, c.dma_peak_bytes_per_ns * BYTES_PER_NS),
        "DMA fixed overhead": (p.dma_fixed_overhead_ns, c.dma_fixed_ns),
        "HBM bandwidth per core": (p.hbm_bandwidth, c.hbm_bytes_per_ns * BYTES_PER_NS),
    }
    differ = {k: v for k, v in pairs.items() if v[0] != pytest.approx(v[1], rel=1e-12)}
    assert not differ, (
        f"profile {name}: profiles.cpp and isa/costs.py disagree on {differ} (runtime, cost model); "
        "change both, they cite the same sources")


def test_every_runtime_profile_has_a_cost_model():
    assert sorted(ns.profiles()) == sorted(costs.PROFILES)
