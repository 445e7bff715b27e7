"""PyTorch's own test files against ``neuron``, one file at a time.

The files come from a source tree of a nearby release (source_tree.py), so each runs on cpu
first with the same wheel; only the tests that pass there run on neuron. Device-independent
tests (classes not instantiated per device) never touch neuron: they are counted, not run.
Each file may have a time budget; a run that crashes or exceeds it is resumed after the test it was in,
which is recorded as ``crashed`` or ``timeout``. Expectations: tests/upstream/expectations/
files/<file stem>.yaml, entries matching test ids (``Class.test_name_DEV_dtype``, globs).
"""

from __future__ import annotations

import collections
import fnmatch
import json
import os
import pathlib
import re
import signal
import subprocess
import time

from . import expectations, selection

FILES_EXPECTATIONS = expectations.EXPECTATIONS_DIR / "files"
FILES = (
    "test_modules.py", "test_autograd.py", "test_optim.py", "test_view_ops.py", "test_indexing.py",
    "test_shape_ops.py", "test_sort_and_select.py", "test_serialization.py", "test_tensor_creation_ops.py",
    "test_type_promotion.py", "test_foreach.py",
)
# Skip messages of torch's testing decorators and databases, by kind. The non-native kinds skip a
# device only for not being one of torch's own (cuda, cpu, ...): patch 0012 is about the first
# two; OptimInfo's supports_fused_on lists the devices whose fused optimizer tests run (cpu, cuda,
# xpu, mps; not privateuse1, although torch.optim accepts fused=True on it). The others skip every
# device but the one a test was written for, CUDA included.
SKIP_KINDS = {
    "onlyNativeDeviceTypes": (True, re.compile(r"onlyNativeDeviceTypes|doesn't run on")),
    "largeTensorTest": (True, re.compile(r"Unknown device type|largeTensorTest|[Ii]nsufficient \w+ memory")),
    "OptimInfo.supports_fused_on": (True, re.compile(r"is not supported for fused on")),
    "device-specific (onlyCPU, onlyCUDA, ...)": (False, re.compile(r"[Oo]nly runs on")),
}


def _import_error(tree, module, python, env):
    code = (f"import sys; sys.path.insert(0, {str(tree / 'test')!r}); import torch; "
            f"import importlib; importlib.import_module({module!r})")
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env, cwd=tree / "test",
                          timeout=600)
    if proc.returncode == 0:
        return None
    lines = proc.stderr.strip().splitlines()
    return lines[-1] if lines else f"exit status {proc.returncode}"


def _records(path):
    out = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                out[r["nodeid"]] = r
    return out


def _device_independent(path):
    return len(set(path.read_text().split())) if path.exists() else 0


# A neuron test may take this many times its cpu duration before the per-test timeout ends it,
# up to LONG_TEST_CAP_S: float64 is not a device dtype, so a float64 gradcheck of a whole
# Transformer runs its ~10^5 small ops as host fallbacks, 3-10x slower than on cpu, more on a
# loaded machine.
SLOW_FACTOR = 20
LONG_TEST_CAP_S = 900


def test_timeouts(cpu_records: dict, timeout: int) -> dict:
    """{test id: seconds} for the cpu-passing tests whose scaled cpu duration exceeds `timeout`."""
    out = {}
    for t, r in cpu_records.items():
        d = r.get("duration") or 0.0
        if r.get("outcome") == "passed" and SLOW_FACTOR * d > timeout:
            out[t] = int(min(LONG_TEST_CAP_S, SLOW_FACTOR * d + 1))
    return out


