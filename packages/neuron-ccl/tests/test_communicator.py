"""The communicator object: launches on the device timeline with the modelled duration,
algorithm selection and its override, transport choice, and the environment registry."""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from buffers import algo_env, all_reduce_cases  # noqa: E402
from ranks import ok_values, run_ranks  # noqa: E402


def _timeline(comm):
    import neuron_sim
    out = []
    for n in (1 << 10, 1 << 22):
        b = neuron_sim.DeviceBuffer(n * 4, device=comm.device)
        neuron_sim.synchronize(comm.device)
        t0 = neuron_sim.device_time_ns(comm.device)
        comm.all_reduce(int(b), int(b), n, "float32", "sum")
        out.append(neuron_sim.device_time_ns(comm.device) - t0)
    return out


def test_collectives_occupy_the_device_timeline_for_the_modelled_time():
    small, large = ok_values(run_ranks(_timeline, 2))[0]
    assert small > 0 and large > small
    # 16 MiB on two cores of one trn2 chip: 2(n-1)/n * S over half the core's HBM share.
    import neuron_sim
    props = neuron_sim.get_device_properties(0)
    expected = (16 << 20) / (props.hbm_bandwidth / 2) * 1e9
    assert 0.8 * expected < large < 1.5 * expected, (large, expected)


def test_algorithm_selection_and_override(monkeypatch):
    import neuron_ccl
    sel = neuron_ccl.select_algorithm
    for var in ("NEURON_CCL_ALGO", "NEURON_CCL_ONESHOT_MAX_BYTES", "NEURON_CCL_RDOUBLE_MAX_BYTES",
                "NEURON_CCL_RING_MAX_BYTES", "NEURON_CCL_TREE_MAX_BYTES"):
        monkeypatch.delenv(var, raising=False)
    # Shared memory: small -> oneshot (2 or non-power-of-two ranks) or recursive doubling (4, 8, ...);
    # then (3+ ranks) the ring below NEURON_CCL_RING_MAX_BYTES (32 MiB), twoshot above. Two ranks: twoshot.
    assert sel("allreduce", 1, 2) == "twoshot"
    assert sel("allreduce", 4096, 2) == "twoshot"
    assert sel("allreduce", 4096, 3) == "oneshot"
    assert sel("allreduce", 4096, 4) == "rdouble"
    assert sel("allreduce", 64 << 10, 8) == "rdouble"
    assert sel("allreduce", (64 << 10) + 1, 8) == "ring"
    assert sel("allreduce", 16 << 20, 2) == "twoshot"
    assert sel("allreduce", 256 << 20, 2) == "twoshot"
    assert sel("allreduce", 16 << 20, 4) == "ring"
    assert sel("allreduce", (32 << 20) - 1, 3) == "ring"
    assert sel("allreduce", 32 << 20, 3) == "twoshot"
    assert sel("allreduce", 1, 1) == "oneshot"
    assert sel("allgather", 64 << 20, 4) == "direct"
    # TCP: small -> recursive doubling (power of two) or the tree (other counts); ring otherwise; rings for AG / RS.
    assert sel("allreduce", 4096, 4, "tcp") == "rdouble"
    assert sel("allreduce", 4096, 3, "tcp") == "tree"
    assert sel("allreduce", 64 << 10, 6, "tcp") == "tree"
    assert sel("allreduce", (64 << 10) + 1, 3, "tcp") == "ring"
    assert sel("allreduce", 4096, 2, "tcp") == "rdouble"
    assert sel("allreduce", 1 << 20, 4, "tcp") == "ring"
    assert sel("allgather", 4096, 4, "tcp") == "ring"
    assert sel("reducescatter", 4096, 4, "tcp") == "ring"
    monkeypatch.setenv("NEURON_CCL_RING_MAX_BYTES", "0")
    assert sel("allreduce", 1 << 20, 3) == "twoshot"
    monkeypatch.setenv("NEURON_CCL_ALGO", "allreduce=twoshot")
    assert sel("allreduce", 4096, 2) == "twoshot"
    with pytest.raises(ValueError, match="NEURON_CCL_ALGO.*twoshot.*unknown for the tcp transport"):
        sel("allreduce", 4096, 2, "tcp")
    monkeypatch.setenv("NEURON_CCL_ALGO", "allreduce=ring,allgather=direct")
    assert sel("allreduce", 4096, 2) == "ring" and sel("allgather", 4096, 2) == "direct"
    monkeypatch.setenv("NEURON_CCL_ALGO", "allreduce=bogus")
    with pytest.raises(ValueError, match="NEURON_CCL_ALGO.*oneshot, twoshot, ring, rdouble"):
        sel("allreduce", 4096, 2)
    monkeypatch.setenv("NEURON_CCL_ALGO", "allreduse=ring")
    with pytest.raises(ValueError, match="NEURON_CCL_ALGO.*allreduse=ring"):
        sel("allreduce", 4096, 2)


def _transport(comm):
    return comm.transport


def test_invalid_transport_names_the_variable():
    results = run_ranks(_transport, 1, env={"NEURON_CCL_TRANSPORT": "udp"})
    assert results[0][0] == "error" and "NEURON_CCL_TRANSPORT='udp'" in results[0][1], results[0][1]


def test_rdouble_on_three_ranks_is_refused_clearly():
    results = run_ranks(all_reduce_cases, 3, cases=[("float32", "sum", 8, 0)], env=algo_env("shm", "rdouble"))
    for r in range(3):
        assert results[r][0] == "error" and "power-of-two" in results[r][1] and "NEURON_CCL_ALGO" in results[r][1]


def test_environment_registry_lists_every_variable():
    import neuron_ccl
    names = {v[0] for v in neuron_ccl.env_vars()}
    assert {"NEURON_CCL_ALGO", "NEURON_CCL_TIMEOUT_MS", "NEURON_CCL_FLIGHT_RECORDER_SIZE", "NEURON_CCL_TRANSPORT",
            "NEURON_CCL_RDOUBLE_MAX_BYTES", "NEURON_CCL_RING_MAX_BYTES", "NEURON_CCL_RING_SLICE_BYTES",
            "NEURON_CCL_STAGING_BYTES", "NEURON_CCL_TCP_ADDR", "NEURON_CCL_TREE_MAX_BYTES"} <= names
