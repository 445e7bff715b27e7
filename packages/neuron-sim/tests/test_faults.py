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
