"""The verified-overloads data (committed JSON) and the document generated from it.

The data says, per ATen overload the models executed natively: per dtype, the shapes of the call
replayed, its raggedness, the model it came from and the replay's result; which models executed it.
It holds no tensor contents, so the document regenerates without rerunning the models.
"""
from __future__ import annotations

import json

from .record import DEMO, DEMO_ARGS, DEMO_MODEL, NINE, ROOT

DATA = ROOT / "packages" / "torch-neuron" / "docs" / "native-verified.json"
DOCUMENT = ROOT / "packages" / "torch-neuron" / "docs" / "native-verified.md"


def claimed_overloads() -> list[str]:
    """Every overload the op table says the backend executes natively (rows and executed_as)."""
    import neuron_kernels

    out = set()
    for e in neuron_kernels.table().values():
        out.add(e.aten)
        out.update(e.columns.get("executed_as", ()))
    return sorted(out)


def undispatched_rows() -> set[str]:
    """Op-table rows torch never hands to the backend as themselves (the table's dispatched column)."""
    import neuron_kernels

    return {e.aten for e in neuron_kernels.table().values() if e.columns.get("dispatched") is not True}


def counts(overload: dict) -> bool:
    """An overload counts as verified when every dtype it was recorded in passed, one at a ragged shape."""
    dts = overload["dtypes"].values()
    return all(d["result"] == "pass" for d in dts) and any(d["ragged"] for d in dts)


def build(merged: dict, results: dict, sweeps: list, counted: set = frozenset()) -> dict:
    """The data from record.merge()'s calls and verify()'s results, both keyed by (overload, dtype);
    ``counted``: the overloads the backend's counters saw executed natively in the sweep."""
    overloads: dict = {}
    for (op, dtype), m in sorted(merged.items()):
        o = overloads.setdefault(op, {"dtypes": {}, "models": set()})
        o["models"] |= m["models"]
        r = results[(op, dtype)]
        o["dtypes"][dtype] = {"shapes": m["call"].shapes(), "results": m["call"].result_sizes,
                              "ragged": m["call"].raggedness(),
                              "model": m["source"], "executions": m["executions"], "result": r["result"],
                              **({"reason": r["reason"]} if r["result"] != "pass" else {})}
    for o in overloads.values():
        o["models"] = sorted(o["models"])
    models = sorted(set().union(*(m["models"] for m in merged.values()))) if merged else []
    return {"sweeps": sweeps, "models": models, "overloads": overloads,
            "counted_without_kernel": sorted(set(counted) - set(overloads))}


def _models(models: list[str]) -> str:
    parts = []
    if DEMO_MODEL in models:
        parts.append("demo")
    nine = [m for m in NINE if m in models]
    if nine:
        parts.append(f"{len(nine)} of the nine ({', '.join(nine)})" if len(nine) < len(NINE) else "all nine")
    rest = [m for m in models if m != DEMO_MODEL and m not in NINE]
    if rest:
        more = f", +{len(rest) - 4}" if len(rest) > 4 else ""
        parts.append(f"{len(rest)} other architecture{'s' if len(rest) > 1 else ''} ({', '.join(rest[:4])}{more})")
    return "; ".join(parts)


def _compact(shape) -> str:
    if shape and isinstance(shape[0], list) and (not shape[0] or isinstance(shape[0][0], list) or len(shape) > 3):
        # a tensor list: its first tensors and how many more
        head = ",".join(_compact(s) for s in shape[:2])
        return f"[{head}" + (f",+{len(shape) - 2} more]" if len(shape) > 2 else "]")
    return str(shape).replace(" ", "")


def _shape(d: dict) -> str:
    results = d.get("results") or []
    shown = _compact(results) if len(results) > 3 else " ".join(_compact(s) for s in results)
    return (" ".join(_compact(s) for s in d["shapes"]) or "-") + (f" -> {shown}" if results else "")


