"""Long-lived workers, started with the spawn method, each running many architectures.

Fork is never used: a child forked after the backend initialised would share the parent's device
memory. A worker pays the imports (torch, the backend, transformers) once. The parent gives each
architecture a time limit; a worker that crashes or exceeds it is killed and replaced, and the
architecture is recorded with the phase it was in (CPU run or neuron run).
"""
from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import time

STARTUP_LIMIT_S = 300


def _worker(conn, threads: int, record_dir=None):
    os.environ.setdefault("TORCH_NEURON_FALLBACK_WARN", "0")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import warnings
    warnings.filterwarnings("ignore")
    import torch
    torch.set_num_threads(threads)
    import torch_neuron  # noqa: F401
    import transformers  # noqa: F401
    transformers.logging.set_verbosity_error()
    from . import training
    conn.send(("ready", None, None))
    while True:
        msg = conn.recv()
        if msg is None:
            return
        arch, bf16 = msg
        def report(phase, arch=arch):
            conn.send(("phase", arch, phase))
        if record_dir:
            record = _recorded(arch, bf16, report, record_dir)
        else:
            record = training.run_architecture(arch, bf16=bf16, report=report)
        conn.send(("result", arch, record))


def _recorded(arch, bf16, report, record_dir):
    """Runs the architecture while recording its native calls into record_dir/<arch>.pt."""
    import torch
    from torch_neuron.native.recording import NativeCallRecorder

    from . import training
    with NativeCallRecorder() as rec:
        record = training.run_architecture(arch, bf16=bf16, report=report)
    torch.save({"model": arch, "status": record.get("status"), "calls": rec.calls},
               os.path.join(record_dir, f"{arch}.pt"))
    return record


class _Slot:
    def __init__(self, ctx, threads, record_dir=None):
        self.parent, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child, threads, record_dir), daemon=True)
        self.proc.start()
        child.close()
        self.ready = False
        self.arch = None
        self.phase = None
        self.deadline = time.monotonic() + STARTUP_LIMIT_S
        self.started = None

    def kill(self):
        if self.proc.is_alive():
            self.proc.kill()
        self.proc.join(10)
        self.parent.close()


def _lost(arch, phase, why, elapsed):
    # A crash or hang during the CPU run is the model's (or torch's) own failure; during the
    # neuron run or the bf16 pass it is ours; during the default-config check it is unconfirmed,
    # so charged to the harness.
    status = {None: "no_tiny_config", "build": "no_tiny_config", "cpu": "cpu_fail", "default": "no_tiny_config"}.get(phase, "neuron_error")
    return {"arch": arch, "status": status, "error": f"worker {why} during the {phase or 'config'} phase",
            "wall_s": round(elapsed, 2), "worker_lost": why}


def run(archs, workers=2, limit_s=180.0, bf16_subset=(), on_result=None, record_dir=None):
    """Runs every architecture; returns (records in input order, worker restarts).

    With ``record_dir``, each architecture's native calls are recorded there (``<arch>.pt``,
    torch_neuron.native.recording) for replay."""
    ctx = multiprocessing.get_context("spawn")
    if record_dir:
        os.makedirs(record_dir, exist_ok=True)
    threads = max(1, (os.cpu_count() or 1) // workers)
    todo = list(archs)
    results = {}
    restarts = []
    slots = [_Slot(ctx, threads, record_dir) for _ in range(min(workers, len(todo)) or 1)]
    try:
        while len(results) < len(archs):
            for slot in slots:
                if slot.ready and slot.arch is None and todo:
                    slot.arch = todo.pop(0)
                    slot.phase = None
                    slot.started = time.monotonic()
                    slot.deadline = slot.started + limit_s
                    slot.parent.send((slot.arch, slot.arch in bf16_subset))
            waitables = [s.parent for s in slots] + [s.proc.sentinel for s in slots]
            multiprocessing.connection.wait(waitables, timeout=1.0)
            for i, slot in enumerate(slots):
                why = None
                try:
                    while slot.parent.poll():
                        kind, arch, payload = slot.parent.recv()
                        if kind == "ready":
                            slot.ready = True
                        elif kind == "phase":
                            slot.phase = payload
                        elif kind == "result":
                            results[arch] = payload
                            slot.arch = None
                            if on_result:
                                on_result(payload)
                except (EOFError, OSError):
                    slot.proc.join(5)
                    why = f"crashed (exit code {slot.proc.exitcode})"
                if why is None and not slot.proc.is_alive():
                    slot.proc.join(1)
                    why = f"crashed (exit code {slot.proc.exitcode})"
                if why is None and time.monotonic() > slot.deadline:
                    why = f"timed out after {limit_s:.0f} s" if slot.ready else "timed out at startup"
                if why is None:
                    continue
                slot.kill()
                if slot.arch is not None:
                    rec = _lost(slot.arch, slot.phase, why, time.monotonic() - slot.started)
                    results[slot.arch] = rec
                    if on_result:
                        on_result(rec)
                elif not slot.ready:
                    raise RuntimeError(f"a model worker {why} before running anything")
                restarts.append({"arch": slot.arch, "phase": slot.phase, "why": why})
                slots[i] = _Slot(ctx, threads, record_dir)
    finally:
        for slot in slots:
            try:
                slot.parent.send(None)
            except (OSError, BrokenPipeError):
                pass
        for slot in slots:
            slot.proc.join(5)
            slot.kill()
    return [results[a] for a in archs], restarts
