"""Multi-process launches for the ecosystem tests: 127.0.0.1, a free port, a deadline, and
the whole output in the assertion message when a launch fails."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKER = HERE / "hf_trainer_worker.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(hf_home: Path) -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", TORCH_NEURON_FALLBACK_WARN="0", PYTHONWARNINGS="ignore",
               HF_HOME=str(hf_home), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    # Device and backend choice is what is under test: nothing may preset it.
    for var in ("ACCELERATE_TORCH_DEVICE", "ACCELERATE_USE_CPU", "ACCELERATE_CONFIG_FILE", "NEURON_RT_VISIBLE_CORES"):
        env.pop(var, None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))
    return env


def torchrun_cmd(nproc: int, port: int) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", str(nproc),
            "--master-addr", "127.0.0.1", "--master-port", str(port)]


def accelerate_launch_cmd(nproc: int, port: int) -> list[str]:
    return [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_machines", "1",
            "--num_processes", str(nproc), "--mixed_precision", "no", "--dynamo_backend", "no",
            "--main_process_ip", "127.0.0.1", "--main_process_port", str(port)]


def run_trainer(launcher: str, kind: str, out_dir: Path, nproc: int = 2, timeout: float = 240) -> list[dict]:
    """Runs hf_trainer_worker.py under ``launcher`` ("torchrun" or "accelerate"); returns each rank's report."""
    port = free_port()
    cmd = (torchrun_cmd if launcher == "torchrun" else accelerate_launch_cmd)(nproc, port)
    cmd += [str(WORKER), kind, str(out_dir)]
    try:
        p = subprocess.run(cmd, env=_env(out_dir / "hf_home"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        raise AssertionError(f"{launcher} run of {kind} did not finish in {timeout} s:\n{out[-8000:]}") from None
    reports = sorted(out_dir.glob("rank*.json"))
    if p.returncode != 0 or len(reports) != nproc:
        raise AssertionError(f"{launcher} run of {kind}: exit status {p.returncode}, {len(reports)} of {nproc} "
                             f"rank reports\n$ {' '.join(cmd)}\n{p.stdout[-12000:]}")
    return [json.loads(r.read_text()) for r in reports]
