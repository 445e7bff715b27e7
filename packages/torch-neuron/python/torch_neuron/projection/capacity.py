# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""The largest batch that fits a core's HBM, predicted from high-water marks and checked by running.

The user names the batch dimension as a flag of their script (``batch_arg``, e.g. ``--batch``);
every trial runs the script in a child process with that flag set, under one profile and one
(optionally scaled) HBM capacity per core (``NEURON_SIM_HBM_CAPACITY``). A trial fits when the
run raised no ``torch.OutOfMemoryError`` (the allocator's ``num_ooms`` stays 0).

The search predicts the limit from the high-water marks of two fitting batches (high-water is
close to affine in the batch: weights and optimizer state plus activations per sample), then
checks it: the answer is final only when the largest batch ran and the batch one above it hit
out-of-memory. When the prediction misses, it bisects between the closest fitting and failing
batches, so the verified answer never depends on the affine assumption.

    from torch_neuron.projection import capacity
    r = capacity.largest_batch("train.py", ["--steps", "2"], batch_arg="--batch", profile="trn1",
                               hbm_scale=1 / 1024)
    r.largest, r.verified, r.trials
"""
from __future__ import annotations

import dataclasses
import fractions
import json
import os
import subprocess
import sys
import tempfile
from typing import Callable


@dataclasses.dataclass
class Trial:
    batch: int
    fits: bool              # ran without out-of-memory
    peak_bytes: int         # HBM high-water of the (last) projected region
    error: str = ""         # the out-of-memory message, when it did not fit


@dataclasses.dataclass
class BatchSearch:
    """Outcome of a search; ``verified`` when ``largest`` ran and ``largest + 1`` did not."""

    profile: str
    capacity_bytes: int     # the capacity the trials ran with (scaled)
    share_bytes: int        # the profile's unscaled HBM share per core
    hbm_scale: float
    batch_arg: str
    largest: int            # 0: not even batch 1 fits
    verified: bool
    trials: list[Trial]
    predicted: int | None   # the affine prediction from two fitting batches, before checking
    limit_reason: str = ""  # set when the search stopped at max_batch instead of an out-of-memory

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def parse_scale(text: str | float) -> float:
    """'1/1024', '0.001' or a float; must lie in (0, 1]."""
    v = float(fractions.Fraction(text)) if isinstance(text, str) else float(text)
    if not 0 < v <= 1:
        raise ValueError(f"hbm scale {text!r} must lie in (0, 1] (e.g. 1/1024)")
    return v


def profile_share(profile: str) -> int:
    """HBM bytes per logical core of a profile at its default LNC (the chip's HBM / logical cores)."""
    import neuron_sim

    return int(neuron_sim.profile_properties(profile).hbm_capacity)


def scaled_capacity(profile: str, hbm_scale: float) -> int:
    # The simulator's capacity floor is 4096 bytes; round down to a whole KiB.
    return max(4096, int(profile_share(profile) * hbm_scale) // 1024 * 1024)


def with_batch(args: list[str], batch_arg: str, batch: int) -> list[str]:
    """``args`` with ``batch_arg`` set to ``batch`` (``--batch 8`` and ``--batch=8`` forms)."""
    out, i, seen = [], 0, False
    while i < len(args):
        a = args[i]
        if a == batch_arg:
            out += [a, str(batch)]
            i += 2
            seen = True
            continue
        if a.startswith(batch_arg + "="):
            out.append(f"{batch_arg}={batch}")
            seen = True
        else:
            out.append(a)
        i += 1
    return out if seen else [*out, batch_arg, str(batch)]


def batch_in(args: list[str], batch_arg: str) -> int | None:
    """The value ``args`` give ``batch_arg``, if any."""
    for i, a in enumerate(args):
        if a == batch_arg and i + 1 < len(args):
            return int(args[i + 1])
        if a.startswith(batch_arg + "="):
            return int(a.split("=", 1)[1])
    return None


def search(trial: Callable[[int], Trial], capacity: int, start: int = 1, max_batch: int = 1 << 16,
           max_trials: int = 24, known: list[Trial] = ()) -> tuple[int, bool, list[Trial], int | None, str]:
    """Largest batch for which ``trial`` fits: (largest, verified, trials, predicted, limit_reason).

    ``known``: trials already run (at the same capacity), reused instead of run again.
    """
    trials: dict[int, Trial] = {t.batch: t for t in known}

    def run(b: int) -> Trial:
        if b not in trials:
            if len(trials) >= max_trials:
                raise RuntimeError(f"largest-batch search: no answer after {max_trials} runs "
                                   f"(batches tried: {sorted(trials)}); raise max_trials")
            trials[b] = trial(b)
        return trials[b]

    def bounds() -> tuple[int, int | None]:
        good = max([b for b, t in trials.items() if t.fits], default=0)
        bad = min([b for b, t in trials.items() if not t.fits and b > good], default=None)
        return good, bad

    start = max(1, min(start, max_batch))
    run(start)
    b = start
    while not trials[b].fits and b > 1:   # shrink until something fits
        b = max(1, b // 2)
        run(b)
    good, bad = bounds()
    predicted = None
    if good and good < max_batch and bad is None:
        # A second fitting point gives the slope of high-water in the batch.
        run(min(max_batch, 2 * good))
        good, bad = bounds()
    fit_points = sorted((b, t.peak_bytes) for b, t in trials.items() if t.fits)
    if len(fit_points) >= 2 and fit_points[-1][1] > fit_points[0][1]:
        (b0, p0), (b1, p1) = fit_points[0], fit_points[-1]
        slope = (p1 - p0) / (b1 - b0)
        predicted = int(b1 + (capacity - p1) // slope)
        lo, hi = good, (bad - 1 if bad is not None else max_batch)
        p = min(max(predicted, lo), hi)
        if p > good:
            run(p)
        if p + 1 <= max_batch:
            run(p + 1)
        good, bad = bounds()
    # Grow until out-of-memory (or the limit), then bisect.
    while bad is None and good < max_batch:
        run(min(max_batch, 2 * good))
        good, bad = bounds()
    while bad is not None and bad - good > 1:
        run((good + bad) // 2)
        good, bad = bounds()
    limit = "" if bad is not None else f"batch {max_batch} (max_batch) still fits; raise max_batch"
    # Nothing fitting means the shrink loop above ran batch 1, so good + 1 == bad is the check.
    ordered = [trials[k] for k in sorted(trials)]
    verified = bad == good + 1
    return good, verified, ordered, predicted, limit


def run_child(script: str, args: list[str], profile: str, capacity: int | None, timeout: float,
              env: dict | None = None, capture: bool = True) -> tuple[list[dict], subprocess.CompletedProcess]:
    """Runs the script under the projection in a child process; the summaries of its regions."""
    from . import OUTPUT_ENV

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "summary.jsonl")
        child_env = dict(os.environ if env is None else env, NEURON_SIM_PROFILE=profile, **{OUTPUT_ENV: out})
        if capacity:
            child_env["NEURON_SIM_HBM_CAPACITY"] = str(capacity)
        try:
            r = subprocess.run([sys.executable, "-m", "torch_neuron.projection", "--child", script, *args],
                               env=child_env, capture_output=capture, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            raise RuntimeError(f"{script} {' '.join(args)} on {profile} did not finish in {timeout:.0f} s; "
                               "raise --timeout") from e
        rows = []
        if os.path.exists(out):
            with open(out) as f:
                rows = [json.loads(line) for line in f if line.strip()]
    return rows, r


def trial_of(rows: list[dict], r: subprocess.CompletedProcess, what: str) -> Trial:
    """A fit trial from the summaries of one child run."""
    stderr = (r.stderr or "")[-3000:]
    if not rows:
        raise RuntimeError(f"{what} wrote no projection (exit {r.returncode}):\n{stderr}")
    s = rows[-1]
    ooms = max(int(row.get("num_ooms", 0)) for row in rows)
    if r.returncode != 0 and not ooms:
        raise RuntimeError(f"{what} failed (exit {r.returncode}) without an out-of-memory error:\n{stderr}")
    err = next((row["out_of_memory"] for row in rows if row.get("out_of_memory")), "")
    return Trial(batch=-1, fits=ooms == 0, peak_bytes=int(s["hbm_peak_bytes"]), error=err)


def largest_batch(script: str, args: list[str], *, batch_arg: str, profile: str, hbm_scale: float = 1.0,
                  start: int | None = None, max_batch: int = 1 << 16, timeout: float = 1800,
                  env: dict | None = None, log: Callable[[str], None] | None = None,
                  known: list[Trial] = ()) -> BatchSearch:
    """Searches the largest value of the script's ``batch_arg`` that runs on ``profile`` without
    out-of-memory, with the core's HBM scaled by ``hbm_scale``; see the module docstring."""
    capacity = scaled_capacity(profile, hbm_scale)
    if start is None:
        start = batch_in(args, batch_arg) or 1

    def trial(b: int) -> Trial:
        run_args = with_batch(args, batch_arg, b)
        rows, r = run_child(script, run_args, profile, capacity, timeout, env)
        t = trial_of(rows, r, f"{script} {' '.join(run_args)} on {profile} (NEURON_SIM_HBM_CAPACITY={capacity})")
        t.batch = b
        if log:
            log(f"   {profile} {batch_arg} {b}: " + (f"fits, high-water {t.peak_bytes / 2**20:.2f} MiB"
                                                     if t.fits else "out of memory"))
        return t

    largest, verified, trials, predicted, limit = search(trial, capacity, start=start, max_batch=max_batch,
                                                       known=known)
    return BatchSearch(profile=profile, capacity_bytes=capacity, share_bytes=profile_share(profile),
                       hbm_scale=hbm_scale, batch_arg=batch_arg, largest=largest, verified=verified,
                       trials=trials, predicted=predicted, limit_reason=limit)
