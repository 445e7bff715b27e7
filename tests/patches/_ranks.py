"""Runs a proof test's multi-rank scenario: one process per rank, as torchrun would start
them (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT), bounded in time.

A test file that uses it runs itself as the rank script (``python test_NNNN_x.py SCENARIO``):
each rank prints ``RANK OK`` when its checks pass; anything else fails the test with the
ranks' output.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

OK_LINE = "RANK OK"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(script: str, scenario: str, world: int = 2, timeout: float = 150.0) -> list[str]:
    """Starts ``world`` ranks of ``script scenario``; returns their outputs when all pass."""
    port = free_port()
    procs = []
    for rank in range(world):
        env = dict(os.environ)
        env.update(
            RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world),
            MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1",
            TORCH_NEURON_FALLBACK_WARN="0", PYTHONWARNINGS="ignore",
        )
        procs.append(subprocess.Popen([sys.executable, script, scenario], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    deadline = time.monotonic() + timeout
    outputs, failed = [], False
    for rank, proc in enumerate(procs):
        try:
            out, _ = proc.communicate(timeout=max(0.1, deadline - time.monotonic()))
            code = proc.returncode
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
            code = f"killed after {timeout:.0f} s"
        outputs.append(out)
        failed |= code != 0 or OK_LINE not in out
        if code != 0 or OK_LINE not in out:
            outputs[-1] = f"--- rank {rank} exit {code}\n{out[-3000:]}"
    if failed:
        # The last line of a failing rank (its exception) leads the message.
        last = [o.strip().splitlines()[-1] for o in outputs if o.startswith("--- rank") and o.strip()]
        raise AssertionError((last[0] if last else "rank failed") + "\n" + "\n".join(outputs))
    return outputs


def rank_env() -> tuple[int, int]:
    return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
