"""Runs torchtitan under torchrun the way a user does, bounded in time, and reads the
per-step losses from torchtitan's own log lines (``step:  3  loss:  7.86969 ...``)."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "distributed"))
from dist_launcher import free_port

OVERRIDE = "neuron_overrides.sdpa_document_causal"

# The knobs a neuron user adds to the CUDA command line (the README's TorchTitan section says why).
NEURON_FLAGS = ["--override.imports", OVERRIDE, "--parallelism.spmd_backend", "partial_dtensor"]

_STEP = re.compile(r"step:\s*(\d+)\s+loss:\s*([-+0-9.naif]+)\s+grad_norm:\s*([-+0-9.naif]+)")


@dataclass
class Run:
    returncode: int | None  # None: killed at the deadline
    output: str
    command: list[str]

    def losses(self) -> list[float]:
        """Loss per step, 1-based steps in order; every rank must log the same global loss."""
        per_step: dict[int, set[float]] = {}
        for step, loss, _ in _STEP.findall(self.output):
            per_step.setdefault(int(step), set()).add(float(loss))
        disagree = {s: v for s, v in per_step.items() if len(v) != 1}
        if disagree:
            raise AssertionError(f"ranks logged different losses: {disagree}\n{self.tail()}")
        if sorted(per_step) != list(range(1, len(per_step) + 1)):
            raise AssertionError(f"missing steps in the log: {sorted(per_step)}\n{self.tail()}")
        return [per_step[s].pop() for s in sorted(per_step)]

    def tail(self, n: int = 12000) -> str:
        head = f"command: {' '.join(self.command)}\nreturncode: {self.returncode}\n"
        return head + self.output[-n:]

    def check_ok(self) -> None:
        if self.returncode != 0 or "Process group destroyed" not in self.output:
            raise AssertionError(f"torchtitan run failed\n{self.tail()}")


def titan_env(workdir: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (HERE, env.get("PYTHONPATH")) if p)
    env.update(
        OMP_NUM_THREADS="1", TORCH_NEURON_FALLBACK_WARN="0", PYTHONWARNINGS="ignore",
        # everything is local: no hub look-ups, caches inside the test's directory
        HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", HF_HOME=os.path.join(workdir, "hf"),
        WANDB_MODE="disabled",
    )
    return env


def torchrun(nproc: int, args: list[str], *, workdir: str, timeout: float,
             entry: list[str] | None = None) -> Run:
    """``torchrun --nproc_per_node N -m torchtitan.train ARGS`` on 127.0.0.1 and a free port.

    The whole process group is killed at the deadline, so a hung rank cannot outlive the test.
    """
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", str(nproc),
           "--master_addr", "127.0.0.1", "--master_port", str(free_port())]
    cmd += entry or ["-m", "torchtitan.train"]
    cmd += args
    p = subprocess.Popen(cmd, cwd=workdir, env=titan_env(workdir), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
        return Run(p.returncode, out, cmd)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        return Run(None, out + f"\n[killed after {timeout:.0f} s]", cmd)
