"""``make test-upstream``: PyTorch's device-generic tests against ``neuron``, with a dashboard.

    python -m tools.upstream.run                 # all suites (vanilla, and patched torch if present)
    python -m tools.upstream.run --smoke         # the <3 min subset that `make test` runs
    python -m tools.upstream.run --suite ops --only add,mul
    PYTORCH_SRC=~/pytorch python -m tools.upstream.run --files test_view_ops.py,test_optim.py
    python -m tools.upstream.run --fetch-source --files test_view_ops.py
    python -m tools.upstream.run --suite none --files test_indexing.py --reuse-cpu   # iterate on one file

Results go to build/upstream/ (dashboard.json, dashboard.md, one JSONL per environment).
The exit status is non-zero when a test fails unexpectedly, an xfail went stale, or the
device-health probe stopped the run.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

from . import dashboard, files as upstream_files, source_tree

REPO = pathlib.Path(__file__).resolve().parents[2]
SUITES = {
    "ops": "tests/upstream/test_ops.py",
    "gradients": "tests/upstream/test_gradients.py",
    "modules": "tests/upstream/test_modules.py",
    "optim": "tests/upstream/test_optim.py",
}


def environments(args):
    """(name, python) pairs: the current interpreter, and the patched-torch venv when present."""
    envs = [("vanilla", args.python or sys.executable)]
    patched = REPO / ".venv-patched" / "bin" / "python"
    if args.patched == "yes" or (args.patched == "auto" and patched.exists() and not args.smoke):
        if not patched.exists():
            raise SystemExit(f"--patched yes: {patched} does not exist (build it with `make patched-torch`)")
        envs.append(("patched", str(patched)))
    return envs


def backend_loads(python):
    probe = "import torch; torch.ones(1, device='neuron').add_(1).cpu()"
    proc = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=300,
                          env=test_env({}), cwd=REPO)
    return proc.returncode == 0, (proc.stderr.strip().splitlines() or [""])[-1]


def test_env(extra):
    env = dict(os.environ)
    env.update(
        TORCH_NEURON_FALLBACK_WARN="0",  # the suites exercise host execution on purpose
        PYTORCH_PRINT_REPRO_ON_FAILURE="0",
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])),
    )
    env.update(extra)
    return env


def run_suites(name, python, args, out, smoke):
    results = out / f"{name}.jsonl"
    health = out / f"{name}.health"
    for path in (results, health):
        path.unlink(missing_ok=True)
    env = test_env({
        "NEURON_UPSTREAM": "1",
        "NEURON_UPSTREAM_RESULTS": str(results),
        "NEURON_UPSTREAM_HEALTH_FILE": str(health),
    })
    if smoke:
        env["NEURON_UPSTREAM_SMOKE"] = "1"
    if args.only:
        env["NEURON_UPSTREAM_ONLY"] = args.only
    cmd = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tools.upstream.plugin",
           "--timeout", str(args.timeout), "-o", "console_output_style=classic", "--no-header",
           "-rN", *[SUITES[s] for s in args.suites]]
    if args.workers > 1:
        cmd[3:3] = ["-n", str(args.workers)]
        env = upstream_files.worker_env(env, args.workers)
    if args.pytest_args:
        cmd += args.pytest_args.split()
    print(f"== {name}: {' '.join(args.suites)}{' (smoke subset)' if smoke else ''} ({python})", flush=True)
    start = time.monotonic()
    load_start = os.getloadavg()[0]
    log = out / f"{name}.log"
    with open(log, "w") as fh:
        proc = subprocess.run(cmd, cwd=REPO, env=env, stdout=fh, stderr=subprocess.STDOUT)
    return {
        "name": name,
        "python": python,
        "smoke": smoke,
        "returncode": proc.returncode,
        "seconds": round(time.monotonic() - start, 1),
        # The machine may be shared: the 1-minute load average when the run started and ended.
        "load_average": [round(load_start, 2), round(os.getloadavg()[0], 2)],
        "results": str(results),
        "log": str(log),
        "health": health.read_text().strip() if health.exists() else None,
    }


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m tools.upstream.run", description=__doc__.split("\n")[1])
    p.add_argument("--smoke", action="store_true", help="small subset of every suite (<3 min)")
    p.add_argument("--suite", default=",".join(SUITES),
                   help=f"comma-separated, from {', '.join(SUITES)}; 'none' for upstream files only")
    p.add_argument("--only", help="comma-separated OpInfo/ModuleInfo/OptimInfo names")
    p.add_argument("--workers", type=int, default=2, help="pytest-xdist workers (default 2)")
    p.add_argument("--timeout", type=int, default=240, help="per-test timeout in seconds")
    p.add_argument("--python", help="interpreter of the vanilla run (default: this one)")
    p.add_argument("--patched", choices=("auto", "yes", "no"), default="auto",
                   help="also run under .venv-patched (auto: when it exists, not with --smoke)")
    p.add_argument("--patched-scope", choices=("smoke", "full"), default="full",
                   help="what the patched-torch run covers (default: the same suites as the vanilla "
                        "run, so the dashboard compares like with like)")
    p.add_argument("--files", help="upstream test files to run from PYTORCH_SRC (comma-separated; default: "
                   "the files of tools/upstream/files.py, none with --smoke)")
    p.add_argument("--file-budget", type=int, default=1800,
                   help="seconds per upstream file and device; a run past it stops, the rest counts as not run "
                        "(0: no budget)")
    p.add_argument("--file-workers", type=int, default=2, help="pytest-xdist workers per upstream file")
    p.add_argument("--patched-files",
                   help="upstream files of the patched-torch run (comma-separated; default: as --files)")
    p.add_argument("--patched-cpu", choices=("own", "vanilla"), default="own",
                   help="the patched run's cpu pre-pass: its own, or the vanilla run's (the series changes "
                        "what torch does for PrivateUse1 devices; the dashboard says which was used)")
    p.add_argument("--file-tests",
                   help="only these tests of the upstream files on neuron (comma-separated globs of test ids "
                        "Class.test_name_DEV_dtype); the other cpu-passing tests count as excluded")
    p.add_argument("--reuse-results", action="store_true",
                   help="reuse every completed per-file run of an earlier invocation (cpu and neuron), "
                        "running only files that have none (resuming an interrupted full run)")
    p.add_argument("--reuse-cpu", action="store_true",
                   help="reuse the cpu pre-pass of an earlier run of the same environment (developing one file)")
    p.add_argument("--pytorch-src", default=os.environ.get("PYTORCH_SRC"), help="PyTorch source tree (PYTORCH_SRC)")
    p.add_argument("--fetch-source", action="store_true",
                   help="without a tree, fetch Debian's pytorch source package into third_party/")
    p.add_argument("--out", default=str(REPO / "build" / "upstream"))
    p.add_argument("--pytest-args", help="extra pytest arguments, space-separated")
    args = p.parse_args(argv)
    args.suites = [s for s in args.suite.split(",") if s and s != "none"]
    unknown = set(args.suites) - set(SUITES)
    if unknown:
        p.error(f"unknown suite(s) {sorted(unknown)}; choose from {sorted(SUITES)}")

    out = pathlib.Path(args.out).resolve()  # upstream files run from their own tree
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    runs = []
    for name, python in environments(args):
        ok, why = backend_loads(python)
        if not ok:
            print(f"== {name}: the neuron backend does not load under {python}: {why}", flush=True)
            runs.append({"name": name, "python": python, "returncode": None, "seconds": 0, "results": None,
                         "log": None, "health": None, "load_error": why})
            continue
        smoke = args.smoke or (name == "patched" and args.patched_scope == "smoke")
        if args.suites:
            runs.append(run_suites(name, python, args, out, smoke))
        else:
            runs.append({"name": name, "python": python, "smoke": smoke, "returncode": 0, "seconds": 0,
                         "results": None, "log": None, "health": None})
        if name == "patched" and args.patched_files is not None:
            files = [f for f in args.patched_files.split(",") if f]
        elif args.files is not None:
            files = [f for f in args.files.split(",") if f]
        else:
            files = [] if args.smoke else list(upstream_files.FILES)
        tree = source_tree.locate(args.pytorch_src, fetch=args.fetch_source) if files else None
        if files and tree is not None:
            print(f"== {name}: upstream files from {tree}", flush=True)
            runs[-1]["files"] = upstream_files.run_files(
                tree, files, python, out / f"{name}-files", test_env({}), budget=args.file_budget,
                timeout=min(args.timeout, 120), workers=args.file_workers, cpu_cache=args.reuse_cpu,
                reuse=args.reuse_results, tests=[g for g in (args.file_tests or "").split(",") if g] or None,
                cpu_from=out / "vanilla-files" if name == "patched" and args.patched_cpu == "vanilla" else None)
        elif files:
            runs[-1]["files"] = {"error": "no PyTorch source tree: set PYTORCH_SRC or pass --fetch-source"}

    report = dashboard.build(runs, smoke=args.smoke, seconds=round(time.monotonic() - started, 1))
    dashboard.write(report, out)
    print(dashboard.summary_line(report, out), flush=True)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
