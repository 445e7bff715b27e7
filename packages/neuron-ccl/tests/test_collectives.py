"""The collectives across processes over both transports (shared memory and TCP), every
all-reduce algorithm, dtype and reduction, against numpy references."""
from __future__ import annotations

import os
import sys

import ml_dtypes
import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from buffers import NP, algo_env, all_reduce_cases, data, device_array, read_buffer, reference  # noqa: E402
from ranks import ok_values, run_ranks  # noqa: E402


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


@pytest.mark.parametrize("world,transport,algo", ALGO_MATRIX, ids=[f"{w}r-{t}-{a}" for w, t, a in ALGO_MATRIX])
def test_all_reduce_every_dtype_and_op(world, transport, algo):
    values = ok_values(run_ranks(all_reduce_cases, world, cases=CASES, env=algo_env(transport, algo)))
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
    b = device_array(np.full(n, r, np.float32) if r == 1 % w else np.zeros(n, np.float32), comm.device)
    comm.broadcast(int(b), n, "float32", 1 % w)
    res["broadcast"] = read_buffer(b, np.float32, n,)
    src = device_array(np.arange(n, dtype=np.float32) + r, comm.device)
    dst = neuron_sim.DeviceBuffer(n * 4 * w, device=comm.device)
    comm.all_gather(int(src), int(dst), n, "float32")
    res["all_gather"] = read_buffer(dst, np.float32, n * w,)
    big = device_array(np.arange(n * w, dtype=np.float32) * (r + 1), comm.device)
    rs = neuron_sim.DeviceBuffer(n * 4, device=comm.device)
    comm.reduce_scatter(int(big), int(rs), n, "float32", "sum")
    res["reduce_scatter"] = read_buffer(rs, np.float32, n,)
    red = neuron_sim.DeviceBuffer(n * 4, device=comm.device)
    comm.reduce(int(src), int(red), n, "float32", "max", 0)
    if r == 0:
        res["reduce"] = read_buffer(red, np.float32, n,)
    # Uneven all-to-all: rank r sends A (r + p + 1) elements to rank p, each equal to 100 r + p
    # (several 4 KiB TCP frames per pair).
    A = 700
    sends = [device_array(np.full(A * (r + p + 1), 100 * r + p, np.int64), comm.device) for p in range(w)]
    recvs = [neuron_sim.DeviceBuffer(A * (q + r + 1) * 8, device=comm.device) for q in range(w)]
    comm.all_to_all_v([(int(s), A * (r + p + 1)) for p, s in enumerate(sends)],
                      [(int(x), A * (q + r + 1)) for q, x in enumerate(recvs)], "int64")
    res["all_to_all_v"] = [read_buffer(x, np.int64, A * (q + r + 1)) for q, x in enumerate(recvs)]
    # Point to point around a ring.
    t = device_array(np.full(10, r, np.int32), comm.device)
    got = neuron_sim.DeviceBuffer(40, device=comm.device)
    comm.send(int(t), 10, "int32", (r + 1) % w, 5)
    comm.recv(int(got), 10, "int32", (r - 1) % w, 5)
    comm.wait_sends((r + 1) % w)
    res["ring"] = read_buffer(got, np.int32, 10,)
    comm.barrier()
    sub = comm.split(r % 2, -r)
    res["split"] = (sub.rank, sub.size)
    x = device_array(np.full(4, r, np.float32), comm.device)
    sub.all_reduce(int(x), int(x), 4, "float32", "sum")
    res["split_sum"] = read_buffer(x, np.float32, 4,)
    res["flight"] = comm.flight_record()
    res["transport"] = (comm.transport, sub.transport)
    # Uneven all_gather_v and in-place all_gather / reduce_scatter (the ring's block order).
    counts = [1500 * (q + 1) + q for q in range(w)]  # several TCP frames per block
    mine = device_array(np.full(counts[r], r + 0.5, np.float32), comm.device)
    outs = [neuron_sim.DeviceBuffer(c * 4, device=comm.device) for c in counts]
    comm.all_gather_v(int(mine), counts[r], [(int(o), c) for o, c in zip(outs, counts)], "float32")
    res["all_gather_v"] = [read_buffer(o, np.float32, c) for o, c in zip(outs, counts)]
    whole = device_array(np.concatenate([np.full(3, q, np.int32) if q == r else np.zeros(3, np.int32)
                                          for q in range(w)]), comm.device)
    comm.all_gather(int(whole) + r * 12, int(whole), 3, "int32")
    res["all_gather_in_place"] = read_buffer(whole, np.int32, 3 * w)
    B = 3001  # float32 partials of 12004 bytes: several frames, the last one partial
    bf = device_array(np.arange(B * w, dtype=np.float32).astype(ml_dtypes.bfloat16), comm.device)
    comm.reduce_scatter(int(bf), int(bf) + r * B * 2, B, "bfloat16", "avg")
    res["reduce_scatter_bf16_avg"] = read_buffer(bf, "bfloat16", B * w)[r * B:(r + 1) * B]
    g = neuron_sim.DeviceBuffer(w * 8, device=comm.device)
    gi = device_array(np.array([r, -r], np.int32), comm.device)
    if r == 0:
        comm.gather(int(gi), 2, [(int(g) + q * 8, 2) for q in range(w)], "int32", 0)
        res["gather"] = read_buffer(g, np.int32, 2 * w)
    else:
        comm.gather(int(gi), 2, [], "int32", 0)
    sc = neuron_sim.DeviceBuffer(8, device=comm.device)
    src = device_array(np.arange(2 * w, dtype=np.int32) * 7, comm.device)
    comm.scatter([(int(src) + q * 8, 2) for q in range(w)] if r == w - 1 else [], int(sc), 2, "int32", w - 1)
    res["scatter"] = read_buffer(sc, np.int32, 2)
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
