# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""Runtime APIs a user relies on: torch.accelerator, streams and events on the simulated
device clock, memory statistics, out-of-memory recovery, fallback accounting."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch_neuron

pytestmark = pytest.mark.timeout(120)

DEV = torch.device("neuron", 0)
MiB = 1 << 20


def _run_python(code, env_extra, timeout=90):
    env = dict(os.environ, **env_extra)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, check=False,
                          text=True, timeout=timeout)


# ---------------------------------------------------------------- torch.accelerator

def test_accelerator_api_reports_neuron():
    assert torch.accelerator.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("neuron")
    assert torch.accelerator.current_accelerator().type == "neuron"
    n = torch.accelerator.device_count()
    assert n == torch.neuron.device_count() >= 2
    assert torch.neuron.is_available()
    assert torch.get_device_module("neuron") is torch.neuron
    assert isinstance(torch.neuron.get_device_name(0), str) and torch.neuron.get_device_name(0)
    props = torch.neuron.get_device_properties(0)
    assert props.total_memory > 0 and props.name


def test_accelerator_device_index_switching():
    assert torch.accelerator.current_device_index() == 0
    with torch.accelerator.device_index(1):
        assert torch.accelerator.current_device_index() == 1
        assert torch.neuron.current_device() == 1
        assert torch.empty(1, device="neuron").device == torch.device("neuron", 1)
    assert torch.accelerator.current_device_index() == 0
    torch.neuron.set_device(2)
    try:
        assert torch.empty(1, device="neuron").device == torch.device("neuron", 2)
        with torch.neuron.device(3):
            assert torch.neuron.current_device() == 3
        assert torch.neuron.current_device() == 2
    finally:
        torch.neuron.set_device(0)
    with pytest.raises(Exception, match="99"):
        torch.neuron.set_device(99)


def test_accelerator_memory_and_synchronize():
    torch.accelerator.synchronize()
    before = torch.accelerator.memory_allocated()
    assert before == torch.neuron.memory_allocated()
    x = torch.empty(2 * MiB, dtype=torch.uint8, device="neuron")
    assert torch.accelerator.memory_allocated() == before + 2 * MiB
    assert torch.accelerator.max_memory_allocated() >= before + 2 * MiB
    del x
    torch.accelerator.synchronize(0)
    assert torch.accelerator.memory_allocated() == before
    stream = torch.accelerator.current_stream()
    assert stream.device == DEV


# ---------------------------------------------------------------- streams and events

def _work(n=4, size=128, a=None):
    a = torch.ones(size, size, device="neuron") if a is None else a
    for _ in range(n):
        a = a @ a / size
    return a


def test_event_elapsed_time_equals_modelled_device_time():
    _work(1)  # first-use costs out of the way
    torch.neuron.synchronize()
    e0 = torch.neuron.Event(enable_timing=True)
    e1 = torch.neuron.Event(enable_timing=True)
    e0.record()
    t0 = torch_neuron.device_time_ns()
    out = _work(6)
    t1 = torch_neuron.device_time_ns()
    e1.record()
    e1.synchronize()
    assert e1.query()
    elapsed_ms = e0.elapsed_time(e1)
    clock_ms = (t1 - t0) / 1e6
    assert elapsed_ms > 0
    assert elapsed_ms == pytest.approx(clock_ms, rel=1e-6, abs=1e-6)
    assert torch.equal(out.cpu(), torch.ones(128, 128))


def test_elapsed_time_scales_with_the_work_in_between():
    _work(1)

    def timed(n):
        a = torch.ones(128, 128, device="neuron")
        e0, e1 = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
        e0.record()
        _work(n, a=a)
        e1.record()
        e1.synchronize()
        return e0.elapsed_time(e1)

    t3, t9 = timed(3), timed(9)
    # identical launches have identical modelled durations, so three times the work
    # takes three times the device time (host gaps do not count)
    assert t3 > 0
    assert t9 == pytest.approx(3 * t3, rel=1e-3)


