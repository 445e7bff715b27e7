# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""python -m torch_neuron.projection --profiles trn1,trn2,trn3 [--out DIR] script.py [script args]

Runs the script once per profile (NEURON_SIM_PROFILE) in a child process. Regions the script
opens with torch_neuron.projection.region() are reported; a script without one is reported as a
single step spanning its whole run.
"""
from __future__ import annotations

import argparse
import json
import os
import runpy
import subprocess
import sys
import tempfile

CHILD_FLAG = "--child"


def _child(script: str, args: list[str]) -> int:
    import torch_neuron.projection as projection

    out = os.environ[projection.OUTPUT_ENV]
    sys.argv = [script, *args]
    before = os.path.getsize(out) if os.path.exists(out) else 0
    # The whole run is the fallback region, reported only if the script opened none.
    code = 0
    with projection.Region(name=os.path.basename(script), record=False) as whole:
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as e:  # the script's own exit status; the report is still written
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    if (os.path.getsize(out) if os.path.exists(out) else 0) == before:
        with open(out, "a") as f:
            f.write(json.dumps(whole.summary) + "\n")
    return code


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == CHILD_FLAG:
        return _child(argv[1], argv[2:])
    ap = argparse.ArgumentParser(prog="python -m torch_neuron.projection", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profiles", default="trn2", help="comma-separated profiles (trn1,trn2,trn3)")
    ap.add_argument("--out", default="projection-report", help="output directory")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per profile run")
    ap.add_argument("script")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    from . import OUTPUT_ENV, report

    summaries = []
    for profile in [p.strip() for p in a.profiles.split(",") if p.strip()]:
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "summary.jsonl")
            env = dict(os.environ, NEURON_SIM_PROFILE=profile, **{OUTPUT_ENV: out})
            print(f"== {profile}: {a.script} {' '.join(a.args)}", flush=True)
            subprocess.run([sys.executable, "-m", "torch_neuron.projection", CHILD_FLAG, a.script, *a.args],
                           env=env, check=True, timeout=a.timeout)
            with open(out) as f:
                rows = [json.loads(line) for line in f if line.strip()]
            summaries.append(rows[-1])
    paths = report.write(summaries, a.out)
    for s in summaries:
        print("\n".join(report.terminal_lines(s)))
    print(f"report: {paths['markdown']} and {paths['html']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