def worker_env(env: dict, workers: int) -> dict:
    """``env`` for ``workers`` pytest-xdist workers sharing this machine's cores: each gets its
    share of intra-op threads (OMP_NUM_THREADS, unless the caller set it). Left at torch's default,
    every worker starts one OpenMP thread per core, and on an oversubscribed machine their
    spin-waiting barriers slow a float64 gradcheck 10-20x (far past its timeout)."""
    if workers <= 1 or "OMP_NUM_THREADS" in env:
        return env
    return dict(env, OMP_NUM_THREADS=str(max(1, (os.cpu_count() or 1) // workers)))


def run_device(tree, fname, device, python, env, out, *, select=None, budget, timeout, workers, reuse=False,
               timeouts=None):
    """Runs `fname` on `device` (only the test ids in `select`, if given; else every test of a
    class instantiated per device; `timeouts`: {test id: seconds} longer than `timeout` for
    those tests) and returns a dict: ``records`` ({test id: record}),
    ``timed_out`` (the budget ran out; a budget of 0 is none), ``seconds`` (wall time) and
    ``device_independent`` (tests of other classes, deselected). Resumes after a crash. With
    `reuse`, the records of an earlier completed run in `out` are read instead."""
    stem = pathlib.Path(fname).stem
    results = out / f"{stem}.{device}.jsonl"
    started = out / f"{stem}.{device}.started"
    log = out / f"{stem}.{device}.log"
    done_marker = out / f"{stem}.{device}.done"
    deselected = out / f"{stem}.{device}.device-independent"
    if reuse and done_marker.exists() and results.exists():
        marker = json.loads(done_marker.read_text())
        merged = {**_records(results), **marker["extra"]}
        return {"records": {selection.test_id(n): r for n, r in merged.items()}, "timed_out": marker["timed_out"],
                "seconds": marker.get("seconds"), "device_independent": _device_independent(deselected)}
    for p in (results, started, log, done_marker, deselected):
        p.unlink(missing_ok=True)
    remaining = set(select) if select is not None else None
    start = time.monotonic()
    deadline = start + budget if budget else None
    extra = {}
    attempt = 0
    while True:
        attempt += 1
        select_file = out / f"{stem}.{device}.select"
        run_env = dict(worker_env(env, workers), PYTORCH_TESTING_DEVICE_ONLY_FOR=device,
                       NEURON_UPSTREAM_RESULTS=str(results),
                       NEURON_UPSTREAM_STARTED=str(started), NEURON_UPSTREAM_DEVICE_INDEPENDENT=str(deselected))
        if remaining is not None:
            select_file.write_text("".join(f"{t}\n" for t in sorted(remaining)))
            run_env["NEURON_UPSTREAM_SELECT"] = str(select_file)
        if timeouts:
            timeouts_file = out / f"{stem}.{device}.timeouts.json"
            timeouts_file.write_text(json.dumps(timeouts))
            run_env["NEURON_UPSTREAM_TIMEOUTS"] = str(timeouts_file)
        # Upstream's test/conftest.py targets an older pytest (its hooks fail validation on
        # pytest 9); the files themselves need none of it.
        cmd = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--noconftest",
               "-p", "tools.upstream.plugin", "-p", "tools.upstream.selection",
               "--timeout", str(timeout), "--rootdir", str(tree / "test"), "-o", "console_output_style=classic",
               fname]
        if workers > 1:
            cmd[3:3] = ["-n", str(workers)]
        left = None if deadline is None else max(deadline - time.monotonic(), 1)
        with open(log, "a") as fh:
            fh.write(f"== attempt {attempt}: {len(remaining) if remaining is not None else 'all'} tests\n")
            fh.flush()
            proc = subprocess.Popen(cmd, cwd=tree / "test", env=run_env, stdout=fh, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            try:
                rc = proc.wait(timeout=left)
                timed_out = False
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                rc, timed_out = None, True
        done = _records(results)
        began = set(started.read_text().split()) if started.exists() else set()
        in_flight = [n for n in began if n not in done and n not in extra]
        for n in in_flight:
            extra[n] = {"nodeid": n, "outcome": "timeout" if timed_out else "crashed",
                        "error": "file time budget exhausted" if timed_out else f"pytest exited with {rc}"}
        if timed_out or rc in (0, 1, 5) or not in_flight:
            break
        # A crash: run what has not run yet, after the test that brought the process down.
        ran = {selection.test_id(n) for n in list(done) + list(extra)}
        if remaining is None:
            remaining = None if not ran else _unrun_all(tree, fname, device, python, env, out, ran)
        else:
            remaining -= ran
        if not remaining:
            break
    seconds = round(time.monotonic() - start, 1)
    done_marker.write_text(json.dumps({"timed_out": timed_out, "extra": extra, "seconds": seconds}))
    merged = {**done, **extra}
    return {"records": {selection.test_id(n): r for n, r in merged.items()}, "timed_out": timed_out,
            "seconds": seconds, "device_independent": _device_independent(deselected)}


def _unrun_all(tree, fname, device, python, env, out, ran):
    """All collected test ids minus `ran` (resuming a run that had no selection)."""
    proc = subprocess.run([python, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "--noconftest",
                           "--rootdir", str(tree / "test"), fname], cwd=tree / "test",
                          env=dict(env, PYTORCH_TESTING_DEVICE_ONLY_FOR=device), capture_output=True, text=True)
    ids = {selection.test_id(ln.strip()) for ln in proc.stdout.splitlines()
           if "::" in ln and selection.is_device_generic(ln.strip())}
    return ids - ran


def skip_kind(message):
    for label, (_, pattern) in SKIP_KINDS.items():
        if pattern.search(message or ""):
            return label
    return "other"


def run_file(tree, fname, python, env, out, *, budget, timeout, workers, cpu_cache=False, reuse=False,
             cpu_from=None, tests=None):
    """One file: the cpu pre-pass (or, with `cpu_cache`, the earlier one in `out`; with `cpu_from`,
    another environment's, read from that directory), then the cpu-passing tests on neuron (with
    `tests`, shell-style globs of test ids, only those; the others count as excluded)."""
    stem = pathlib.Path(fname).stem
    entry = {}
    err = _import_error(tree, stem, python, env)
    if err:
        return {"import_error": err}
    start = time.monotonic()
    cpu_file = out / f"{stem}.cpu.outcomes.json"
    source = pathlib.Path(cpu_from) / cpu_file.name if cpu_from else cpu_file
    if (cpu_cache or cpu_from) and source.exists():
        cpu_run = json.loads(source.read_text())
        if cpu_from:
            cpu_file.write_text(json.dumps(cpu_run))
    elif cpu_from:
        return {"run_error": f"no cpu pre-pass to reuse: {source} does not exist"}
    else:
        cpu_run = run_device(tree, fname, "cpu", python, env, out, budget=budget, timeout=timeout, workers=workers)
        cpu_file.write_text(json.dumps(cpu_run))
    cpu = cpu_run["records"]
    if not cpu:
        return {"run_error": f"no test ran on cpu; see {out / (stem + '.cpu.log')}"}
    exp = expectations.load(stem, FILES_EXPECTATIONS)
    cpu_passing = sorted(t for t, r in cpu.items() if r["outcome"] == "passed")
    excluded = collections.Counter()
    to_run, expected = [], {}
    for t in cpu_passing:
        if tests and not any(fnmatch.fnmatchcase(t, g) for g in tests):
            excluded["not selected (--file-tests)"] += 1
            continue
        e = exp.lookup(t, None, None)
        if e is not None and e.mode == "skip":
            excluded[f"expectation: {e.category}"] += 1
            continue
        if e is not None:
            expected[t] = e
        to_run.append(t)
    neuron_run = run_device(tree, fname, "neuron", python, env, out, select=to_run, budget=budget,
                            timeout=timeout, workers=workers, reuse=reuse,
                            timeouts=test_timeouts({t: cpu[t] for t in to_run}, timeout))
    neuron, timed_out = neuron_run["records"], neuron_run["timed_out"]
    outcomes = collections.Counter()
    skips = collections.Counter()
    failures, stale, non_native = [], [], []
    if not timed_out:
        # Instantiated on cpu only: the test's dtype list differs by device (dtypesIfCPU, ...).
        missing = [t for t in to_run if t not in neuron]
        if missing:
            excluded["not instantiated for neuron (per-device dtype lists)"] += len(missing)
            to_run = [t for t in to_run if t in neuron]
    for t in to_run:
        r = neuron.get(t)
        outcome = r["outcome"] if r else "not run"
        if t in expected:
            if outcome in ("failed", "error", "crashed", "timeout"):
                outcome = "xfailed"
            elif outcome == "passed":
                outcome = "stale"
                stale.append(t)
        outcomes[outcome] += 1
        if outcome == "skipped":
            kind = skip_kind(r.get("error"))
            skips[kind] += 1
            if kind in SKIP_KINDS and SKIP_KINDS[kind][0]:
                non_native.append(t)
        elif outcome in ("failed", "error", "crashed", "timeout", "not run"):
            failures.append({"test": t, "outcome": outcome, "error": (r or {}).get("error", "")})
    unused = [e.reason for e in exp.entries if not any(e.matches(t, None, None) for t in cpu_passing)]
    entry.update(
        # Tests of classes not instantiated per device are collected but run on neither device.
        collected=len(cpu) + (cpu_run.get("device_independent") or 0),
        device_independent=cpu_run.get("device_independent") or 0,
        cpu_passed=len(cpu_passing),
        cpu_timed_out=cpu_run["timed_out"],
        cpu_reused_from=str(cpu_from) if cpu_from else None,
        excluded=sum(excluded.values()),
        excluded_by=dict(excluded),
        run=len(to_run),
        passed=outcomes["passed"],
        failed=sum(outcomes[k] for k in ("failed", "error", "crashed", "timeout", "not run")),
        xfailed=outcomes["xfailed"],
        stale=len(stale),
        skipped=outcomes["skipped"],
        skipped_non_native=len(non_native),
        skipped_non_native_tests=sorted(non_native),
        skipped_by=dict(skips),
        timed_out=timed_out,
        # Wall time of each device's run when it ran (a reused run keeps its own figure).
        cpu_seconds=cpu_run.get("seconds"),
        neuron_seconds=neuron_run.get("seconds"),
        seconds=round(time.monotonic() - start, 1),
        failures=failures,
        stale_tests=stale,
        unused_expectations=unused,
    )
    return entry


def run_files(tree, files, python, out, env, *, budget, timeout, workers, cpu_cache=False, reuse=False,
              cpu_from=None, tests=None):
    out.mkdir(parents=True, exist_ok=True)
    report = {"tree": str(tree), "files": {}, "regressions": []}
    for fname in files:
        print(f"   {fname} ...", flush=True)
        entry = run_file(tree, fname, python, env, out, budget=budget, timeout=timeout, workers=workers,
                         cpu_cache=cpu_cache or reuse, reuse=reuse, cpu_from=cpu_from, tests=tests)
        report["files"][fname] = entry
        report["regressions"] += [f"{fname}::{f['test']}" for f in entry.get("failures", [])]
        report["regressions"] += [f"{fname}::{t} (stale xfail)" for t in entry.get("stale_tests", [])]
        report["regressions"] += [f"{fname}: unused expectation ({r})" for r in entry.get("unused_expectations", [])]
    return report
