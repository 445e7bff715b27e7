"""neuron_ccl's Python API across processes, against numpy references."""
from __future__ import annotations

import os
import sys

import ml_dtypes
import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ranks import ok_values, run_ranks  # noqa: E402

NP = {"float32": np.float32, "float64": np.float64, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16,
      "int32": np.int32, "int64": np.int64, "int8": np.int8, "uint8": np.uint8, "bool": np.bool_}


def data(rank, n, dtype, seed):
    rng = np.random.default_rng(1000 * seed + rank)
    if dtype == "bool":
        return rng.integers(0, 2, n).astype(np.bool_)
    if dtype in ("int32", "int64", "int8", "uint8"):
        return rng.integers(0 if dtype == "uint8" else -30, 30, n).astype(NP[dtype])
    return (rng.standard_normal(n) * 3).astype(NP[dtype])


def reference(inputs, op, factor=1.0):
    wide = [x.astype(np.float32) if x.dtype in (np.float16, ml_dtypes.bfloat16) else x for x in inputs]
    fns = {"sum": np.add, "avg": np.add, "premul_sum": np.add, "max": np.maximum, "min": np.minimum,
           "product": np.multiply, "band": np.bitwise_and, "bor": np.bitwise_or, "bxor": np.bitwise_xor}
    out = wide[0].copy()
    for x in wide[1:]:
        out = fns[op](out, x)
    if op == "avg":
        out = out / len(inputs) if out.dtype.kind == "f" else (out // len(inputs))
    if op == "premul_sum":
        out = out * factor
    return out.astype(inputs[0].dtype)


def _device_array(arr, device):
    import neuron_sim
    return neuron_sim.DeviceBuffer.from_array(np.ascontiguousarray(arr).view(np.uint8), device=device)


def _read(buf, dtype, n):
    dt = np.dtype(NP[dtype] if isinstance(dtype, str) else dtype)
    return buf.to_numpy(np.uint8)[: n * dt.itemsize].view(dt).copy()


def _all_reduce_cases(comm, cases):
    out = [comm.transport]
    for dtype, op, n, seed in cases:
        x = data(comm.rank, n, dtype, seed)
        buf = _device_array(x, comm.device)
        comm.all_reduce(int(buf), int(buf), n, dtype, op, 0.5)
        out.append(_read(buf, dtype, n))
        buf.free()
    return out


CASES = [(dt, op, n, i) for i, (dt, op, n) in enumerate(
    [(dt, op, n) for dt in ("float32", "bfloat16", "float16", "float64") for op in ("sum", "avg", "premul_sum", "max", "min")
     for n in (2, 7, 50000)]
    + [(dt, op, 999) for dt in ("int32", "int64", "int8", "uint8") for op in ("sum", "max", "min", "band", "bor", "bxor")]
    + [("bool", op, 100) for op in ("sum", "product", "bxor")]
    + [("float32", "product", 64)])]


# (world, transport, forced all-reduce algorithm). Small ring slices make the 50000-element
# cases run many pipelined slices per step; count 2 is below the rank count for 3 and 4 ranks.
ALGO_MATRIX = [
    (2, "shm", "oneshot"), (2, "shm", "twoshot"), (2, "shm", "ring"), (2, "shm", "rdouble"),
    (3, "shm", "oneshot"), (3, "shm", "twoshot"), (3, "shm", "ring"),
    (4, "shm", "twoshot"), (4, "shm", "ring"), (4, "shm", "rdouble"),
    (2, "tcp", "ring"), (2, "tcp", "rdouble"), (3, "tcp", "ring"), (4, "tcp", "ring"), (4, "tcp", "rdouble"),
    (2, "tcp", "tree"), (3, "tcp", "tree"), (5, "tcp", "tree"),  # 5: a child with a child of its own
]


def algo_env(transport, algo=None):
    env = {"NEURON_CCL_TRANSPORT": transport, "NEURON_CCL_RING_SLICE_BYTES": "4096"}
    if algo:
        env["NEURON_CCL_ALGO"] = f"allreduce={algo}"
    return env


@pytest.mark.parametrize("world,transport,algo", ALGO_MATRIX, ids=[f"{w}r-{t}-{a}" for w, t, a in ALGO_MATRIX])
def test_all_reduce_every_dtype_and_op(world, transport, algo):
    values = ok_values(run_ranks(_all_reduce_cases, world, cases=CASES, env=algo_env(transport, algo)))
    assert [v[0] for v in values] == [transport] * world
    values = [v[1:] for v in values]
    for i, (dtype, op, n, seed) in enumerate(CASES):
        ref = reference([data(r, n, dtype, seed) for r in range(world)], op, 0.5)
        tol = 2e-2 if dtype in ("bfloat16", "float16") else 1e-5
        for r in range(world):
            got = values[r][i]
            if ref.dtype.kind == "f" or dtype in ("bfloat16",):
                np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), rtol=tol, atol=tol,
                                           err_msg=f"{dtype} {op} n={n} rank {r}")
            else:
                np.testing.assert_array_equal(got, ref, err_msg=f"{dtype} {op} n={n} rank {r}")
        # Every rank holds identical bits: the same block is reduced once, in rank order.
        for r in range(1, world):
            assert values[r][i].tobytes() == values[0][i].tobytes(), f"{dtype} {op}: ranks differ"


