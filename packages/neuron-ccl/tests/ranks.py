"""Runs a function in N spawned processes (one neuron_sim device and one Communicator each) and
returns what each rank returned, or raises with every failing rank's traceback."""
from __future__ import annotations

import multiprocessing as mp
import socket
import traceback


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(fn, rank, world, port, timeout_s, queue, env, kwargs):
    try:
        import os
        os.environ.update(env or {})
        import neuron_ccl
        store = neuron_ccl.TCPStore("127.0.0.1", port, rank == 0, 30)
        comm = neuron_ccl.Communicator(store, rank, world, device=rank % 4, timeout_s=timeout_s, name="test")
        queue.put((rank, "ok", fn(comm, **kwargs)))
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        queue.put((rank, "error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))


def run_ranks(fn, world: int, timeout_s: float = 20.0, deadline_s: float = 60.0, env=None, **kwargs):
    """`env`: environment variables set in every rank before neuron_ccl is imported."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_entry, args=(fn, r, world, port, timeout_s, queue, env, kwargs)) for r in range(world)]
    for p in procs:
        p.start()
    import queue as queue_mod
    import time
    results = {}
    deadline = time.monotonic() + deadline_s
    try:
        # A rank that exits on purpose reports nothing: stop once every process is gone.
        while len(results) < world and time.monotonic() < deadline:
            try:
                rank, status, value = queue.get(timeout=0.2)
                results[rank] = (status, value)
            except queue_mod.Empty:
                if all(not p.is_alive() for p in procs) and queue.empty():
                    break
    finally:
        for p in procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
    return results


def ok_values(results):
    bad = {r: v for r, (s, v) in results.items() if s != "ok"}
    if bad:
        raise AssertionError("\n".join(f"rank {r}: {v}" for r, v in sorted(bad.items())))
    return [results[r][1] for r in sorted(results)]
