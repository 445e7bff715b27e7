# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""python -m torch_neuron.projection --profiles trn1,trn2,trn3 [--out DIR] [--hbm-scale S]
       [--batch-arg FLAG [--max-batch N]] script.py [script args]

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
    ap.add_argument("--max-batch", type=int, default=1 << 16, help="upper bound of the batch search")
    ap.add_argument("script")
    # Everything after the script is the script's own (argparse's REMAINDER rejects a first
    # argument that looks like an option, e.g. the script's --batch).
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        i += 1 if ("=" in argv[i] or argv[i] in ("-h", "--help")) else 2
    a = ap.parse_args(argv[:i + 1])
    a.args = argv[i + 1:]
    from . import capacity, report

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


if __name__ == "__main__":
    sys.exit(main())
