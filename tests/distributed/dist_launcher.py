"""Starts N ranks of a scenario in `workers.py` as separate processes, as torchrun would
(RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT), bounded in time."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass

WORKERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "workers.py")


@dataclass
class RankResult:
    rank: int
    returncode: int | None  # None: killed at the deadline
    output: str


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(scenario: str, world: int, timeout: float = 90.0, env: dict | None = None,
           script: str = WORKERS) -> list[RankResult]:
    """Starts ``world`` ranks of ``script scenario``; waits for all, killing any left at the deadline."""
    port = free_port()
    procs = []
    for r in range(world):
        e = dict(os.environ)
        e.update(
            RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world),
            MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), TORCH_NEURON_FALLBACK_WARN="0",
            OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore",
        )
        e.update(env or {})
        procs.append(subprocess.Popen([sys.executable, script, scenario], env=e, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    deadline = time.monotonic() + timeout
    results = []
    for r, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=max(0.1, deadline - time.monotonic()))
            results.append(RankResult(r, p.returncode, out))
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            results.append(RankResult(r, None, out))
    return results


def launch_torchrun(scenario: str, world: int, timeout: float = 120.0) -> tuple[int | None, str]:
    """Runs the scenario under torchrun itself (its agent sets RANK, LOCAL_RANK, ...)."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", str(world),
           "--master-addr", "127.0.0.1", "--master-port", str(free_port()), WORKERS, scenario]
    env = dict(os.environ, TORCH_NEURON_FALLBACK_WARN="0", OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
        return p.returncode, p.stdout
    except subprocess.TimeoutExpired as e:
        return None, (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")


def check_all_ok(results: list[RankResult]) -> None:
    bad = [r for r in results if r.returncode != 0 or "SCENARIO OK" not in r.output]
    if bad:
        raise AssertionError("\n".join(
            f"--- rank {r.rank} returncode {r.returncode}\n{r.output[-4000:]}" for r in bad))