def render(data: dict) -> str:
    """The document: the data, against the op table as it is now (what it claims, what no model ran)."""
    ov = data["overloads"]
    claimed = claimed_overloads()
    not_executed = [c for c in claimed if c not in ov]
    undispatched = undispatched_rows()
    never = [c for c in not_executed if c in undispatched]
    not_executed = [c for c in not_executed if c not in undispatched]
    not_claimed = sorted(op for op in ov if op not in set(claimed))
    verified = [op for op in sorted(ov) if counts(ov[op]) and op in set(claimed)]
    strict = [op for op in verified if DEMO_MODEL in ov[op]["models"] or set(NINE) & set(ov[op]["models"])]
    failing = [(op, dt, d) for op in sorted(ov) for dt, d in sorted(ov[op]["dtypes"].items()) if d["result"] != "pass"]
    unragged = [op for op in sorted(ov) if not any(d["ragged"] for d in ov[op]["dtypes"].values())]
    names = {"nine": "the nine architectures", "smoke": "the 30-architecture smoke subset (which holds the nine)",
             "full": "every architecture of the full sweep"}
    sweep = " and ".join(names.get(s, s) for s in data["sweeps"])
    archs = [m for m in data["models"] if m != DEMO_MODEL]
    lines = [
        "# Natively verified ATen overloads",
        "",
        "Generated from `native-verified.json` by `python -m tools.overloads document --write`; the data",
        "comes from `make test-native-verified` (record the models' native calls, replay each under device",
        "numerics). Edit neither by hand.",
        "",
        f"**{len(verified)} ATen overloads verified natively** (of {len(ov)} the models executed natively;",
        f"the op table claims {len(claimed)}): executed natively by a model on its own arguments, and the",
        "replay of that call on neuron under device numerics",
        "(`TORCH_NEURON_DEVICE_NUMERICS=1`: values from the tile kernels in the ISA simulator) at a ragged",
        f"shape ran natively and matched the same call on CPU. {len(strict)} of them are executed by the demo",
        "or the nine-model test alone.",
        "",
        f"Models: the demo (`{DEMO.relative_to(ROOT)} {' '.join(DEMO_ARGS)}`, as",
        "tests/e2e/test_demo_native_share.py runs it) and, through `python -m tools.models.run --record-native`,",
        f"{sweep} ({len(archs)} architectures): forward, backward and AdamW step as the sweep's case runs",
        "them (fp32, and bf16 autocast for the smoke subset). The nine are those of",
        "tests/e2e/test_models_native_share.py.",
        "",
        "- **Recorded call**: for each (overload, dtype) executed natively, the backend's accounting hook",
        "  (`torch_neuron.native.recording`) keeps one call's arguments as CPU copies with their sizes and",
        "  strides, preferring the most ragged call over all models.",
        "- **Ragged**: the largest tensor the call reads or writes (arguments and results, by element",
        "  count) has an element count that is not a multiple of 128, the partition count (`elements`), or",
        "  else a dimension that is not (`dimension`).",
        "- **Verified**: the replay on neuron counted the overload native and none on the host, a tile",
        "  kernel ran, and every result and written argument (in-place self, out=) matched CPU: fp32 rtol",
        "  and atol 2e-4, bf16 3e-2, fp16 3e-3 (a result's dtype or its call's floating inputs', the looser),",
        "  integers and bool exactly. An overload counts when every",
        "  dtype it was recorded in passed and at least one of those calls is ragged.",
        "",
        "| overload | dtypes | ragged call replayed (argument shapes -> result shapes; kind; model) | executed natively by |",
        "|---|---|---|---|",
    ]
    for op in verified:
        o = ov[op]
        rag = [(dt, d) for dt, d in sorted(o["dtypes"].items()) if d["ragged"]]
        dt, d = rag[0]
        lines.append(f"| `{op}` | {', '.join(sorted(o['dtypes']))} | {dt} `{_shape(d)}` ({d['ragged']}; {d['model']}) "
                     f"| {_models(o['models'])} |")
    lines += ["", f"## Executed natively, failing verification ({len(failing)} overload-dtype pairs)", ""]
    if failing:
        lines += ["| overload | dtype | call (argument shapes -> result shapes; model) | failure |", "|---|---|---|---|"]
        lines += [f"| `{op}` | {dt} | `{_shape(d)}` ({d['model']}) | {d['reason'].replace('|', '/')} |"
                  for op, dt, d in failing]
    lines += ["", f"## Executed natively at aligned shapes only ({len(unragged)})", "",
              ", ".join(f"`{op}`" for op in unragged) or "-", "",
              f"## Claimed by the op table, executed natively by no model ({len(not_executed) + len(never)} of {len(claimed)})", "",
              f"Dispatched to the backend ({len(not_executed)}): " + (", ".join(f"`{op}`" for op in not_executed) or "-"), "",
              f"Rows torch never dispatches to the backend as themselves ({len(never)}; see native-coverage.md): "
              + (", ".join(f"`{op}`" for op in never) or "-"), ""]
    if data.get("counted_without_kernel"):
        lines += [f"## Counted native with no tile kernel ({len(data['counted_without_kernel'])})", "",
                  "The backend counts these as native (device copies and scalar reads of the runtime), but no",
                  "tile kernel computes them, so device numerics has nothing to replay; they are not in the op",
                  "table and not in the count above: " + ", ".join(f"`{op}`" for op in data["counted_without_kernel"]), ""]
    if not_claimed:
        lines += [f"## Recorded native, no longer in the op table ({len(not_claimed)}; not counted)", "",
                  ", ".join(f"`{op}`" for op in not_claimed), ""]
    return "\n".join(lines)


def load() -> dict:
    return json.loads(DATA.read_text())


def save(data: dict) -> None:
    # One overload per line: small, and a rerun's diff reads per overload.
    def dump(v):
        return json.dumps(v, sort_keys=True, separators=(",", ":"))
    rest = {k: v for k, v in data.items() if k != "overloads"}
    lines = [f" {dump(k)}:{dump(v)}," for k, v in sorted(rest.items())]
    body = ",\n".join(f"  {dump(op)}:{dump(o)}" for op, o in sorted(data["overloads"].items()))
    DATA.write_text("{\n" + "\n".join(lines) + '\n "overloads":{\n' + body + "\n }\n}\n")
    DOCUMENT.write_text(render(data))


def verified(data: dict) -> list[str]:
    """The overloads that count: verified, and still claimed by the op table."""
    claimed = set(claimed_overloads())
    return [op for op in sorted(data["overloads"]) if counts(data["overloads"][op]) and op in claimed]
