"""nccl-tests style benchmark of neuron_ccl, with gloo (CPU tensors, torch.distributed) measured
in the same run as the baseline, and the shared-memory ceiling derived from a memcpy measured
in the same run.

    neuron-ccl-bench --op allreduce --ranks 2 --sizes 4K,64K,1M,16M,64M,256M
    neuron-ccl-bench --op allreduce --algos auto,twoshot,ring --transport shm   # compare algorithms

Every algorithm named is measured in the same run (NEURON_CCL_ALGO set in the ranks); "auto" is the
library's own choice, named in the algo column.

Metrics follow nccl-tests (doc/PERFORMANCE.md): algbw = S / t with S the total buffer
(all-gather: output, reduce-scatter: input); busbw = algbw x 2(n-1)/n for all-reduce and
x (n-1)/n for all-gather / reduce-scatter.

The shared-memory ceiling comes from a memcpy of the largest size (at most 256 MiB) measured in
the same run, before and after the collectives (the faster of the two, so the ceiling is not
lowered by a noisy moment): B = one process copying alone, M = the aggregate of all ranks
copying at once (barrier-aligned). A memcpy of S reads S and writes S. All-reduce: every rank's
input must be read once and every rank's output written once, n*S + n*S in all; the direct
single-copy algorithm does exactly that, each rank reading S (its block of every input) and
writing S (its block of every output) - one memcpy of S per rank. So t >= S/B (a rank alone)
and t >= n*S/M (all ranks at once): algbw <= min(B, M/n), busbw <= 2(n-1)/n * min(B, M/n);
for 2 ranks busbw <= min(B, M/2). All-gather / reduce-scatter / broadcast:
busbw <= min(B, M/n) (shared/facts/collectives.md §5).
"""
from __future__ import annotations

import argparse
import importlib.util
import multiprocessing as mp
import os
import socket
import statistics
import time

import numpy as np

BUS_FACTOR = {"allreduce": lambda n: 2 * (n - 1) / n, "allgather": lambda n: (n - 1) / n,
              "reducescatter": lambda n: (n - 1) / n, "broadcast": lambda n: 1.0}


def parse_size(s: str) -> int:
    s = s.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1]] if s[-1] in mult else int(s)


def fmt_size(b: int) -> str:
    for unit, m in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= m and b % m == 0:
            return f"{b // m} {unit}"
    return f"{b} B"


def iterations(nbytes: int, fast: bool) -> int:
    if nbytes <= 1 << 20:
        return 200 if fast else 20
    if nbytes <= 16 << 20:
        return 20 if fast else 5
    return 8 if fast else 2


def _timed(fn, sync, iters: int, reps: int) -> float:
    """Median over `reps` of the mean time per call of `iters` back-to-back calls (seconds)."""
    fn()
    sync()
    out = []
    for _ in range(reps):
        sync()
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        sync()
        out.append((time.perf_counter() - t0) / iters)
    return statistics.median(out)


def _memcpy_rate(nbytes: int, reps: int, sync=None) -> float:
    """Copy rate of one process; with `sync` (a barrier) every repetition starts on all ranks at
    once, so that the concurrent figure M really measures the ranks sharing the memory."""
    src = np.ones(nbytes, dtype=np.uint8)
    dst = np.zeros(nbytes, dtype=np.uint8)  # both pre-faulted: first touch costs ~6x
    np.copyto(dst, src)
    best = []
    for _ in range(reps):
        if sync:
            sync()
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best.append(time.perf_counter() - t0)
    return nbytes / statistics.median(best)


