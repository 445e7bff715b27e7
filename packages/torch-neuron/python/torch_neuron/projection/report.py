# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""The projection report: terminal lines, Markdown and a self-contained HTML page with PNG plots."""
from __future__ import annotations

import base64
import html
import os


def _gib(b: float) -> str:
    return f"{b / 2**30:.2f} GiB"


def terminal_lines(s: dict) -> list[str]:
    verdict = "fits" if s["fits"] else "DOES NOT FIT"
    lines = [
        f"projection on {s['profile']} ({s['device']}), {s['steps']} step(s):",
        f"  step time {s['step_time_ms']:.3f} ms ({s['steps_per_s']:.1f} steps/s)"
        f"  MFU {100 * s['mfu']:.1f}%  HFU {100 * s['hfu']:.1f}% of the {s['peak_dtype']} peak",
        "  device time per step by model: " + ", ".join(f"{k} {v / s['steps']:.3f} ms"
                                                         for k, v in s["by_model_ms"].items()),
        "  by origin: " + ", ".join(f"{k} {v / s['steps']:.3f} ms" for k, v in s["by_origin_ms"].items()),
        f"  communication share {100 * s['communication_share']:.1f}%",
        f"  HBM high-water {_gib(s['hbm_peak_bytes'])} of {_gib(s['hbm_capacity_bytes'])}: {verdict}",
    ]
    if s.get("hbm_scale", 1.0) < 1:
        lines[-1] += f" (HBM scaled by {_scale(s['hbm_scale'])} of the {_gib(s['hbm_share_bytes'])} share)"
    if s.get("batch_search"):
        lines.append("  " + _batch_line(s["batch_search"]))
    top = list(s["by_op_ms"].items())[:5]
    lines.append("  top ops per step: " + ", ".join(f"{k} {v / s['steps']:.3f} ms" for k, v in top))
    if s.get("shape_only"):
        lines.extend(_shape_only_lines(s))
    return lines


def _shape_only_lines(s: dict) -> list[str]:
    """What a shape-only run adds: the first step, where memory went, the host reads."""
    lines = [f"  shape-only: {s['steps_total']} step(s), the first {s['first_step_ms']:.3f} ms"
             + ("" if s["steps_total"] > 1 else " (no steady state: one step)")]
    if s.get("out_of_memory"):
        lines.append(f"  OUT OF MEMORY at {s.get('out_of_memory_at', '?')}: {s['out_of_memory']}")
    held = ", ".join(f"{k} {_gib(v)}" for k, v in s["memory_at_peak"].items() if v)
    lines.append(f"  memory at the tensors' high-water ({_gib(s['tensor_peak_bytes'])}): {held or 'nothing'}")
    if s.get("host_scratch_bytes"):
        lines.append(f"  host kernels' scratch (apart): {_mib(s['host_scratch_bytes'])}")
    reads = s.get("host_reads") or []
    if reads:
        lines.append(f"  host reads of valueless tensors (they read as zeros): "
                     + ", ".join(f"{r['what']} at {r['where']} x{r['count']}" for r in reads[:6])
                     + (f" and {len(reads) - 6} more" if len(reads) > 6 else ""))
    return lines


def json_row(s: dict) -> dict:
    """One profile's figures for --json."""
    keys = ("step_time_ms", "first_step_ms", "steps", "steps_total", "hfu", "mfu", "model_flops_per_step",
            "counted_flops_per_step", "by_model_ms", "by_origin_ms", "hbm_peak_bytes", "tensor_peak_bytes",
            "hbm_capacity_bytes", "fits", "memory_at_peak", "host_reads", "host_scratch_bytes", "out_of_memory",
            "out_of_memory_at", "batch_search", "sources")
    return {k: s[k] for k in keys if k in s}


def _scale(x: float) -> str:
    inv = 1 / x
    return f"1/{round(inv)}" if abs(inv - round(inv)) < 1e-6 else f"{x:g}"


def _mib(b: float) -> str:
    return f"{b / 2**20:.2f} MiB"


def _check(b: dict) -> str:
    """How a largest-batch result was checked: the runs at the boundary, or why there is none."""
    n = b["largest"]
    if not b["verified"]:
        return "not checked: " + (b["limit_reason"] or "no out-of-memory boundary found")
    if not n:
        return "checked: even batch 1 is out of memory"
    peak = next(t["peak_bytes"] for t in b["trials"] if t["batch"] == n)
    return f"checked: {n} ran (high-water {_mib(peak)}), {n + 1} out of memory"


def _batch_line(b: dict) -> str:
    return (f"largest batch ({b['batch_arg']}) that fits {_mib(b['capacity_bytes'])}: {b['largest']}; "
            f"{_check(b)}; {len(b['trials'])} runs")


