"""Natively verified ATen overloads.

    python -m tools.overloads record --sweep smoke     # record the demo's and the sweep's native calls
    python -m tools.overloads record --sweep full --sample 5 --add   # and every 5th architecture of the full sweep
    python -m tools.overloads verify                   # replay them under device numerics, write the data and
                                                       # document; exit 1 when a replay fails
    python -m tools.overloads document --check         # exit 1 when the document is stale against the data

The data (packages/torch-neuron/docs/native-verified.json) and the document beside it are
described in tools/overloads/document.py.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

from . import document, record

DEFAULT_OUT = record.ROOT / "build" / "overloads"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("record", help="run the models, recording their native calls")
    r.add_argument("--sweep", choices=("nine", "smoke", "full"), default="smoke")
    r.add_argument("--sample", type=int, help="with --sweep full: every k-th architecture")
    r.add_argument("--add", action="store_true",
                   help="keep the calls already recorded in --out (the demo is recorded when absent)")
    r.add_argument("--workers", type=int, default=1)
    r.add_argument("--out", type=pathlib.Path, default=DEFAULT_OUT)
    v = sub.add_parser("verify", help="replay every recorded call under device numerics; write the data")
    v.add_argument("--out", type=pathlib.Path, default=DEFAULT_OUT)
    v.add_argument("--no-write", action="store_true", help="print the summary only")
    d = sub.add_parser("document", help="the document from the committed data")
    d.add_argument("--write", action="store_true")
    d.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)

    if args.command == "record":
        calls = args.out / "calls"
        calls.mkdir(parents=True, exist_ok=True)
        sweeps = args.out / "sweeps"
        if not args.add:
            for old in calls.glob("*.pt"):
                old.unlink()
            sweeps.write_text("")
        label = record.sweep_label(args.sweep, args.sample)
        with open(sweeps, "a") as f:
            f.write(label + "\n")
        if not (calls / f"{record.DEMO_MODEL}.pt").exists():
            record.record_demo(calls)
        record.record_sweep(calls, args.sweep, args.workers, args.out / "models" / label.replace(" ", "-"),
                            args.sample)
        print(f"recorded {len(list(calls.glob('*.pt')))} models into {calls}")
        return 0
    if args.command == "verify":
        return _verify(args.out, write=not args.no_write)
    text = document.render(document.load())
    if args.write:
        document.DOCUMENT.write_text(text)
    elif args.check:
        if document.DOCUMENT.read_text() != text:
            print(f"{document.DOCUMENT} is stale: run python -m tools.overloads document --write", file=sys.stderr)
            return 1
    else:
        sys.stdout.write(text)
    return 0


def _verify(out: pathlib.Path, write: bool) -> int:
    import torch_neuron

    from .verify import verify
    torch_neuron.set_fallback_warnings(False)
    merged = record.merge(out / "calls")
    results = {}
    t0 = time.monotonic()
    for i, (key, m) in enumerate(sorted(merged.items())):
        t = time.monotonic()
        results[key] = verify(m["call"])
        res = results[key]
        print(f"[{i + 1:>3}/{len(merged)}] {key[0]:<48} {key[1]:<9} {m['call'].raggedness() or 'aligned':<9} "
              f"{res['result']:<4} {time.monotonic() - t:5.1f}s {res.get('reason', '')[:150]}", flush=True)
    counted = set()
    for sweep_dashboard in (out / "models").glob("*/dashboard.json"):
        for rec in json.loads(sweep_dashboard.read_text())["records"]:
            counted |= set(rec.get("native_ops") or {})
    sweeps = [line for line in (out / "sweeps").read_text().splitlines() if line]
    data = document.build(merged, results, sweeps, counted)
    n = len(document.verified(data))
    print(f"{n} ATen overloads verified natively of {len(data['overloads'])} executed natively "
          f"({len(merged)} overload-dtype pairs replayed in {time.monotonic() - t0:.0f} s)")
    if write:
        document.save(data)
        print(f"wrote {document.DATA.relative_to(record.ROOT)} and {document.DOCUMENT.relative_to(record.ROOT)}")
    failed = sorted(k for k, r in results.items() if r["result"] != "pass")
    for op, dtype in failed:
        print(f"FAILED {op} ({dtype}): {results[(op, dtype)]['reason']}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