def _direct_placements(comm, n):
    """Large and small all-reduces with the recv buffer placed so that every store path of the
    direct algorithm (twoshot) runs: outputs out of place and equally aligned (2 ranks: the
    fused float32 kernel, streamed), out of place at different alignments (generic path), in
    place on rank 0 only (plain stores there, streamed elsewhere); float32 and bfloat16. Above
    4 MiB the ranks claim 1 MiB chunks from a shared counter; n is chosen to end on a partial
    chunk, and the many operations in a row check that the counter stays in step."""
    import neuron_sim
    r = comm.rank
    res = {}
    layouts = {"equal": (4, 4), "skewed": (4, 8 + 4 * r), "mixed": (0, 0 if r == 0 else 64)}
    for dtype in ("float32", "bfloat16"):
        es = np.dtype(NP[dtype]).itemsize
        for count in (n, 1001):
            x = data(r, count, dtype, 7)
            for name, (soff, roff) in layouts.items():
                src = neuron_sim.DeviceBuffer(count * es + 128, device=comm.device)
                src.copy_from(np.concatenate([np.zeros(soff, np.uint8), x.view(np.uint8)]))
                in_place = name == "mixed" and r == 0
                dst = src if in_place else neuron_sim.DeviceBuffer(count * es + 128, device=comm.device)
                dst_off = soff if in_place else roff
                comm.all_reduce(int(src) + soff, int(dst) + dst_off, count, dtype, "sum")
                got = dst.to_numpy(np.uint8)[dst_off:dst_off + count * es].view(NP[dtype]).copy()
                res[(dtype, count, name)] = got
                if not in_place:
                    # The send buffer of an out-of-place call is left as it was.
                    assert np.array_equal(src.to_numpy(np.uint8)[soff:soff + count * es], x.view(np.uint8))
                    dst.free()
                src.free()
    return res


@pytest.mark.parametrize("world", [2, 3])
def test_direct_all_reduce_placements(world):
    # float32: 8.8 MiB (9 chunks, the last partial); bfloat16: 4.4 MiB. Not multiples of 16.
    n = 2_200_003
    env = {"NEURON_CCL_ALGO": "allreduce=twoshot"}  # the default for 2 ranks, forced for 3
    values = ok_values(run_ranks(_direct_placements, world, n=n, env=env, deadline_s=180))
    for (dtype, count, name), got in values[0].items():
        ref = reference([data(r, count, dtype, 7) for r in range(world)], "sum")
        tol = 2e-2 if dtype == "bfloat16" else 1e-5
        np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), rtol=tol, atol=tol,
                                   err_msg=f"{dtype} {count} {name}")
        for r in range(1, world):
            assert got.tobytes() == values[r][(dtype, count, name)].tobytes(), f"{dtype} {count} {name}: ranks differ"


