# Copyright 2026 The neuron-sim Authors. Licensed under the Apache License, Version 2.0.
"""schedule_graph: the kernels of one compiled graph placed as one launch (one NEFF)."""

import pytest

from neuron_sim import isa


def _scale(name, rows=128, cols=512, profile="trn2", transpose=False):
    """y = 2 * x (x^T with ``transpose``, x square): load, one VectorE op, store (x and y in HBM)."""
    b = isa.ProgramBuilder(name, profile)
    x = b.hbm("x", (rows, cols), "float32", "input")
    y = b.hbm("y", (rows, cols), "float32", "output")
    t = b.alloc((rows, cols), "float32")
    (b.dma_transpose if transpose else b.dma_copy)(t, x)
    o = b.alloc((rows, cols), "float32")
    b.tensor_scalar(o, t, "multiply", 2.0)
    b.dma_copy(y, o)
    return b.finish()


def _keys(program, x, y):
    return {program.inputs[0].phys: x, program.outputs[0].phys: y}


def test_one_program_is_its_own_schedule():
    p = _scale("a")
    g = isa.schedule_graph([(p, None)])
    s = isa.schedule(p)
    assert g.latency_ns == pytest.approx(s.latency_ns)
    assert g.n_instructions == s.n_instructions
    assert g.busy_ns["vector"] == pytest.approx(s.busy_ns["vector"])


def test_independent_kernels_overlap_and_dependent_ones_wait():
    a, b = _scale("a"), _scale("b")
    one = isa.schedule(a).latency_ns
    # b reads what a wrote: b's load waits for a's store, so the two take about two kernels' time
    # (less only by the engines b needs before its load, none here).
    chained = isa.schedule_graph([(a, _keys(a, "x", "h")), (b, _keys(b, "h", "y"))])
    assert chained.latency_ns >= 2 * one - 1e-6
    assert chained.spans[1][0] >= chained.spans[0][1]
    # b reads another tensor: its load runs while a computes, so the graph takes less than two launches.
    free = isa.schedule_graph([(a, _keys(a, "x", "h")), (b, _keys(b, "w", "y"))])
    assert free.latency_ns < 1.5 * one
    assert free.latency_ns > one


def test_write_after_read_waits_for_the_reader():
    a, b = _scale("a"), _scale("b")
    # b overwrites a's input: its store waits until a has read it.
    g = isa.schedule_graph([(a, _keys(a, "x", "h")), (b, _keys(b, "w", "x"))])
    s = isa.schedule_graph([(a, _keys(a, "x", "h")), (b, _keys(b, "w", "z"))])
    assert g.latency_ns >= s.latency_ns


def test_a_barrier_separates_what_comes_before_and_after():
    a, b = _scale("a"), _scale("b")
    one = isa.schedule(a).latency_ns
    g = isa.schedule_graph([(a, _keys(a, "x", "h")), 5000.0, (b, _keys(b, "w", "y"))])
    assert g.spans[1] == (pytest.approx(one), pytest.approx(one + 5000.0))
    assert g.spans[2][0] >= one + 5000.0
    assert g.latency_ns == pytest.approx(2 * one + 5000.0)


def test_empty_graph():
    assert isa.schedule_graph([]).latency_ns == 0.0


def _chain(keep, profile="trn2"):
    a, b = _scale("a", profile=profile), _scale("b", profile=profile)
    return isa.schedule_graph([(a, _keys(a, "x", "h")), (b, _keys(b, "h", "y"))], profile, keep)


def test_an_intermediate_that_fits_stays_in_sbuf():
    tile = 128 * 512 * 4
    through_hbm = _chain(None)
    resident = _chain({"x", "y"})
    # h is neither stored by a nor loaded by b: two transfers of its bytes move nothing ...
    assert through_hbm.dma_bytes == 4 * tile and through_hbm.resident_bytes == 0
    assert resident.dma_bytes == 2 * tile and resident.resident_bytes == 2 * tile
    # ... and b still waits for a's result, but not for a store and a load of it.
    assert resident.latency_ns < through_hbm.latency_ns
    assert resident.spans[1][1] > resident.spans[0][1]
    assert resident.busy_ns["vector"] == pytest.approx(through_hbm.busy_ns["vector"])


def test_a_kept_tensor_is_stored_but_read_back_from_sbuf():
    tile = 128 * 512 * 4
    g = _chain({"x", "h", "y"})
    assert g.dma_bytes == 3 * tile and g.resident_bytes == tile


def test_an_intermediate_larger_than_the_resident_share_passes_through_hbm():
    import dataclasses
    small_sbuf = dataclasses.replace(isa.costs.get_costs("trn2"), graph_resident_fraction=1e-3)
    a, b = _scale("a"), _scale("b")
    g = isa.schedule_graph([(a, _keys(a, "x", "h")), (b, _keys(b, "h", "y"))], small_sbuf, {"x", "y"})
    assert g.resident_bytes == 0 and g.dma_bytes == 4 * 128 * 512 * 4


def test_graph_transfers_stream_at_the_profiles_graph_rate():
    """trn1: compiled graphs at the DMA guide's 17 B/ns per engine, hand-written kernels at the
    7.2 B/ns the NKI matmul tutorial measured; trn2 uses one rate for both."""
    c1, c2 = isa.costs.get_costs("trn1"), isa.costs.get_costs("trn2")
    assert (c1.dma_bytes_per_ns, c1.graph_dma_bytes_per_ns) == (7.2, 17.0)
    assert c2.graph_dma_bytes_per_ns == c2.dma_bytes_per_ns
    p1 = _scale("a", cols=4096, profile="trn1")
    alone, graph = isa.schedule(p1), isa.schedule_graph([(p1, None)])
    assert graph.busy_ns["dma"] < 0.6 * alone.busy_ns["dma"]
    assert graph.latency_ns < alone.latency_ns
    p2 = _scale("a", cols=4096, profile="trn2")
    assert isa.schedule_graph([(p2, None)]).latency_ns == pytest.approx(isa.schedule(p2).latency_ns)


def test_a_resident_tensor_read_transposed_is_transposed_on_tensore():
    """A transposing load of a tensor in SBUF moves nothing through the DMA engines: TensorE
    transposes it into PSUM and ScalarE or VectorE copies it out."""
    a, b = _scale("a", cols=128), _scale("b", cols=128, transpose=True)
    parts = [(a, _keys(a, "x", "h")), (b, _keys(b, "h", "y"))]
    hbm, resident = isa.schedule_graph(parts, None, None), isa.schedule_graph(parts, None, {"x", "y"})
    tile = 128 * 128 * 4
    assert resident.resident_bytes == 2 * tile and resident.dma_bytes == 2 * tile
    c = isa.costs.get_costs("trn2")
    # one 128 x 128 fp32 block: the transpose at the fp32 rate (NC-v3 transpose mode: half the 4x)
    assert hbm.busy_ns["tensor"] == 0
    assert resident.busy_ns["tensor"] == pytest.approx(128 * 2 / c.tensor_ghz)
    copy = resident.busy_ns["scalar"] + resident.busy_ns["vector"] - hbm.busy_ns["vector"]
    assert copy == pytest.approx((128 + c.access_overhead_cycles) / min(c.scalar_ghz, c.vector_ghz))
    # a's store and b's transposing load no longer occupy the DMA engines
    assert resident.busy_ns["dma"] < hbm.busy_ns["dma"]
    assert resident.latency_ns < hbm.latency_ns