def test_device_clock_advances_with_work_only():
    torch.neuron.synchronize()
    t0 = torch_neuron.device_time_ns()
    t1 = torch_neuron.device_time_ns()
    assert t1 == t0  # no work, no device time
    _work(2)
    t2 = torch_neuron.device_time_ns()
    assert t2 > t1
    # other devices' clocks are separate
    t_other = torch_neuron.device_time_ns(torch.device("neuron", 1))
    _work(2)
    assert torch_neuron.device_time_ns(torch.device("neuron", 1)) == t_other


def test_stream_context_and_wait_stream_ordering():
    default = torch.neuron.current_stream()
    assert default == torch.neuron.default_stream()
    side = torch.neuron.Stream()
    assert side != default
    x = torch.randn(256, 256).to("neuron")
    done_default = torch.neuron.Event(enable_timing=True)
    y = x
    for _ in range(5):
        y = y @ x / 256
    done_default.record()
    # without a wait, the idle side stream runs ahead of the queued default-stream work
    with torch.neuron.stream(side):
        unordered = torch.neuron.Event(enable_timing=True)
        unordered.record()
    unordered.synchronize()
    done_default.synchronize()
    assert done_default.elapsed_time(unordered) < 0

    side.wait_stream(default)
    with torch.neuron.stream(side):
        assert torch.neuron.current_stream() == side
        start_side = torch.neuron.Event(enable_timing=True)
        start_side.record()
        z = y * 2 + 1
        end_side = torch.neuron.Event(enable_timing=True)
        end_side.record()
    assert torch.neuron.current_stream() == default
    default.wait_stream(side)
    end_side.synchronize()
    # work on `side` starts no earlier than the default-stream work it waited for
    assert done_default.elapsed_time(start_side) >= 0
    assert start_side.elapsed_time(end_side) > 0
    ref = x.cpu()
    y_ref = ref
    for _ in range(5):
        y_ref = y_ref @ ref / 256
    torch.testing.assert_close(z.cpu(), y_ref * 2 + 1, rtol=1e-4, atol=1e-4)
    side.synchronize()
    assert side.query()


def test_event_wait_orders_streams_and_generic_api():
    s1, s2 = torch.neuron.Stream(), torch.neuron.Stream()
    with torch.neuron.stream(s1):
        _work(4)
        ev = torch.neuron.Event(enable_timing=True)
        ev.record()
    s2.wait_event(ev)
    with torch.neuron.stream(s2):
        after = torch.neuron.Event(enable_timing=True)
        after.record()
    after.synchronize()
    assert ev.elapsed_time(after) >= 0
    # the device-generic spelling goes to the same implementation
    s = torch.Stream(device="neuron")
    e = torch.Event(device="neuron", enable_timing=True)
    assert s.device == DEV
    e.record(s)
    e.synchronize()
    assert e.query()


# ---------------------------------------------------------------- memory statistics

CUDA_STAT_KEYS = [
    "allocated_bytes.all.current", "allocated_bytes.all.peak", "allocated_bytes.all.allocated",
    "allocated_bytes.all.freed", "allocated_bytes.small_pool.current", "allocated_bytes.large_pool.current",
    "reserved_bytes.all.current", "reserved_bytes.all.peak", "active_bytes.all.current",
    "inactive_split_bytes.all.current", "requested_bytes.all.current", "allocation.all.current",
    "active.all.current", "segment.all.current", "num_alloc_retries", "num_ooms",
]