def _plots(summaries: list[dict], out_dir: str) -> list[tuple[str, str]]:
    try:
        import matplotlib
    except ImportError as e:
        raise ImportError("the projection report draws its plots with matplotlib, which is not installed: "
                          "pip install 'torch-neuron-backend[report]'") from e

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [s["profile"] for s in summaries]
    made = []

    def save(fig, stem, title):
        path = os.path.join(out_dir, stem + ".png")
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        made.append((title, path))

    fig, ax = plt.subplots(figsize=(6, 3.2))
    bars = ax.bar(names, [s["step_time_ms"] for s in summaries], color="#4C72B0")
    ax.bar_label(bars, fmt="%.2f ms")
    ax.set_ylabel("projected step time (ms)")
    ax.set_title("Step time per profile")
    save(fig, "step_time", "Projected step time")

    models = sorted({k for s in summaries for k in s["by_model_ms"]})
    fig, ax = plt.subplots(figsize=(6.5, 3.4))
    bottom = [0.0] * len(summaries)
    for m in models:
        vals = [s["by_model_ms"].get(m, 0.0) / s["steps"] for s in summaries]
        ax.bar(names, vals, bottom=bottom, label=m)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_ylabel("device time per step (ms)")
    ax.set_title("Device time by cost model")
    ax.legend(fontsize=8, loc="upper right")
    save(fig, "by_model", "Device time by cost model")

    s0 = summaries[0]
    ops = list(s0["by_op_ms"].items())[::-1]
    fig, ax = plt.subplots(figsize=(7, 0.32 * len(ops) + 1.2))
    ax.barh([k for k, _ in ops], [v / s0["steps"] for _, v in ops], color="#55A868")
    ax.set_xlabel(f"device time per step on {s0['profile']} (ms)")
    ax.set_title("Top ops by device time")
    ax.tick_params(axis="y", labelsize=8)
    save(fig, "top_ops", f"Top ops ({s0['profile']})")

    engines = list(s0["engine_utilisation"])
    fig, ax = plt.subplots(figsize=(6.5, 3.2))
    width = 0.8 / len(summaries)
    for i, s in enumerate(summaries):
        ax.bar([j + i * width for j in range(len(engines))], [100 * s["engine_utilisation"][e] for e in engines],
               width, label=s["profile"])
    ax.set_xticks([j + width * (len(summaries) - 1) / 2 for j in range(len(engines))], engines)
    ax.set_ylabel("busy % of kernel-schedule time")
    ax.set_title("Engine utilisation (native kernels)")
    ax.legend(fontsize=8)
    save(fig, "engines", "Engine utilisation")

    fig, ax = plt.subplots(figsize=(6, 3.2))
    x = range(len(summaries))
    ax.bar([i - 0.2 for i in x], [s["hbm_capacity_bytes"] / 2**30 for s in summaries], 0.4, label="HBM capacity",
           color="#CCCCCC")
    high = ax.bar([i + 0.2 for i in x], [max(s["hbm_peak_bytes"], 1) / 2**30 for s in summaries], 0.4,
                  label="high-water (green: fits, red: does not)",
                  color=["#55A868" if s["fits"] else "#C44E52" for s in summaries])
    ax.bar_label(high, labels=[f"{s['hbm_peak_bytes'] / 2**30:.2f} GiB\n{'fits' if s['fits'] else 'no fit'}"
                               for s in summaries], fontsize=8)
    ax.set_xticks(list(x), names)
    ax.set_ylabel("GiB per core")
    ax.set_yscale("log")
    ax.set_title("HBM high-water vs capacity")
    ax.legend(fontsize=8)
    save(fig, "hbm", "HBM high-water vs capacity")
    return made


def _fit_section(summaries: list[dict]) -> list[str]:
    out = ["", "## HBM fit", ""]
    scaled = [s for s in summaries if s.get("hbm_scale", 1.0) < 1]
    if scaled:
        out += [f"Every run had its profile's HBM share per core scaled by **{_scale(scaled[0]['hbm_scale'])}** "
                "(`NEURON_SIM_HBM_CAPACITY`; CLI `--hbm-scale`), so that out-of-memory happens within this "
                "machine's RAM: read the capacities and high-water marks below as that fraction of the chip's.", ""]
    searched = any(s.get("batch_search") for s in summaries)
    head = "| profile | HBM per core | run at | high-water | verdict |"
    rule = "|---|---|---|---|---|"
    if searched:
        head += " largest batch that fits | check | affine prediction |"
        rule += "---|---|---|"
    out += [head, rule]
    for s in summaries:
        cap = s["hbm_capacity_bytes"]
        share = f"{_mib(cap)} ({_scale(s['hbm_scale'])} of {_gib(s['hbm_share_bytes'])})" \
            if s.get("hbm_scale", 1.0) < 1 else _gib(cap)
        verdict = "out of memory" if s.get("out_of_memory") else ("fits" if s["fits"] else "**does not fit**")
        at = f"batch {s['batch']}" if s.get("batch") is not None else "as given"
        row = f"| {s['profile']} | {share} | {at} | {_mib(s['hbm_peak_bytes'])} | {verdict} |"
        b = s.get("batch_search")
        if b:
            row += f" **{b['largest']}** | {_check(b)} | {b['predicted'] if b['predicted'] is not None else '-'} |"
        elif searched:
            row += " - | - | - |"
        out.append(row)
    out += ["", "Verdict: *fits* when the high-water mark is at most the fit headroom of the capacity "
            "(`Assumptions.fit_headroom`, see Sources). Largest batch: the largest value of the script's batch "
            "flag that runs with no `torch.OutOfMemoryError` at that capacity, found by running the script "
            "(CLI `--batch-arg`); it is checked when that batch ran and the batch one above it ran out of "
            "memory. The affine prediction extrapolates the high-water marks of two fitting batches and is "
            "shown only for comparison."]
    for s in summaries:
        b = s.get("batch_search")
        if b:
            out.append("")
            out.append(f"Runs on {s['profile']}: " + ", ".join(
                f"{t['batch']} " + (f"fits ({_mib(t['peak_bytes'])})" if t["fits"] else "out of memory")
                for t in b["trials"]) + ".")
    return out


