"""Fault injection surfaces as the matching exceptions, and the runtime recovers."""

from __future__ import annotations

import numpy as np
import pytest

import neuron_sim as ns


def test_nth_allocation_fails():
    ns.faults.fail_nth_alloc(3)
    first, second = ns.malloc(64), ns.malloc(64, device=1)
    with pytest.raises(ns.OutOfMemoryError) as info:
        ns.malloc(64, device=2)
    assert "inject" in info.value.message.lower()
    fourth = ns.malloc(64, device=2)  # one-shot
    for p in (first, second, fourth):
        ns.free(p)


def test_disarmed_allocation_fault():
    ns.faults.fail_nth_alloc(1)
    ns.faults.fail_nth_alloc(0)
    ns.free(ns.malloc(64))
    ns.faults.fail_nth_alloc(1)
    ns.faults.clear()
    ns.free(ns.malloc(64))


def test_kernel_fault_counts_and_skips_the_body():
    ran = []
    ns.faults.fail_kernel("flaky", 2)
    with ns.Queue(0) as q:
        for _ in range(2):
            with pytest.raises(ns.LaunchFailedError) as info:
                q.launch("flaky", 10.0, fn=lambda: ran.append(1))
            assert "flaky" in info.value.message
        q.launch("flaky", 10.0, fn=lambda: ran.append(1))
        q.launch("other", 10.0)
    assert ran == [1]


def test_kernel_fault_forever_until_cleared():
    ns.faults.fail_kernel("always", -1)
    with ns.Queue(0) as q:
        for _ in range(3):
            with pytest.raises(ns.LaunchFailedError):
                q.launch("always", 1.0)
        ns.faults.clear()
        q.launch("always", 1.0)


def test_device_lost_until_shutdown(fresh_runtime):
    ptr = ns.malloc(64, device=2)
    ns.faults.set_device_lost(2)
    with pytest.raises(ns.DeviceLostError) as info:
        ns.malloc(64, device=2)
    assert "2" in info.value.message
    with pytest.raises(ns.DeviceLostError):
        ns.memcpy_htod(ptr, np.zeros(4, np.uint8))
    with pytest.raises(ns.DeviceLostError):
        ns.Queue.default(2).launch("k", 1.0)
    ns.free(ns.malloc(64, device=1))  # other devices keep working
    ns.shutdown()
    ns.free(ns.malloc(64, device=2))


def test_faults_armed_from_the_environment():
    # NEURON_SIM_FAULT_*: the same faults, armed at nsimInit in a fresh process.
    from nsim_child import child_env, run_python

    proc = run_python("""
        import neuron_sim as ns
        out = []
        a = ns.malloc(64)
        for _ in range(2):
            try:
                ns.malloc(64)
            except ns.OutOfMemoryError as e:
                out.append("oom" if "inject" in e.message else e.message)
        ns.free(ns.malloc(64))
        q = ns.Queue.default(0)
        for _ in range(3):
            try:
                q.launch("flaky", 1.0)
                out.append("ran")
            except ns.LaunchFailedError as e:
                out.append("failed" if "flaky" in e.message else e.message)
        q1 = ns.Queue.default(1)
        for _ in range(3):
            try:
                q1.launch("k", 1.0)
                out.append("ran")
            except ns.DeviceLostError as e:
                out.append("lost" if "device 1 is lost" in e.message else e.message)
        try:
            ns.malloc(64, device=1)
        except ns.DeviceLostError:
            out.append("lost")
        ns.free(ns.malloc(64, device=0))
        print(" ".join(out))
    """, child_env(NEURON_SIM_FAULT_ALLOC="2:2", NEURON_SIM_FAULT_KERNEL="flaky=2,never=1",
                   NEURON_SIM_FAULT_DEVICE_LOST="1@2"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["oom", "oom", "failed", "failed", "ran", "ran", "lost", "lost", "lost"]