def test_memory_allocated_tracks_allocations_exactly():
    torch.neuron.synchronize()
    base = torch.neuron.memory_allocated()
    tensors = []
    expected = base
    for n_bytes in (512, 4096, MiB, 3 * MiB):
        tensors.append(torch.empty(n_bytes // 4, dtype=torch.float32, device="neuron"))
        expected += n_bytes
        assert torch.neuron.memory_allocated() == expected
    # another device's allocations are counted there, not here
    other = torch.empty(MiB, dtype=torch.uint8, device="neuron:1")
    assert torch.neuron.memory_allocated(0) == expected
    assert torch.neuron.memory_allocated(1) >= MiB
    del other
    tensors.pop()
    assert torch.neuron.memory_allocated() == expected - 3 * MiB
    tensors.clear()
    assert torch.neuron.memory_allocated() == base
    assert torch.neuron.memory_reserved() >= torch.neuron.memory_allocated()


def test_max_memory_and_reset_peak():
    torch.neuron.synchronize()
    base = torch.neuron.memory_allocated()
    torch.neuron.reset_peak_memory_stats()
    assert torch.neuron.max_memory_allocated() == base
    x = torch.empty(8 * MiB, dtype=torch.uint8, device="neuron")
    del x
    assert torch.neuron.memory_allocated() == base
    assert torch.neuron.max_memory_allocated() == base + 8 * MiB
    torch.neuron.reset_peak_memory_stats()
    assert torch.neuron.max_memory_allocated() == base


def test_empty_cache_returns_cached_blocks():
    torch.neuron.empty_cache()
    reserved0 = torch.neuron.memory_reserved()
    x = torch.empty(64 * MiB, dtype=torch.uint8, device="neuron")
    assert torch.neuron.memory_reserved() >= reserved0 + 64 * MiB
    del x
    assert torch.neuron.memory_reserved() >= reserved0 + 64 * MiB  # freed blocks stay cached
    torch.neuron.empty_cache()
    assert torch.neuron.memory_reserved() == reserved0
    assert torch.neuron.max_memory_reserved() >= reserved0 + 64 * MiB


def test_empty_cache_returns_small_blocks_reused_in_a_loop():
    # Small blocks freed and reallocated at the same size are reused without merging; they
    # still count as inactive split memory and go back to the device on empty_cache. In a
    # fresh process: holes other tests leave in the small pool would absorb the allocations.
    r = _run_python("""
        import torch
        torch.neuron.empty_cache()
        reserved0 = torch.neuron.memory_reserved()
        allocated0 = torch.neuron.memory_allocated()
        split0 = torch.neuron.memory_stats()["inactive_split_bytes.small_pool.current"]
        keep = []
        for i in range(200):
            t = torch.empty(1000 + 37 * (i % 9), device="neuron")
            if i % 3 == 0:
                keep.append(t)  # live neighbours keep the small segments split
        stats = torch.neuron.memory_stats()
        assert stats["inactive_split_bytes.small_pool.current"] > split0
        assert torch.neuron.memory_reserved() > reserved0
        del keep, t
        assert torch.neuron.memory_allocated() == allocated0
        torch.neuron.empty_cache()
        stats = torch.neuron.memory_stats()
        assert torch.neuron.memory_reserved() == reserved0
        assert stats["inactive_split_bytes.small_pool.current"] == split0
        print("OK")
    """, {})
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr


def test_memory_stats_uses_cuda_key_names():
    x = torch.empty(MiB, dtype=torch.uint8, device="neuron")
    stats = torch.neuron.memory_stats()
    missing = [k for k in CUDA_STAT_KEYS if k not in stats]
    assert not missing, f"memory_stats lacks CUDA keys: {missing}"
    assert stats["allocated_bytes.all.current"] == torch.neuron.memory_allocated()
    assert stats["reserved_bytes.all.current"] == torch.neuron.memory_reserved()
    assert stats["allocated_bytes.all.peak"] >= stats["allocated_bytes.all.current"]
    assert all(isinstance(v, int) for v in stats.values())
    summary = torch.neuron.memory_summary()
    assert isinstance(summary, str) and "Allocated memory" in summary
    del x
    torch.neuron.empty_cache()
    assert torch.neuron.memory_reserved() >= torch.neuron.memory_allocated()


def test_out_of_memory_is_reported_and_recoverable():
    code = """
        import json, torch
        MiB = 1 << 20
        props = torch.neuron.get_device_properties(0)
        chunks, err = [], None
        for _ in range(64):  # bounded: 64 x 8 MiB is well over the 64 MiB capacity
            try:
                chunks.append(torch.empty(8 * MiB, dtype=torch.uint8, device="neuron"))
            except torch.OutOfMemoryError as e:
                err = str(e)
                break
        n_ok = len(chunks)
        ooms = torch.neuron.memory_stats().get("num_ooms")
        chunks.clear()
        torch.neuron.empty_cache()
        after_free = torch.neuron.memory_allocated()
        again = torch.ones(32 * MiB // 4, device="neuron")
        total = again.sum().item()
        other = torch.empty(8 * MiB, dtype=torch.uint8, device="neuron:1")  # other devices unaffected
        print(json.dumps(dict(err=err, n_ok=n_ok, ooms=ooms, after_free=after_free, total=total,
                              total_memory=props.total_memory)))
    """
    r = _run_python(code, {"NEURON_SIM_HBM_CAPACITY": "64M"})
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["total_memory"] == 64 * MiB
    assert res["err"] is not None, "no torch.OutOfMemoryError within 64 allocations of 8 MiB"
    assert 1 <= res["n_ok"] <= 8
    msg = res["err"].lower()
    for word in ("neuron", "free", "capacity"):
        assert word in msg, f"OOM message lacks {word!r}: {res['err']}"
    assert "8.00 mib" in msg or str(8 * MiB) in msg, res["err"]
    assert res["ooms"] == 1
    assert res["after_free"] == 0
    assert res["total"] == 32 * MiB // 4


# ---------------------------------------------------------------- fallback accounting

def _count(executed, short_name):
    """Sum counts of entries whose op name is `short_name` (any namespace or overload)."""
    total = {"native": 0, "fallback": 0}
    for name, counts in executed.items():
        if name.split("::")[-1].split(".")[0] == short_name:
            for k in total:
                total[k] += counts.get(k, 0)
    return total


def test_executed_ops_count_each_execution_and_clear_resets():
    x = torch.rand(8).to("neuron")
    torch_neuron.clear_op_tracking()
    assert _count(torch_neuron.get_executed_ops(), "lgamma") == {"native": 0, "fallback": 0}
    torch.lgamma(x)
    c1 = _count(torch_neuron.get_executed_ops(), "lgamma")
    assert c1["native"] + c1["fallback"] == 1
    torch.lgamma(x)
    torch.lgamma(x)
    c3 = _count(torch_neuron.get_executed_ops(), "lgamma")
    assert c3["native"] + c3["fallback"] == 3
    fb = torch_neuron.get_fallback_ops()
    assert sum(v for k, v in fb.items() if k.split("::")[-1].split(".")[0] == "lgamma") == c3["fallback"]
    torch_neuron.clear_op_tracking()
    assert _count(torch_neuron.get_executed_ops(), "lgamma") == {"native": 0, "fallback": 0}
    assert not any(k.split("::")[-1].split(".")[0] == "lgamma" for k in torch_neuron.get_fallback_ops())


def test_cpu_ops_are_not_counted():
    torch_neuron.clear_op_tracking()
    torch.lgamma(torch.rand(8))
    assert _count(torch_neuron.get_executed_ops(), "lgamma") == {"native": 0, "fallback": 0}


def test_strict_mode_raises_naming_op_and_variable():
    code = """
        import torch
        # copies between host and device are the backend's own kernels, never fallbacks
        x = torch.rand(8).to("neuron")
        q = (torch.rand(8) + 1).to("neuron")
        try:
            torch.special.zeta(x, q)
        except Exception as e:
            print("RAISED", type(e).__name__, str(e).replace(chr(10), " "))
        else:
            print("NO ERROR")
    """
    r = _run_python(code, {"TORCH_NEURON_STRICT": "1"})
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout.strip().splitlines()[-1]
    assert out.startswith("RAISED"), out
    assert "zeta" in out and "TORCH_NEURON_STRICT" in out, out
