# Copyright 2026 The neuron-sim Authors. Licensed under the Apache License, Version 2.0.
"""schedule_graph: the kernels of one compiled graph placed as one launch (one NEFF)."""

import pytest

from neuron_sim import isa


def _scale(name, rows=128, cols=512, profile="trn2"):
    """y = 2 * x: load, one VectorE op, store (x and y in HBM)."""
    b = isa.ProgramBuilder(name, profile)
    x = b.hbm("x", (rows, cols), "float32", "input")
    y = b.hbm("y", (rows, cols), "float32", "output")
    t = b.alloc((rows, cols), "float32")
    b.dma_copy(t, x)
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
