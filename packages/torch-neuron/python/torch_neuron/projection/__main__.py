# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""python -m torch_neuron.projection [--shape-only] --profiles trn1,trn2,trn3 [--out DIR] [--json FILE]
       [--hbm-scale S] [--batch-arg FLAG | --seq-arg FLAG [--max-batch N]] [--model-flops F]
       [-m module | script.py] [script args]

--shape-only runs the script without computing values (torch_neuron.projection.shape_only), at the
profile's real HBM, so full-size models run here; its report adds the first step apart, host reads
of valueless tensors with their lines, and what memory held at the peak. Exit codes: 0 ran, 3 does
not fit (out of memory, or a high-water above the fit threshold; the report is still written), 2 bad
input (the script failed, an unknown profile, a --batch-arg/--seq-arg the script does not take).

Runs the script once per profile (NEURON_SIM_PROFILE) in a child process. Regions the script
opens with torch_neuron.projection.region() are reported; a script without one is reported as a
single step spanning its whole run.

HBM fit: every run of a profile gets that profile's HBM share per core times --hbm-scale
(NEURON_SIM_HBM_CAPACITY), so a search that needs out-of-memory errors fits this machine's RAM;
the report states the scale. With --batch-arg the user names the script flag that sets the batch
(e.g. --batch-arg=--batch: the = is needed as the value starts with a dash); the CLI then finds
the largest value of that flag that runs without out-of-memory on each profile and checks it by
running that batch and the one above it (torch_neuron.projection.capacity).
"""
from __future__ import annotations

import argparse
import json
import os
import runpy
import sys

CHILD_FLAG = "--child"
EXIT_OUT_OF_MEMORY = 3
EXIT_BAD_INPUT = 2
# Our flags that take no value (everything else takes one: --flag value or --flag=value).
NO_VALUE_FLAGS = ("-h", "--help", "--shape-only")


def _run_target(script: str, args: list[str]) -> None:
    """Runs the script (or ``-m module``) as __main__, as python would."""
    if script.startswith("-m:"):
        sys.argv = [script[3:], *args]
        runpy.run_module(script[3:], run_name="__main__", alter_sys=True)
    else:
        sys.argv = [script, *args]
        runpy.run_path(script, run_name="__main__")


def _shape_only_child(script: str, args: list[str]) -> int:
    """The child of a --shape-only run: the whole process is one shape-only run (begun at import by
    TORCH_NEURON_SHAPE_ONLY=1); its summary goes to the CLI's output file."""
    import traceback

    import torch
    import torch_neuron.projection as projection
    from torch_neuron.projection import shape_execution

    run = shape_execution.active_run()
    code, exc = 0, None
    try:
        _run_target(script, args)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except torch.OutOfMemoryError as e:
        exc = e
        print(f"out of memory: {str(e).splitlines()[0]}", file=sys.stderr)
    except Exception as e:  # the script's own failure: its traceback, then one line naming it
        traceback.print_exc()
        print(f"error: {script} failed in shape-only execution: {type(e).__name__}: "
              f"{str(e).splitlines()[0] if str(e) else ''}", file=sys.stderr)
        code = EXIT_BAD_INPUT
    summary = run.end(exc)
    summary["name"] = os.path.basename(script)
    with open(os.environ[projection.OUTPUT_ENV], "a") as f:
        f.write(json.dumps(summary) + "\n")
    if exc is not None:
        return EXIT_OUT_OF_MEMORY
    return code