def _movement(comm):
    import neuron_sim
    n, r, w = 1000, comm.rank, comm.size
    res = {}
    b = _device_array(np.full(n, r, np.float32) if r == 1 % w else np.zeros(n, np.float32), comm.device)
    comm.broadcast(int(b), n, "float32", 1 % w)
    res["broadcast"] = _read(b, np.float32, n,)
    src = _device_array(np.arange(n, dtype=np.float32) + r, comm.device)
    dst = neuron_sim.DeviceBuffer(n * 4 * w, device=comm.device)
    comm.all_gather(int(src), int(dst), n, "float32")
    res["all_gather"] = _read(dst, np.float32, n * w,)
    big = _device_array(np.arange(n * w, dtype=np.float32) * (r + 1), comm.device)
    rs = neuron_sim.DeviceBuffer(n * 4, device=comm.device)
    comm.reduce_scatter(int(big), int(rs), n, "float32", "sum")
    res["reduce_scatter"] = _read(rs, np.float32, n,)
    red = neuron_sim.DeviceBuffer(n * 4, device=comm.device)
    comm.reduce(int(src), int(red), n, "float32", "max", 0)
    if r == 0:
        res["reduce"] = _read(red, np.float32, n,)
    # Uneven all-to-all: rank r sends A (r + p + 1) elements to rank p, each equal to 100 r + p
    # (several 4 KiB TCP frames per pair).
    A = 700
    sends = [_device_array(np.full(A * (r + p + 1), 100 * r + p, np.int64), comm.device) for p in range(w)]
    recvs = [neuron_sim.DeviceBuffer(A * (q + r + 1) * 8, device=comm.device) for q in range(w)]
    comm.all_to_all_v([(int(s), A * (r + p + 1)) for p, s in enumerate(sends)],
                      [(int(x), A * (q + r + 1)) for q, x in enumerate(recvs)], "int64")
    res["all_to_all_v"] = [_read(x, np.int64, A * (q + r + 1)) for q, x in enumerate(recvs)]
    # Point to point around a ring.
    t = _device_array(np.full(10, r, np.int32), comm.device)
    got = neuron_sim.DeviceBuffer(40, device=comm.device)
    comm.send(int(t), 10, "int32", (r + 1) % w, 5)
    comm.recv(int(got), 10, "int32", (r - 1) % w, 5)
    comm.wait_sends((r + 1) % w)
    res["ring"] = _read(got, np.int32, 10,)
    comm.barrier()
    sub = comm.split(r % 2, -r)
    res["split"] = (sub.rank, sub.size)
    x = _device_array(np.full(4, r, np.float32), comm.device)
    sub.all_reduce(int(x), int(x), 4, "float32", "sum")
    res["split_sum"] = _read(x, np.float32, 4,)
    res["flight"] = comm.flight_record()
    res["transport"] = (comm.transport, sub.transport)
    # Uneven all_gather_v and in-place all_gather / reduce_scatter (the ring's block order).
    counts = [1500 * (q + 1) + q for q in range(w)]  # several TCP frames per block
    mine = _device_array(np.full(counts[r], r + 0.5, np.float32), comm.device)
    outs = [neuron_sim.DeviceBuffer(c * 4, device=comm.device) for c in counts]
    comm.all_gather_v(int(mine), counts[r], [(int(o), c) for o, c in zip(outs, counts)], "float32")
    res["all_gather_v"] = [_read(o, np.float32, c) for o, c in zip(outs, counts)]
    whole = _device_array(np.concatenate([np.full(3, q, np.int32) if q == r else np.zeros(3, np.int32)
                                          for q in range(w)]), comm.device)
    comm.all_gather(int(whole) + r * 12, int(whole), 3, "int32")
    res["all_gather_in_place"] = _read(whole, np.int32, 3 * w)
    B = 3001  # float32 partials of 12004 bytes: several frames, the last one partial
    bf = _device_array(np.arange(B * w, dtype=np.float32).astype(ml_dtypes.bfloat16), comm.device)
    comm.reduce_scatter(int(bf), int(bf) + r * B * 2, B, "bfloat16", "avg")
    res["reduce_scatter_bf16_avg"] = _read(bf, "bfloat16", B * w)[r * B:(r + 1) * B]
    g = neuron_sim.DeviceBuffer(w * 8, device=comm.device)
    gi = _device_array(np.array([r, -r], np.int32), comm.device)
    if r == 0:
        comm.gather(int(gi), 2, [(int(g) + q * 8, 2) for q in range(w)], "int32", 0)
        res["gather"] = _read(g, np.int32, 2 * w)
    else:
        comm.gather(int(gi), 2, [], "int32", 0)
    sc = neuron_sim.DeviceBuffer(8, device=comm.device)
    src = _device_array(np.arange(2 * w, dtype=np.int32) * 7, comm.device)
    comm.scatter([(int(src) + q * 8, 2) for q in range(w)] if r == w - 1 else [], int(sc), 2, "int32", w - 1)
    res["scatter"] = _read(sc, np.int32, 2)
    return res


