"""The launch cost model (nsimModelLaunchDuration) and the cost inputs kept on timeline records."""

from __future__ import annotations

import time

import numpy as np
import pytest

import neuron_sim as ns

M, D, C = ns.CostModel, ns.DtypeClass, ns.ComputeClass


def _model(*args, **kw):
    return ns.model_launch_duration(0, *args, **kw)


def test_roofline_takes_the_larger_of_compute_and_memory_time(fresh_runtime):
    p = ns.get_device_properties(0)
    compute_bound = _model(M.ROOFLINE, D.BF16, C.TENSOR, flops=1e12, bytes_read=1e3)
    assert compute_bound == pytest.approx(p.launch_overhead_ns + 1e12 / p.peak_flops_bf16 * 1e9)
    memory_bound = _model(M.ROOFLINE, D.FP32, C.VECTOR, flops=1e3, bytes_read=3e8, bytes_written=1e8)
    assert memory_bound == pytest.approx(p.launch_overhead_ns + 4e8 / p.hbm_bandwidth * 1e9)
    vector = _model(M.ROOFLINE, D.BF16, C.VECTOR, flops=1e12)
    assert vector == pytest.approx(p.launch_overhead_ns + 1e12 / p.vector_flops_fp32 * 1e9)


def test_each_precision_has_its_tensor_engine_peak(fresh_runtime):
    p = ns.get_device_properties(0)
    peaks = {D.FP32: p.peak_flops_fp32, D.BF16: p.peak_flops_bf16, D.FP8: p.peak_flops_fp8,
             D.INT: p.vector_flops_fp32}
    for dtype, peak in peaks.items():
        assert _model(M.ROOFLINE, dtype, C.TENSOR, flops=1e12) == pytest.approx(
            p.launch_overhead_ns + 1e12 / peak * 1e9), dtype


def test_host_round_trip_adds_the_host_link_and_two_dma_setups(fresh_runtime):
    p = ns.get_device_properties(0)
    base = _model(M.ROOFLINE, D.FP32, C.VECTOR, flops=10, bytes_read=1e6, bytes_written=1e6)
    host = _model(M.HOST_ROUND_TRIP, D.FP32, C.VECTOR, flops=10, bytes_read=1e6, bytes_written=1e6)
    assert host - base == pytest.approx(2e6 / p.host_link_bandwidth * 1e9 + 2 * p.dma_fixed_overhead_ns)


def test_kernel_schedule_adds_the_launch_overhead(fresh_runtime):
    p = ns.get_device_properties(0)
    assert _model(M.KERNEL_SCHEDULE, D.BF16, C.TENSOR, duration_ns=5000.0) == pytest.approx(
        p.launch_overhead_ns + 5000.0)


def test_invalid_inputs_are_refused_with_the_reason(fresh_runtime):
    with pytest.raises(ns.NeuronSimError, match="finite and >= 0"):
        _model(M.ROOFLINE, D.FP32, C.VECTOR, flops=-1.0)
    with pytest.raises(ns.NeuronSimError, match="model must be"):
        _model(M.COPY, D.FP32, C.VECTOR)


def test_records_carry_model_correlation_and_host_time(fresh_runtime):
    ptr = ns.malloc(4096, device=0)
    t0 = time.time_ns()
    ns._C.correlation_push(77)
    with ns.Queue(0) as q:
        q.launch("k", 100.0)
        ns.memcpy_htod(ptr, np.zeros(1024, np.float32), queue=q)
        queue_id = q.id
    ns._C.correlation_pop()
    with ns.Queue(0) as q2:
        q2.launch("after", 1.0)
    ns.free(ptr)
    records = [r for r in ns.timeline(0) if r.queue_id in (queue_id,)]
    assert [r.model for r in records] == [M.UNSPECIFIED, M.COPY]
    assert [r.correlation_id for r in records] == [77, 77]
    assert records[1].bytes_read == records[1].bytes_written == 4096
    assert all(t0 <= r.host_ns <= time.time_ns() for r in records)
    assert records[0].sequence < records[1].sequence
    assert ns.timeline(0)[-1].correlation_id == 0
    with pytest.raises(ns.NeuronSimError, match="no correlation id is pushed"):
        ns._C.correlation_pop()
