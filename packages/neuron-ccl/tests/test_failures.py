"""A rank that calls a different collective, arrives late, dies or passes a host pointer
makes every rank fail with one precise error, on both transports, never a hang."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from buffers import algo_env  # noqa: E402
from ranks import run_ranks  # noqa: E402


def _mismatch(comm):
    import neuron_sim
    n = 100 if comm.rank == 0 else 101
    b = neuron_sim.DeviceBuffer(4 * 101, device=comm.device)
    comm.all_reduce(int(b), int(b), n, "float32", "sum")


@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_mismatched_sizes_fail_on_every_rank(transport):
    results = run_ranks(_mismatch, 2, env=algo_env(transport))
    for r in range(2):
        status, msg = results[r]
        # Over TCP the rank that reads the other's frame first reports the mismatch; the other
        # may instead learn it from the abort frame: the message is the same.
        assert status == "error" and "count=100" in msg and "count=101" in msg, msg
        assert "CclMismatchError" in msg or "CclPeerError" in msg, msg


def _different_ops(comm):
    import neuron_sim
    b = neuron_sim.DeviceBuffer(64, device=comm.device)
    if comm.rank == 0:
        comm.broadcast(int(b), 16, "float32", 0)  # the root only sends: it must still notice
    else:
        comm.all_reduce(int(b), int(b), 16, "float32", "sum")


@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_different_operations_fail_on_every_rank_including_a_sending_root(transport):
    results = run_ranks(_different_ops, 2, env=algo_env(transport))
    for r in range(2):
        status, msg = results[r]
        assert status == "error" and "mismatched" in msg and "broadcast" in msg and "all_reduce" in msg, msg


def _late(comm):
    import time
    import neuron_sim
    b = neuron_sim.DeviceBuffer(64, device=comm.device)
    if comm.rank == 1:
        time.sleep(2.5)
    t0 = time.monotonic()
    try:
        comm.all_reduce(int(b), int(b), 16, "float32", "sum")
    finally:
        print(f"rank {comm.rank} failed after {time.monotonic() - t0:.2f}s", flush=True)


@pytest.mark.parametrize("transport", ["shm", "tcp"])
def test_timeout_names_the_missing_rank_and_reaches_every_rank(transport):
    results = run_ranks(_late, 2, timeout_s=1.5, env=algo_env(transport))
    assert results[0][0] == "error" and "CclTimeoutError" in results[0][1] and "[1]" in results[0][1]
    assert results[1][0] == "error" and "aborted" in results[1][1] and "timed out" in results[1][1]


def _dies(comm):
    import os
    import time
    import neuron_sim
    b = neuron_sim.DeviceBuffer(64, device=comm.device)
    if comm.rank == 1:
        os._exit(7)
    t0 = time.monotonic()
    try:
        comm.all_reduce(int(b), int(b), 16, "float32", "sum")
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__} after {time.monotonic() - t0:.2f}s: {e}"
    return "no error"


@pytest.mark.parametrize("world,transport", [(2, "shm"), (2, "tcp"), (3, "tcp")])
def test_dead_peer_is_detected_before_the_timeout(world, transport):
    results = run_ranks(_dies, world, timeout_s=60, deadline_s=30, env=algo_env(transport))
    status, msg = results[0]
    assert status == "ok" and msg.startswith("CclPeerError") and "rank 1" in msg and "exited" in msg, msg
    assert float(msg.split(" after ")[1].split("s:")[0]) < 5


def _host_pointer(comm):
    a = np.zeros(4, np.float32)
    comm.all_reduce(a.ctypes.data, a.ctypes.data, 4, "float32", "sum")


def test_host_buffers_are_rejected_with_a_clear_message():
    results = run_ranks(_host_pointer, 1)
    assert results[0][0] == "error" and "ValueError" in results[0][1] and "not live neuron_sim device memory" in results[0][1]