def _child(script: str, args: list[str]) -> int:
    import torch
    import torch_neuron.projection as projection

    out = os.environ[projection.OUTPUT_ENV]
    sys.argv = [script, *args]
    before = os.path.getsize(out) if os.path.exists(out) else 0
    # The whole run is the fallback region, reported only if the script opened none (or the run
    # ended in out-of-memory before any region of the script could report).
    code, oom = 0, False
    whole = projection.Region(name=os.path.basename(script), record=False)
    try:
        with whole:
            try:
                runpy.run_path(script, run_name="__main__")
            except SystemExit as e:  # the script's own exit status; the report is still written
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except torch.OutOfMemoryError as e:
        oom = True
        print(f"out of memory: {str(e).splitlines()[0]}", file=sys.stderr)
    if oom or (os.path.getsize(out) if os.path.exists(out) else 0) == before:
        with open(out, "a") as f:
            f.write(json.dumps(whole.summary) + "\n")
    return EXIT_OUT_OF_MEMORY if oom else code


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == CHILD_FLAG:
        if os.environ.get("TORCH_NEURON_SHAPE_ONLY", "0").strip().lower() in ("1", "true", "yes", "on"):
            return _shape_only_child(argv[1], argv[2:])
        return _child(argv[1], argv[2:])
    ap = argparse.ArgumentParser(prog="python -m torch_neuron.projection", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 allow_abbrev=False)  # the script's own flags must not match ours
    ap.add_argument("--profiles", default="trn2", help="comma-separated profiles (trn1,trn2,trn3)")
    ap.add_argument("--out", default="projection-report", help="output directory")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per run of the script")
    ap.add_argument("--hbm-scale", default="1",
                    help="HBM per core = profile share x this (e.g. 1/1024), for every run; default 1")
    ap.add_argument("--batch-arg", default=None, metavar="FLAG",
                    help="the script's flag that sets the batch (--batch-arg=--batch): search the largest "
                         "batch that fits each profile and check it by running it and the one above")
    ap.add_argument("--seq-arg", default=None, metavar="FLAG",
                    help="the script's flag that sets the sequence length: search the longest that fits instead")
    ap.add_argument("--max-batch", type=int, default=1 << 16, help="upper bound of the batch search")
    ap.add_argument("--shape-only", action="store_true",
                    help="run without computing values (full-size models), at the profile's real HBM")
    ap.add_argument("--json", default=None, metavar="FILE", help="also write the figures per profile as JSON")
    ap.add_argument("--model-flops", type=float, default=None,
                    help="model flops per step for MFU (default: the counted flops of the launches)")
    ap.add_argument("script", help="script.py, or -m module")
    # Everything after the script is the script's own (argparse's REMAINDER rejects a first
    # argument that looks like an option, e.g. the script's --batch).
    i = 0
    module = None
    while i < len(argv) and argv[i].startswith("-"):
        if argv[i] == "-m":
            module = argv[i + 1] if i + 1 < len(argv) else None
            break
        i += 1 if ("=" in argv[i] or argv[i] in NO_VALUE_FLAGS) else 2
    if module is not None:
        a = ap.parse_args(argv[:i] + ["-m:" + module])
        a.args = argv[i + 2:]
    else:
        a = ap.parse_args(argv[:i + 1])
        a.args = argv[i + 1:]
    from . import capacity, report

    if a.shape_only:
        return _shape_only_main(a, ap)
    scale = capacity.parse_scale(a.hbm_scale)
    summaries = []
    for profile in [p.strip() for p in a.profiles.split(",") if p.strip()]:
        cap = capacity.scaled_capacity(profile, scale) if scale < 1 else None
        print(f"== {profile}: {a.script} {' '.join(a.args)}"
              + (f" (HBM per core scaled by {a.hbm_scale}: {cap / 2**20:.1f} MiB)" if cap else ""), flush=True)
        rows, r = capacity.run_child(a.script, a.args, profile, cap, a.timeout, capture=False)
        main_trial = capacity.trial_of(rows, r, f"{a.script} on {profile}")
        s = rows[-1]
        s["hbm_scale"] = scale
        s["hbm_share_bytes"] = capacity.profile_share(profile)
        if a.batch_arg:
            given = capacity.batch_in(a.args, a.batch_arg)
            known = []
            if given is not None:
                main_trial.batch = given
                known = [main_trial]
            res = capacity.largest_batch(a.script, a.args, batch_arg=a.batch_arg, profile=profile,
                                         hbm_scale=scale, start=given, max_batch=a.max_batch, timeout=a.timeout,
                                         log=lambda m: print(m, flush=True), known=known)
            s["batch_search"] = res.as_dict()
            s["batch"] = given
        summaries.append(s)
    paths = report.write(summaries, a.out)
    for s in summaries:
        print("\n".join(report.terminal_lines(s)))
    print(f"report: {paths['markdown']} and {paths['html']}")
    return 0


def _shape_only_main(a, ap) -> int:
    """--shape-only: one child per profile at its real HBM; JSON, Markdown and HTML reports."""
    import neuron_sim

    from . import capacity, report

    profiles = [p.strip() for p in a.profiles.split(",") if p.strip()]
    for p in profiles:
        try:
            neuron_sim.profile_properties(p)
        except Exception as e:
            print(f"error: unknown profile {p!r} ({str(e).splitlines()[0]})", file=sys.stderr)
            return EXIT_BAD_INPUT
    search_arg = a.seq_arg or a.batch_arg
    if search_arg and capacity.batch_in(a.args, search_arg) is None:
        print(f"error: {'--seq-arg' if a.seq_arg else '--batch-arg'} {search_arg}: the script's arguments "
              f"{' '.join(a.args) or '(none)'} do not set {search_arg} (give it, e.g. {search_arg} 8)",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    env = dict(os.environ, TORCH_NEURON_SHAPE_ONLY="1")
    if a.model_flops:
        env["TORCH_NEURON_MODEL_FLOPS"] = repr(a.model_flops)
    label = a.script[3:] if a.script.startswith("-m:") else a.script
    summaries, worst = [], 0
    for profile in profiles:
        print(f"== {profile}: {label} {' '.join(a.args)} (shape-only)", flush=True)
        rows, r = capacity.run_child(a.script, a.args, profile, None, a.timeout, env=env, capture=False)
        if not rows:
            print(f"error: {label} on {profile} wrote no projection (exit {r.returncode})", file=sys.stderr)
            return EXIT_BAD_INPUT
        if r.returncode == EXIT_BAD_INPUT:
            return EXIT_BAD_INPUT
        s = rows[-1]
        s["hbm_scale"] = 1.0
        s["hbm_share_bytes"] = capacity.profile_share(profile)
        if search_arg:
            given = capacity.batch_in(a.args, search_arg)
            res = capacity.largest_batch(a.script, a.args, batch_arg=search_arg, profile=profile, hbm_scale=1.0,
                                         start=given, max_batch=a.max_batch, timeout=a.timeout, env=env,
                                         log=lambda m: print(m, flush=True))
            s["batch_search"] = res.as_dict()
            s["batch_search"]["searched"] = "sequence length" if a.seq_arg else "batch"
        summaries.append(s)
        if not s["fits"]:
            worst = EXIT_OUT_OF_MEMORY
    paths = report.write(summaries, a.out)
    for s in summaries:
        print("\n".join(report.terminal_lines(s)))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"profiles": {s["profile"]: report.json_row(s) for s in summaries}}, f, indent=1)
        print(f"json: {a.json}")
    print(f"report: {paths['markdown']} and {paths['html']}")
    return worst


if __name__ == "__main__":
    sys.exit(main())
