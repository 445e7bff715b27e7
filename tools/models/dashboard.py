"""The models dashboard (dashboard.md / dashboard.json) generated from per-architecture records."""
from __future__ import annotations

import collections
import json
import pathlib

from . import training


def summary(records) -> dict:
    attempted = len(records)
    cpu_ok = sum(r["status"] in training.CPU_OK for r in records)
    neuron_ok = sum(r["status"] == "pass" for r in records)
    counts = collections.Counter(r["status"] for r in records)
    # CPU failures that reproduce with the default config but come from the generated inputs are
    # the harness's too (their expectation says so).
    inputs_cpu_fail = sum(r["status"] == "cpu_fail" and (r.get("expected") or {}).get("category") == "input generation"
                          for r in records)
    harness = counts["no_tiny_config"] + counts["input_unsupported"] + inputs_cpu_fail
    return {"attempted": attempted, "cpu_ok": cpu_ok, "neuron_ok": neuron_ok,
            "rate": round(100.0 * neuron_ok / cpu_ok, 2) if cpu_ok else 0.0,
            "statuses": {s: counts[s] for s in training.STATUSES},
            "cpu_fail_input_generation": inputs_cpu_fail,
            "harness_skips_pct": round(100.0 * harness / attempted, 2) if attempted else 0.0,
            "ops_native": sum(r.get("ops_native", 0) for r in records),
            "ops_fallback": sum(r.get("ops_fallback", 0) for r in records)}


def fallback_ranking(records) -> list[dict]:
    archs = collections.defaultdict(set)
    execs = collections.Counter()
    dtypes = collections.defaultdict(set)
    for r in records:
        for op, n in (r.get("fallback_ops") or {}).items():
            archs[op].add(r["arch"])
            execs[op] += n
        for op, ds in (r.get("fallback_dtypes") or {}).items():
            dtypes[op].update(ds)
    rows = [{"op": op, "architectures": len(a), "executions": execs[op], "dtypes": sorted(dtypes[op]),
             "examples": sorted(a)[:5]} for op, a in archs.items()]
    return sorted(rows, key=lambda row: (-row["architectures"], -row["executions"], row["op"]))


def native_overloads(records) -> dict:
    """Overload -> number of architectures that executed it natively (on their own arguments)."""
    archs = collections.Counter()
    for r in records:
        for op in r.get("native_ops") or {}:
            archs[op] += 1
    return dict(sorted(archs.items(), key=lambda kv: (-kv[1], kv[0])))


def summary_line(s) -> str:
    return f"models: attempted={s['attempted']} cpu_ok={s['cpu_ok']} neuron_ok={s['neuron_ok']} rate={s['rate']:.1f}%"


def _cell(text) -> str:
    return str(text or "").replace("|", "\\|").replace("\n", " ")[:160]


def write(out_dir, records, restarts, stale, wall_s, extra=None):
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    s = summary(records)
    ranking = fallback_ranking(records)
    bf16 = [r for r in records if "bf16" in r]
    data = {"summary": s, "wall_s": round(wall_s, 1), "worker_restarts": restarts, "stale": stale,
            "fallback_ranking": ranking, "native_overloads": native_overloads(records), "records": records,
            "bf16": {"attempted": len(bf16), "pass": sum(r["bf16"]["status"] == "pass" for r in bf16)},
            **(extra or {})}
    (out / "dashboard.json").write_text(json.dumps(data, indent=1, sort_keys=False, default=str))
    lines = [
        "# transformers architectures on neuron",
        "",
        "Each architecture: a tiny config, one training head, forward with loss, backward, one AdamW step and a",
        f"second forward on CPU and on neuron from the same weights (rtol {training.RTOL}, atol {training.ATOL}).",
        "",
        f"`{summary_line(s)}`",
        "",
        f"Wall time {wall_s / 60:.1f} min; worker restarts {len(restarts)}; "
        f"host fallback executions {s['ops_fallback']} of {s['ops_native'] + s['ops_fallback']}; "
        f"{len(native_overloads(records))} distinct ATen overloads executed natively; "
        f"tiny config + input generation skips {s['harness_skips_pct']}% of attempted "
        f"(including {s['cpu_fail_input_generation']} CPU failures that reproduce with the default config "
        f"but come from the generated inputs).",
        "",
        "A CPU failure counts as cpu_fail only when the architecture's default config fails the same way "
        "(tools/models/reproduce.py); otherwise it is charged to the tiny config (no_tiny_config).",
        "",
        "| status | architectures |", "|---|---|",
        *[f"| {k} | {v} |" for k, v in s["statuses"].items()],
        "",
        f"bf16 autocast subset: {data['bf16']['pass']}/{data['bf16']['attempted']} pass "
        f"(loss rel {training.BF16_LOSS_RTOL}, gradient cosine >= {training.BF16_MIN_COSINE}).",
        "",
        "## Not passing",
        "",
        "| architecture | status | outcome | first error line | expectation |", "|---|---|---|---|---|",
    ]
    for r in records:
        if r["status"] != "pass" or r.get("outcome") not in (None, "pass"):
            exp = r.get("expected") or {}
            lines.append(f"| {r['arch']} | {r['status']} | {r.get('outcome', '')} | {_cell(r.get('error'))} | "
                         f"{_cell(exp.get('category', ''))} |")
    if stale:
        lines += ["", "## Stale expectations", "", "| architecture | status now | entry |", "|---|---|---|"]
        lines += [f"| {x['arch']} | {x['status']} | {x['expected']}: {_cell(x['reason'])} |" for x in stale]
    if restarts:
        lines += ["", "## Worker restarts", "", "| architecture | phase | why |", "|---|---|---|"]
        lines += [f"| {x['arch']} | {x['phase']} | {x['why']} |" for x in restarts]
    lines += ["", "## Host fallback ops (priority list for native kernels)", "",
              "| op | architectures | executions | dtypes | e.g. |", "|---|---|---|---|---|"]
    lines += [f"| `{row['op']}` | {row['architectures']} | {row['executions']} | {', '.join(row.get('dtypes', []))} | "
              f"{', '.join(row['examples'])} |" for row in ranking]
    by_exec = sorted(ranking, key=lambda row: (-row["executions"], row["op"]))[:20]
    lines += ["", "### By execution count (top 20)", "", "| op | executions | architectures |", "|---|---|---|"]
    lines += [f"| `{row['op']}` | {row['executions']} | {row['architectures']} |" for row in by_exec]
    lines += ["", "## Per architecture", "",
              "| architecture | status | head | class | params | cpu s | neuron s | native ops | fallback ops | "
              "distinct fallbacks | bf16 |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        lines.append(f"| {r['arch']} | {r['status']} | {r.get('head', '')} | {r.get('model_class', '')} | "
                     f"{r.get('params', '')} | {r.get('cpu_s', '')} | {r.get('neuron_s', '')} | "
                     f"{r.get('ops_native', '')} | {r.get('ops_fallback', '')} | {len(r.get('fallback_ops') or {})} | "
                     f"{(r.get('bf16') or {}).get('status', '')} |")
    (out / "dashboard.md").write_text("\n".join(lines) + "\n")
    return s