def _rank_main(rank, world, port, args, queue):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import neuron_sim
    import neuron_ccl

    store = neuron_ccl.TCPStore("127.0.0.1", port, rank == 0, 60)
    device = rank % neuron_sim.device_count()
    comm = neuron_ccl.Communicator(store, rank, world, device=device, timeout_s=120, name="bench")
    results = {"rank": rank, "ccl": {}, "gloo": {}, "memcpy": {}, "algo": {}, "transport": comm.transport}
    sizes = args.sizes
    max_bytes = max(sizes)
    buf = neuron_sim.malloc(max_bytes, device)
    out = neuron_sim.malloc(max_bytes, device)
    neuron_sim.memset(buf, 0, max_bytes)
    neuron_sim.memset(out, 0, max_bytes)
    op = args.op
    if args.baseline == "gloo":
        import datetime
        import torch
        import torch.distributed as dist
        torch.set_num_threads(1)
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port + 1}", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=300))
        t = torch.zeros(max_bytes // 4)
        o = torch.zeros(max_bytes // 4)

    def measure_memcpy():
        # The shared-memory ceiling: one process copying alone (B), then every rank at once (M).
        ceiling_bytes = min(max_bytes, 256 << 20)
        comm.barrier()
        if rank == 0:
            b = _memcpy_rate(ceiling_bytes, 5)
            results["memcpy"]["single"] = max(b, results["memcpy"].get("single", 0.0))
        comm.barrier()
        m = _memcpy_rate(ceiling_bytes, 5, comm.barrier)
        results["memcpy"]["concurrent"] = max(m, results["memcpy"].get("concurrent", 0.0))
        comm.barrier()

    measure_memcpy()
    # neuron_ccl and gloo alternate size by size, so that both see the same host load.
    for nbytes in sizes:
        count = nbytes // 4
        if op == "allreduce":
            fn = lambda: comm.all_reduce(buf, buf, count, "float32", "sum")  # noqa: E731
        elif op == "allgather":
            fn = lambda: comm.all_gather(buf, out, count // world, "float32")  # noqa: E731
        elif op == "reducescatter":
            fn = lambda: comm.reduce_scatter(buf, out, count // world, "float32", "sum")  # noqa: E731
        else:
            fn = lambda: comm.broadcast(buf, count, "float32", 0)  # noqa: E731
        for algo in args.algos:
            # NEURON_CCL_ALGO is read at every call (it names this op only; barriers keep theirs).
            os.environ["NEURON_CCL_ALGO"] = "" if algo == "auto" else f"{op}={algo}"
            name = neuron_ccl.select_algorithm(op, nbytes, world, comm.transport)
            results["ccl"][(nbytes, algo)] = _timed(fn, comm.barrier, iterations(nbytes, True), args.reps)
            results["algo"][(nbytes, algo)] = name
        os.environ["NEURON_CCL_ALGO"] = ""
        if args.baseline != "gloo":
            continue
        x = t[:count]
        if op == "allreduce":
            gfn = lambda: dist.all_reduce(x)  # noqa: E731
        elif op == "allgather":
            gfn = lambda: dist.all_gather_into_tensor(o[:count], x[:count // world])  # noqa: E731
        elif op == "reducescatter":
            gfn = lambda: dist.reduce_scatter_tensor(o[:count // world], x)  # noqa: E731
        else:
            gfn = lambda: dist.broadcast(x, 0)  # noqa: E731
        results["gloo"][nbytes] = _timed(gfn, dist.barrier, iterations(nbytes, False), args.reps)

    measure_memcpy()  # again after the collectives; the better figure of the two counts
    neuron_sim.free(buf)
    neuron_sim.free(out)
    if args.baseline == "gloo":
        dist.destroy_process_group()
    queue.put(results)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(args) -> list[dict]:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_rank_main, args=(r, args.ranks, port, args, queue)) for r in range(args.ranks)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=args.timeout) for _ in procs]
    for p in procs:
        p.join(timeout=30)
    return sorted(results, key=lambda r: r["rank"])


def ceiling_busbw(op: str, n: int, single: float, aggregate: float) -> tuple[float, str]:
    """The shared-memory busbw ceiling (bytes/s) and how it was derived (module docstring)."""
    per_rank = min(single, aggregate / n)
    if op == "allreduce":
        factor = BUS_FACTOR[op](n)
        return factor * per_rank, (
            f"ceiling: per rank read S + write S = one memcpy of S, so algbw <= min(B, M/n); "
            f"busbw <= {factor:g} x min(B, M/{n})")
    return per_rank, f"ceiling: busbw <= min(B, M/{n}) (collectives.md §5)"


def report(args, results) -> str:
    n = args.ranks
    factor = BUS_FACTOR[args.op](n)
    single = results[0]["memcpy"]["single"]
    aggregate = sum(r["memcpy"]["concurrent"] for r in results)
    ceiling, how = ceiling_busbw(args.op, n, single, aggregate)
    lines = [
        f"# neuron_ccl {args.op}, {n} ranks, float32; baseline gloo (CPU tensors) in the same run",
        f"# memcpy B = {single / 1e9:.2f} GB/s (one process), M = {aggregate / 1e9:.2f} GB/s (all ranks at once)",
        f"# {how} = {ceiling / 1e9:.2f} GB/s",
        f"# transport {results[0]['transport']}; load average {os.getloadavg()[0]:.2f} (1 min) at the end",
        f"# {'size':>9} {'algo':>8} | {'ccl us':>10} {'algbw':>7} {'busbw':>7} | "
        f"{'gloo us':>10} {'algbw':>7} {'busbw':>7} | {'x gloo':>7} {'% ceil':>7}",
    ]
    for nbytes in args.sizes:
        for algo in args.algos:
            t = max(r["ccl"][(nbytes, algo)] for r in results)
            alg = nbytes / t / 1e9
            bus = alg * factor
            name = results[0]["algo"][(nbytes, algo)]
            row = f"  {fmt_size(nbytes):>9} {name:>8} | {t * 1e6:>10.1f} {alg:>7.3f} {bus:>7.3f} | "
            if results[0]["gloo"]:
                tg = max(r["gloo"][nbytes] for r in results)
                galg = nbytes / tg / 1e9
                row += f"{tg * 1e6:>10.1f} {galg:>7.3f} {galg * factor:>7.3f} | {tg / t:>7.2f} "
            else:
                row += f"{'-':>10} {'-':>7} {'-':>7} | {'-':>7} "
            row += f"{100 * bus * 1e9 / ceiling:>6.0f}%"
            lines.append(row)
    return "\n".join(lines)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--op", default="allreduce", choices=sorted(BUS_FACTOR))
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--sizes", default="4K,64K,1M,16M,64M,256M", help="comma-separated byte sizes (K, M, G suffixes)")
    p.add_argument("--baseline", default="gloo", choices=["gloo", "none"])
    p.add_argument("--reps", type=int, default=3, help="timed repetitions per size (the median is reported)")
    p.add_argument("--timeout", type=float, default=900)
    p.add_argument("--algos", default="auto",
                   help="comma-separated algorithms to measure (auto = the library's choice; e.g. auto,twoshot,ring)")
    p.add_argument("--transport", default=None, choices=["auto", "shm", "tcp"],
                   help="sets NEURON_CCL_TRANSPORT for the ranks (default: the environment's)")
    args = p.parse_args(argv)
    if args.baseline == "gloo" and importlib.util.find_spec("torch") is None:
        p.error("the gloo baseline runs torch.distributed, and torch is not installed: "
                "pip install 'neuron-ccl[bench]', or pass --baseline none")
    args.sizes = [parse_size(s) for s in args.sizes.split(",")]
    args.algos = [a.strip() for a in args.algos.split(",") if a.strip()]
    if args.transport:
        os.environ["NEURON_CCL_TRANSPORT"] = args.transport  # inherited by the spawned ranks
    print(report(args, run(args)), flush=True)


if __name__ == "__main__":
    main()