@pytest.mark.parametrize("world,transport", [(3, "shm"), (2, "tcp"), (4, "tcp")])
def test_data_movement_collectives_and_split(world, transport):
    w, n = world, 1000
    values = ok_values(run_ranks(_movement, w, env=algo_env(transport)))
    for r, res in enumerate(values):
        np.testing.assert_array_equal(res["broadcast"], np.full(n, 1, np.float32))
        np.testing.assert_array_equal(res["all_gather"], np.concatenate([np.arange(n, dtype=np.float32) + q for q in range(w)]))
        full = sum(np.arange(n * w, dtype=np.float32) * (q + 1) for q in range(w))
        np.testing.assert_array_equal(res["reduce_scatter"], full[r * n:(r + 1) * n])
        if r == 0:
            np.testing.assert_array_equal(res["reduce"], np.arange(n, dtype=np.float32) + w - 1)
        for q in range(w):
            np.testing.assert_array_equal(res["all_to_all_v"][q], np.full(700 * (q + r + 1), 100 * q + r))
        np.testing.assert_array_equal(res["ring"], np.full(10, (r - 1) % w))
        members = [q for q in range(w) if q % 2 == r % 2]
        assert res["split"] == (sorted(members, key=lambda q: -q).index(r), len(members))
        np.testing.assert_array_equal(res["split_sum"], np.full(4, sum(members), np.float32))
        assert "broadcast" in res["flight"] and "completed" in res["flight"]
        assert res["transport"] == (transport, transport)
        for q in range(w):
            np.testing.assert_array_equal(res["all_gather_v"][q], np.full(1500 * (q + 1) + q, q + 0.5, np.float32))
        np.testing.assert_array_equal(res["all_gather_in_place"], np.repeat(np.arange(w, dtype=np.int32), 3))
        # Every rank holds the same values, so the average is each value itself (bf16-rounded).
        np.testing.assert_array_equal(res["reduce_scatter_bf16_avg"].astype(np.float32),
                                      np.arange(r * 3001, (r + 1) * 3001, dtype=np.float32)
                                      .astype(ml_dtypes.bfloat16).astype(np.float32))
        if r == 0:
            np.testing.assert_array_equal(res["gather"], np.array([[q, -q] for q in range(w)], np.int32).ravel())
        np.testing.assert_array_equal(res["scatter"], np.arange(2 * r, 2 * r + 2, dtype=np.int32) * 7)


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
    results = run_ranks(_all_reduce_cases, 3, cases=[("float32", "sum", 8, 0)], env=algo_env("shm", "rdouble"))
    for r in range(3):
        assert results[r][0] == "error" and "power-of-two" in results[r][1] and "NEURON_CCL_ALGO" in results[r][1]


def test_environment_registry_lists_every_variable():
    import neuron_ccl
    names = {v[0] for v in neuron_ccl.env_vars()}
    assert {"NEURON_CCL_ALGO", "NEURON_CCL_TIMEOUT_MS", "NEURON_CCL_FLIGHT_RECORDER_SIZE", "NEURON_CCL_TRANSPORT",
            "NEURON_CCL_RDOUBLE_MAX_BYTES", "NEURON_CCL_RING_MAX_BYTES", "NEURON_CCL_RING_SLICE_BYTES",
            "NEURON_CCL_STAGING_BYTES", "NEURON_CCL_TCP_ADDR", "NEURON_CCL_TREE_MAX_BYTES"} <= names