def markdown(summaries: list[dict], plots: list[tuple[str, str]]) -> str:
    out = ["# Projection report", ""]
    out.append("| profile | step time (ms) | steps/s | MFU | HFU | peak | communication | HBM high-water | fit |")
    out.append("|---|---|---|---|---|---|---|---|---|")
    for s in summaries:
        out.append(f"| {s['profile']} | {s['step_time_ms']:.3f} | {s['steps_per_s']:.1f} | {100 * s['mfu']:.1f}% | "
                   f"{100 * s['hfu']:.1f}% | {s['peak_flops'] / 1e12:.0f} TF {s['peak_dtype']} | "
                   f"{100 * s['communication_share']:.1f}% | {_gib(s['hbm_peak_bytes'])} / "
                   f"{_gib(s['hbm_capacity_bytes'])} | {'fits' if s['fits'] else '**does not fit**'} |")
    out += _fit_section(summaries)
    for s in summaries:
        out += ["", f"## {s['profile']}: {s['device']}", "", "Device time by origin: " +
                ", ".join(f"{k} {v / s['steps']:.3f} ms" for k, v in s["by_origin_ms"].items()) + " per step.", "",
                "| op | device ms / step |", "|---|---|"]
        out += [f"| `{k}` | {v / s['steps']:.4f} |" for k, v in s["by_op_ms"].items()]
        out.append(f"| (other ops) | {s['other_ops_ms'] / s['steps']:.4f} |")
        out += ["", "Sources and assumptions:", ""]
        out += [f"- **{k}**: {v}" for k, v in s["sources"].items()]
    out += ["", "## Plots", ""]
    out += [f"![{t}]({os.path.basename(p)})" for t, p in plots]
    return "\n".join(out) + "\n"


def write(summaries: list[dict], out_dir: str) -> dict:
    """Writes report.md, report.html and the PNGs into out_dir; returns their paths."""
    os.makedirs(out_dir, exist_ok=True)
    plots = _plots(summaries, out_dir)
    md = markdown(summaries, plots)
    md_path = os.path.join(out_dir, "report.md")
    with open(md_path, "w") as f:
        f.write(md)
    body = []
    for line in md.splitlines():
        if line.startswith("!["):
            title, path = line[2:].split("](")
            with open(os.path.join(out_dir, path[:-1]), "rb") as f:
                data = base64.b64encode(f.read()).decode()
            body.append(f'<figure><img alt="{html.escape(title)}" src="data:image/png;base64,{data}">'
                        f"<figcaption>{html.escape(title)}</figcaption></figure>")
        elif line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            body.append(f"<h{level}>{html.escape(line.lstrip('# '))}</h{level}>")
        elif line.startswith("|"):
            if set(line) <= set("|-"):
                continue
            cells = "".join(f"<td>{html.escape(c.strip())}</td>" for c in line.strip("|").split("|"))
            body.append(f"<tr>{cells}</tr>")
        elif line.startswith("- "):
            body.append(f"<li>{html.escape(line[2:])}</li>")
        elif line:
            body.append(f"<p>{html.escape(line)}</p>")
    page = ("<!doctype html><html><head><meta charset='utf-8'><title>Projection report</title><style>"
            "body{font-family:sans-serif;max-width:60em;margin:2em auto}td{border:1px solid #ccc;padding:2px 6px}"
            "table{border-collapse:collapse}</style></head><body>")
    # Consecutive table rows form one table.
    joined, in_table = [], False
    for b in body:
        if b.startswith("<tr>") and not in_table:
            joined.append("<table>")
            in_table = True
        if not b.startswith("<tr>") and in_table:
            joined.append("</table>")
            in_table = False
        joined.append(b)
    if in_table:
        joined.append("</table>")
    html_path = os.path.join(out_dir, "report.html")
    with open(html_path, "w") as f:
        f.write(page + "\n".join(joined) + "</body></html>\n")
    return {"markdown": md_path, "html": html_path, "plots": [p for _, p in plots]}
