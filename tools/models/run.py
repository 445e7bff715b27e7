"""`make test-models`: every transformers architecture trains one step on neuron as on CPU.

    python -m tools.models.run                 # the full sweep (MODEL_MAPPING_NAMES)
    python -m tools.models.run --smoke         # the fixed subset of SUBSET (part of `make test`)
    python -m tools.models.run --archs gpt2,t5 # chosen architectures
    python -m tools.models.run --archs gpt2 --merge   # rerun some, replace them in the full sweep's results
    python -m tools.models.run --from-results  # re-check the full sweep's results.jsonl
    python -m tools.models.run --smoke --record-native DIR   # also record native calls for replay

Writes build/models/dashboard.{md,json} (the smoke run: build/models/smoke/). The last line is
`models: attempted=N cpu_ok=N neuron_ok=N rate=P%`. Exits 1 on an unexpected status, a stale
expectation, or (full sweep) when tiny-config and input-generation skips reach 10% of attempted.

A CPU failure of the tiny case is cpu_fail only when the architecture's default config fails the
same way (tools/models/reproduce.py, on the meta device); otherwise it is no_tiny_config. A
cpu_fail whose expectation says "input generation" counts as a harness skip too.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]

# The smoke subset, also the bf16 autocast subset: decoders, encoders, encoder-decoders,
# vision, audio, mixture-of-experts and state-space models.
SUBSET = (
    "gpt2", "llama", "mistral", "qwen2", "gemma2", "phi3", "gpt_neox", "opt", "falcon", "bloom",
    "bert", "roberta", "distilbert", "deberta-v2", "electra",
    "t5", "bart", "marian",
    "vit", "resnet", "convnext", "swin",
    "wav2vec2", "whisper", "hubert",
    "mixtral", "qwen2_moe", "olmoe",
    "mamba", "mamba2",
)
HARNESS_SKIP_LIMIT_PCT = 10.0


def _progress(total):
    done = [0]

    def show(record):
        done[0] += 1
        err = f"  {record.get('error', '')[:110]}" if record["status"] != "pass" else ""
        print(f"[{done[0]:>3}/{total}] {record['arch']:<28} {record['status']:<17} "
              f"{record.get('wall_s', 0):>6.1f}s{err}", flush=True)
    return show


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="only the fixed subset of 30 architectures")
    ap.add_argument("--archs", help="comma-separated model types")
    ap.add_argument("--sample", type=int, help="every k-th architecture of the full list (development)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--limit", type=float, default=240.0, help="per-architecture time limit, seconds")
    ap.add_argument("--expectations", help="expectations file (default tools/models/expectations.yaml)")
    ap.add_argument("--from-results", action="store_true",
                    help="re-check the last run's results.jsonl against the expectations and rewrite its dashboard")
    ap.add_argument("--merge", action="store_true",
                    help="with --archs: replace these architectures' records in the full sweep's results.jsonl "
                         "(build/models) and rewrite its dashboard")
    ap.add_argument("--out", help="output directory (default build/models, smoke: build/models/smoke)")
    ap.add_argument("--record-native", metavar="DIR",
                    help="record each architecture's native calls into DIR/<arch>.pt (python -m tools.overloads)")
    args = ap.parse_args(argv)

    from . import case, dashboard, expectations, pool
    entries = expectations.load(args.expectations)
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES
    if args.archs:
        archs = [a.strip() for a in args.archs.split(",") if a.strip()]
    elif args.smoke:
        archs = list(SUBSET)
    else:
        archs = case.architectures()
        if args.sample:
            archs = archs[::args.sample]
    unknown = [a for a in archs if a not in MODEL_MAPPING_NAMES]
    if unknown:
        print(f"not in transformers' MODEL_MAPPING_NAMES: {', '.join(unknown)}", file=sys.stderr)
        return 2
    if args.merge and (not args.archs or args.from_results):
        print("--merge needs --archs (and no --from-results)", file=sys.stderr)
        return 2
    full = not (args.archs or args.smoke or args.sample) or args.merge
    out = pathlib.Path(args.out) if args.out else ROOT / "build" / "models" / ("" if full else "smoke" if args.smoke else "partial")
    out.mkdir(parents=True, exist_ok=True)
    if args.from_results:
        by_arch = {}
        for line in (out / "results.jsonl").read_text().splitlines():
            rec = json.loads(line)
            by_arch[rec["arch"]] = rec
        missing = [a for a in archs if a not in by_arch]
        if missing:
            print(f"{out / 'results.jsonl'} has no result for {', '.join(missing[:10])}", file=sys.stderr)
            return 2
        records = [by_arch[a] for a in archs]
        old = json.loads((out / "dashboard.json").read_text()) if (out / "dashboard.json").exists() else {}
        restarts, wall = old.get("worker_restarts", []), old.get("wall_s", 0.0)
    else:
        print(f"== {len(archs)} architectures, {args.workers} spawn workers, {args.limit:.0f} s limit each", flush=True)
        t0 = time.monotonic()
        if args.merge:
            previous = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
            old = json.loads((out / "dashboard.json").read_text()) if (out / "dashboard.json").exists() else {}
        with open(out / ("rerun.jsonl" if args.merge else "results.jsonl"), "w") as log:
            show = _progress(len(archs))

            def on_result(record):
                log.write(json.dumps(record, default=str) + "\n")
                log.flush()
                show(record)
            records, restarts = pool.run(archs, workers=args.workers, limit_s=args.limit,
                                         bf16_subset=set(SUBSET), on_result=on_result,
                                         record_dir=args.record_native)
        wall = time.monotonic() - t0
        if args.merge:
            # The merged file keeps the full sweep's order; the dashboard then covers every architecture.
            fresh = {r["arch"]: r for r in records}
            records = [fresh.pop(r["arch"], r) for r in previous] + list(fresh.values())
            (out / "results.jsonl").write_text("".join(json.dumps(r, default=str) + "\n" for r in records))
            restarts = [x for x in old.get("worker_restarts", []) if x.get("arch") not in set(archs)] + restarts
            wall = old.get("wall_s", 0.0)
    stale = expectations.classify(records, entries)
    s = dashboard.write(out, records, restarts, stale, wall, extra={"full": full})
    failed = False
    unexpected = [r for r in records if r["outcome"] == "unexpected"]
    for r in unexpected:
        print(f"UNEXPECTED {r['arch']}: {r['status']}{' bf16 ' + r['bf16']['status'] if r.get('bf16') else ''}: "
              f"{r.get('error') or (r.get('bf16') or {}).get('error', '')}")
    for x in stale:
        print(f"STALE expectation {x['arch']}: expected {x['expected']}, status now {x['status']}")
    failed = bool(unexpected or stale)
    if full and s["harness_skips_pct"] >= HARNESS_SKIP_LIMIT_PCT:
        print(f"tiny-config and input-generation skips are {s['harness_skips_pct']}% of attempted "
              f"(limit {HARNESS_SKIP_LIMIT_PCT}%)")
        failed = True
    bf16 = [r for r in records if "bf16" in r]
    print(f"dashboard: {out / 'dashboard.md'}; wall {wall / 60:.1f} min; worker restarts {len(restarts)}; "
          f"bf16 {sum(r['bf16']['status'] == 'pass' for r in bf16)}/{len(bf16)} pass")
    print(dashboard.summary_line(s))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
