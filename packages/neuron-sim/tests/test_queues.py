"""Queues, events and launches: the simulated clock, cross-queue ordering, host functions."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import neuron_sim as ns
from nsim_child import run_python


def test_elapsed_time_is_the_sum_of_modelled_durations():
    durations = [1_000.0, 25_000.0, 333.5, 70_000.0]
    with ns.Queue(0) as q:
        start, end = ns.Event(0), ns.Event(0)
        start.record(q)
        for i, d in enumerate(durations):
            q.launch(f"k{i}", d)
        end.record(q)
        assert start.elapsed_time(end) == pytest.approx(sum(durations) / 1e6, rel=1e-6)
        assert end.time_ns - start.time_ns == pytest.approx(sum(durations))
        assert q.time_ns == pytest.approx(end.time_ns)
        assert end.elapsed_time(start) == pytest.approx(-sum(durations) / 1e6, rel=1e-6)


def test_queues_overlap_and_wait_event_orders_them():
    a, b = ns.Queue(1), ns.Queue(1)
    t0 = max(a.time_ns, b.time_ns, ns.device_time_ns(1))
    a.wait_event(_recorded_at(b))  # start both at the same point
    b.wait_event(_recorded_at(a))
    base = max(a.time_ns, b.time_ns)
    assert base >= t0
    a.launch("producer", 50_000.0)
    b.launch("independent", 10_000.0)
    assert a.time_ns == pytest.approx(base + 50_000.0)
    assert b.time_ns == pytest.approx(base + 10_000.0)  # overlapped with a, not after it
    done = ns.Event(1)
    done.record(a)
    b.wait_event(done)
    b.launch("consumer", 5_000.0)
    assert b.time_ns == pytest.approx(base + 55_000.0)
    recs = {r.name: r for r in ns.timeline(1) if r.name in ("producer", "independent", "consumer")}
    assert recs["consumer"].start_ns == pytest.approx(recs["producer"].end_ns)
    assert recs["independent"].start_ns == pytest.approx(recs["producer"].start_ns)
    assert ns.device_time_ns(1) >= b.time_ns
    a.destroy()
    b.destroy()


def _recorded_at(q):
    e = ns.Event(q.device)
    e.record(q)
    return e


def test_copies_on_a_queue_take_modelled_time():
    nbytes = 1 << 20
    ptr = ns.malloc(nbytes, device=2)
    try:
        with ns.Queue(2) as q:
            t0 = q.time_ns
            ns.memcpy_htod(ptr, np.zeros(nbytes, np.uint8), queue=q)
            expected = ns.model_copy_duration(2, ns.MemcpyKind.HOST_TO_DEVICE, nbytes)
            assert expected > 0
            assert q.time_ns - t0 == pytest.approx(expected)
            rec = [r for r in ns.timeline(2) if r.queue_id == q.id][-1]
            assert (rec.kind, rec.bytes) == (ns.LaunchKind.MEMCPY, nbytes)
            assert rec.duration_ns == pytest.approx(expected)
    finally:
        ns.free(ptr)


def test_copy_model_scales_with_size():
    small = ns.model_copy_duration(0, ns.MemcpyKind.HOST_TO_DEVICE, 1 << 10)
    large = ns.model_copy_duration(0, ns.MemcpyKind.HOST_TO_DEVICE, 1 << 30)
    host_bw = ns.get_device_properties(0).host_link_bandwidth
    # A 1 GiB transfer is dominated by the host link rate (profile figure, see README).
    assert large == pytest.approx((1 << 30) / host_bw * 1e9, rel=0.05)
    assert small < large


def test_python_host_function_runs_before_launch_returns():
    calls = []
    with ns.Queue(0) as q:
        q.launch("host_fn", 100.0, fn=lambda: calls.append(q.time_ns), kind=ns.LaunchKind.HOST_FUNC)
        assert len(calls) == 1
        assert ns.timeline(0)[-1].kind == ns.LaunchKind.HOST_FUNC


def test_python_exception_in_launch_becomes_launch_failed():
    def boom():
        raise ZeroDivisionError("kernel body failed")

    with ns.Queue(0) as q:
        with pytest.raises(ns.LaunchFailedError) as info:
            q.launch("bad_kernel", 10.0, fn=boom)
        assert isinstance(info.value.__cause__, ZeroDivisionError)
        assert "bad_kernel" in info.value.message
        assert "ZeroDivisionError('kernel body failed')" in info.value.message
        with pytest.raises(ns.LaunchFailedError, match="returned 3"):
            q.launch("status_kernel", 10.0, fn=lambda: 3)
        with pytest.raises(ns.LaunchFailedError, match="returned 1"):
            q.launch("huge_status", 10.0, fn=lambda: 1 << 80)
        q.launch("ok_kernel", 10.0, fn=lambda: 0)


def test_native_host_function_runs_with_user_data():
    proto = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
    cell = ctypes.c_int(0)

    @proto
    def add_seven(user_data):
        ctypes.cast(user_data, ctypes.POINTER(ctypes.c_int))[0] += 7
        return 0

    address = ctypes.cast(add_seven, ctypes.c_void_p).value
    with ns.Queue(0) as q:
        q.launch("native", 10.0, fn=address, user_data=ctypes.addressof(cell))
        q.launch("native", 10.0, fn=add_seven, user_data=ctypes.addressof(cell))
        assert cell.value == 14

        @proto
        def refuse(user_data):
            return 5

        with pytest.raises(ns.LaunchFailedError, match="returned 5"):
            q.launch("native_refuses", 10.0, fn=refuse)
        with pytest.raises(ns.InvalidValueError, match="callable"):
            q.launch("not_callable", 10.0, fn="kernel")


def test_event_states():
    e = ns.Event(0)
    assert e.query()  # nothing recorded: complete, as in CUDA
    with pytest.raises(ns.NotReadyError):
        _ = e.time_ns
    with pytest.raises(ns.NotReadyError):
        e.elapsed_time(_recorded_at(ns.default_queue(0)))
    e.record()
    e.synchronize()
    assert e.query()
    no_timing = ns.Event(0, enable_timing=False)
    no_timing.record()
    with pytest.raises(ns.TimingDisabledError):
        e.elapsed_time(no_timing)


def test_default_queue():
    q = ns.default_queue(3)
    assert q.is_default and q.device == 3
    assert ns.Queue.default(3).id == q.id
    q.launch("on_default", 10.0)
    q.synchronize()
    assert q.query()
    with pytest.raises(ns.InvalidQueueError, match="default queue"):
        q.destroy()


def test_queue_metadata_and_counters():
    live = ns.counters(1)["live_queues"]
    q = ns.Queue(1, priority=-1)
    assert (q.device, q.priority, q.is_default) == (1, -1, False)
    assert q.id != ns.default_queue(1).id
    assert ns.counters(1)["live_queues"] == live + 1
    launches = ns.counters(1)["launches"]
    q.launch("counted", 1.0)
    assert ns.counters(1)["launches"] == launches + 1
    q.destroy()
    assert ns.counters(1)["live_queues"] == live


def test_destroyed_queue_and_event_raise():
    q = ns.Queue(0)
    q.destroy()
    for use in (lambda: q.launch("x", 1.0), q.synchronize, lambda: q.time_ns, q.destroy):
        with pytest.raises(ns.InvalidQueueError, match="destroyed"):
            use()
    e = ns.Event(0)
    e.destroy()
    with pytest.raises(ns.InvalidEventError, match="destroyed"):
        e.record()
    with pytest.raises(ns.InvalidQueueError):
        ns.Event(0).record(q)
    with pytest.raises(ns.InvalidQueueError):
        ns.memset(0, 0, 1, queue=q)


def test_invalid_queue_and_event_arguments():
    with pytest.raises(ns.InvalidDeviceError):
        ns.Queue(17)
    with pytest.raises(ns.InvalidDeviceError):
        ns.Event(-2)
    # As in CUDA, priorities outside the range are clamped into it.
    assert ns.Queue(0, priority=5).priority == 0
    assert ns.Queue(0, priority=-9).priority == -1


def test_objects_from_before_shutdown_are_stale(fresh_runtime):
    q, e = ns.Queue(0), ns.Event(0)
    buf = ns.DeviceBuffer(64)
    ns.shutdown()
    assert not ns.is_initialized()
    with pytest.raises(ns.InvalidQueueError, match="shutdown"):
        q.launch("x", 1.0)
    with pytest.raises(ns.InvalidEventError, match="shutdown"):
        e.record()
    with pytest.raises(ns.InvalidPointerError, match="shutdown"):
        buf.copy_from(np.zeros(8))
    assert ns.device_count() == 4  # lazily initialised again
    del q, e, buf  # destructors must not touch the new runtime
    assert ns.counters(0)["live_allocations"] == 0


def test_native_launch_releases_the_gil():
    # The launch blocks in sem_wait until a Python thread posts the semaphore: if the GIL
    # were held during the launch, that thread could never run and the child would hang.
    proc = run_python("""
        import ctypes, threading, time, neuron_sim as ns
        libc = ctypes.CDLL(None, use_errno=True)
        sem = ctypes.create_string_buffer(64)  # >= sizeof(sem_t)
        assert libc.sem_init(sem, 0, 0) == 0
        launching = threading.Event()

        def post():
            launching.wait()
            time.sleep(0.05)  # let the main thread enter sem_wait first
            libc.sem_post(sem)

        poster = threading.Thread(target=post)
        q = ns.Queue(0)
        poster.start()
        launching.set()
        q.launch("blocking_native", 10.0, fn=libc.sem_wait, user_data=ctypes.addressof(sem))
        poster.join()
        print("done")
    """, timeout=20)
    assert proc.returncode == 0 and proc.stdout.strip() == "done", proc.stderr
