"""Recording the native calls of the models the native-share tests run.

- the demo (``tools/demo/train_char_gpt.py --steps 3``, as tests/e2e/test_demo_native_share.py runs it);
- the architectures of the transformers sweep (``tools.models.run --record-native``): the nine of
  tests/e2e/test_models_native_share.py, the smoke subset (which holds the nine) or the full sweep.

Each model's calls go to ``<calls>/<model>.pt`` (torch_neuron.native.recording); ``merge`` keeps
one call per (overload, dtype) over all models, the most ragged, and which models executed it.
"""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEMO = ROOT / "tools" / "demo" / "train_char_gpt.py"
DEMO_ARGS = ["--steps", "3"]
NINE = ("gpt2", "llama", "mistral", "qwen2", "bert", "t5", "vit", "mixtral", "qwen2_moe")
DEMO_MODEL = "demo"


def record_demo(calls_dir: pathlib.Path) -> None:
    """Runs the demo in a process of its own (``python -m tools.overloads.record``), recording its
    native calls into demo.pt."""
    env = dict(os.environ, TORCH_NEURON_FALLBACK_WARN="0")
    r = subprocess.run([sys.executable, "-m", "tools.overloads.record", str(calls_dir / f"{DEMO_MODEL}.pt")],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False)
    if r.returncode:
        raise RuntimeError(f"recording the demo failed (exit {r.returncode}):\n{r.stdout[-2000:]}{r.stderr[-3000:]}")


def _run_demo_recorded(path: str) -> int:
    import runpy

    import torch
    from torch_neuron.native.recording import NativeCallRecorder

    sys.argv = [str(DEMO), *DEMO_ARGS]
    status = "pass"
    with NativeCallRecorder() as rec:
        try:
            runpy.run_path(str(DEMO), run_name="__main__")
        except SystemExit as e:
            status = "pass" if not e.code else f"exit {e.code}"
    torch.save({"model": DEMO_MODEL, "status": status, "calls": rec.calls}, path)
    return 0 if status == "pass" else 1


def sweep_label(sweep: str, sample: int | None) -> str:
    return f"every {sample}th architecture of the full sweep" if sample and sweep == "full" else sweep


def record_sweep(calls_dir: pathlib.Path, sweep: str, workers: int, out: pathlib.Path, sample: int | None = None) -> None:
    """Runs the sweep's architectures (``nine``, ``smoke`` or ``full``, of which every ``sample``-th)
    recording their native calls."""
    cmd = [sys.executable, "-m", "tools.models.run", "--workers", str(workers), "--out", str(out),
           "--record-native", str(calls_dir)]
    if sweep == "nine":
        cmd += ["--archs", ",".join(NINE)]
    elif sweep == "smoke":
        cmd += ["--smoke"]
    elif sweep == "full":
        cmd += ["--sample", str(sample)] if sample else []
    else:
        raise ValueError(f"sweep {sweep!r}: one of nine, smoke, full")
    env = dict(os.environ, TORCH_NEURON_FALLBACK_WARN="0")
    # The sweep's own exit status (unexpected statuses, stale expectations) is its own test's
    # concern; the calls recorded are what counts here.
    subprocess.run(cmd, cwd=ROOT, env=env, timeout=4 * 3600, check=False)


def merge(calls_dir: pathlib.Path) -> dict:
    """{(overload, dtype): {"call": RecordedCall, "source": model of that call, "models": set,
    "executions": n}} over every model file."""
    import torch

    merged: dict = {}
    for path in sorted(calls_dir.glob("*.pt")):
        data = torch.load(path, weights_only=False)
        for key, rec in data["calls"].items():
            m = merged.setdefault(key, {"call": rec.call, "source": data["model"], "models": set(), "executions": 0})
            m["models"].add(data["model"])
            m["executions"] += rec.executions
            if rec.call.preference() > m["call"].preference():
                m["call"], m["source"] = rec.call, data["model"]
    return merged


if __name__ == "__main__":
    sys.exit(_run_demo_recorded(sys.argv[1]))
