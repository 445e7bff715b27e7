"""The per-device timeline and its Chrome trace export."""

from __future__ import annotations

import json

import numpy as np
import pytest

import neuron_sim as ns


def test_records_carry_names_kinds_and_times(fresh_runtime):
    ptr = ns.malloc(4096, device=1)
    with ns.Queue(1) as q:
        q.launch("matmul_bf16", 2_000.0)
        q.launch("aten::nonzero", 500.0, kind=ns.LaunchKind.FALLBACK)
        ns.memcpy_htod(ptr, np.zeros(1024, np.float32), queue=q)
        ns.memset(ptr, 0, 4096, queue=q)
        queue_id = q.id
    ns.free(ptr)
    records = [r for r in ns.timeline(1) if r.queue_id == queue_id]
    assert [(r.name, r.kind) for r in records[:2]] == [
        ("matmul_bf16", ns.LaunchKind.KERNEL), ("aten::nonzero", ns.LaunchKind.FALLBACK)]
    assert [r.kind for r in records[2:]] == [ns.LaunchKind.MEMCPY, ns.LaunchKind.MEMSET]
    assert [r.bytes for r in records] == [0, 0, 4096, 4096]
    assert records[0].duration_ns == pytest.approx(2_000.0)
    assert records[1].duration_ns == pytest.approx(500.0)
    for prev, nxt in zip(records, records[1:]):
        assert nxt.start_ns == pytest.approx(prev.end_ns)
    assert all(r.device == 1 for r in records)
    assert ns.timeline(0) == []


def test_clear_and_disable(fresh_runtime):
    q = ns.Queue(0)
    q.launch("a", 1.0)
    ns.timeline_clear(0)
    assert ns.timeline(0) == []
    ns.set_timeline_enabled(False)
    q.launch("b", 1.0)
    assert ns.timeline(0) == []
    ns.set_timeline_enabled(True)
    q.launch("c", 1.0)
    assert [r.name for r in ns.timeline(0)] == ["c"]
    q2 = ns.Queue(2)
    q2.launch("d", 1.0)
    ns.timeline_clear(-1)
    assert ns.timeline(0) == ns.timeline(2) == []


def test_names_are_interned():
    first = ns.register_name("my_kernel")
    assert ns.register_name("my_kernel") == first
    assert ns.get_name(first) == "my_kernel"
    assert ns.get_name(0xFFFFFFF0) is None


def test_chrome_trace_holds_every_launch(fresh_runtime, tmp_path):
    durations = {"k_gemm": 3_000.0, "k_softmax": 700.0}
    qa, qb = ns.Queue(0), ns.Queue(3)
    qa.launch("k_gemm", durations["k_gemm"])
    qb.launch("k_softmax", durations["k_softmax"])
    path = tmp_path / "trace.json"
    ns.export_chrome_trace(path)
    trace = json.loads(path.read_text())
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    complete = {e["name"]: e for e in events if e.get("ph") == "X"}
    assert set(durations) <= set(complete)
    for name, ns_duration in durations.items():
        # Chrome trace times are microseconds.
        assert complete[name]["dur"] == pytest.approx(ns_duration / 1000.0)
    assert complete["k_gemm"]["pid"] != complete["k_softmax"]["pid"] or \
        complete["k_gemm"]["tid"] != complete["k_softmax"]["tid"]
    recorded = {r.name: r for r in ns.timeline(0) + ns.timeline(3)}
    assert complete["k_gemm"]["ts"] == pytest.approx(recorded["k_gemm"].start_ns / 1000.0)


def test_chrome_trace_bad_path():
    with pytest.raises(ns.NeuronSimError) as info:
        ns.export_chrome_trace("/nonexistent-dir/trace.json")
    assert "/nonexistent-dir/trace.json" in info.value.message
