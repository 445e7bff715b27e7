"""Dashboard of an upstream-test run: JSON and Markdown, generated from the per-test JSONL
records (tools/upstream/plugin.py) and the expectation files, never edited by hand."""

from __future__ import annotations

import collections
import datetime
import json
import pathlib

OUTCOMES = ("passed", "failed", "error", "xfailed", "stale", "skipped")
UNEXPECTED = ("failed", "error", "stale")


def _counts(records):
    c = collections.Counter(r["outcome"] for r in records)
    counts = {k: c.get(k, 0) for k in OUTCOMES}
    counts["total"] = len(records)
    run = counts["total"] - counts["skipped"]
    counts["pass_rate"] = round(counts["passed"] / run, 4) if run else None
    # Time inside the tests (setup, call, teardown) summed over the records: worker seconds,
    # so about workers x the wall time the group took.
    counts["test_seconds"] = round(sum(r.get("duration") or 0.0 for r in records), 1)
    return counts


def _group(records, key):
    groups = collections.defaultdict(list)
    for r in records:
        groups[key(r)].append(r)
    return {k: _counts(v) for k, v in sorted(groups.items(), key=lambda kv: str(kv[0]))}


def load_records(path):
    if not path or not pathlib.Path(path).exists():
        return []
    with open(path) as fh:
        return [json.loads(line) for line in fh if line.strip()]


def summarize_env(run):
    records = [r for r in load_records(run.get("results")) if r.get("suite")]
    suites = sorted({r["suite"] for r in records})
    env = {
        "python": run["python"],
        "smoke": run.get("smoke"),
        "seconds": run["seconds"],
        "load_average": run.get("load_average"),
        "returncode": run["returncode"],
        "health": run.get("health"),
        "load_error": run.get("load_error"),
        "overall": _counts(records),
        "suites": {s: _counts([r for r in records if r["suite"] == s]) for s in suites},
        "per_test": {s: _group([r for r in records if r["suite"] == s], lambda r: r["test"]) for s in suites},
        "per_subject": {s: _group([r for r in records if r["suite"] == s], lambda r: r["subject"]) for s in suites},
        "per_dtype": {s: _group([r for r in records if r["suite"] == s], lambda r: r.get("dtype") or "-")
                      for s in suites},
        "compare_cpu": _counts([r for r in records if r["suite"] == "ops" and r["test"] == "test_compare_cpu"]),
        "failures": [_brief(r) for r in records if r["outcome"] in ("failed", "error")],
        "stale": [_brief(r) for r in records if r["outcome"] == "stale"],
        "xfails": [_brief(r) for r in records if r["outcome"] == "xfailed"],
        "skips_by_category": dict(collections.Counter(
            r.get("category") or "not applicable" for r in records if r["outcome"] == "skipped")),
        "xfails_by_category": dict(collections.Counter(
            r.get("category") or "upstream OpInfo xfail" for r in records if r["outcome"] == "xfailed")),
    }
    if run.get("files") is not None:
        env["files"] = run["files"]
        # The dashboard's per-file figures (FILE_COLUMNS), wall time included.
        env["file_figures"] = {f: file_figures(e) for f, e in (run["files"].get("files") or {}).items()
                               if "collected" in e}
    return env


def _brief(r):
    keys = ("suite", "test", "subject", "dtype", "variant", "category", "reason", "error", "nodeid")
    return {k: r[k] for k in keys if r.get(k) is not None}


def build(runs, smoke=False, seconds=None):
    envs = {run["name"]: summarize_env(run) for run in runs}
    ok = bool(envs)
    for name, env in envs.items():
        unexpected = sum(env["overall"][k] for k in UNEXPECTED)
        # Only the vanilla run gates the exit status; the patched run is reported beside it.
        # Upstream files gate through the tests that pass on cpu and carry no expectation.
        unexpected += len((env.get("files") or {}).get("regressions", []))
        ran_nothing = not env["overall"]["total"] and not env.get("files")
        # pytest exits 0 (all passed) or 1 (some failed); anything else is an interrupted run.
        interrupted = env["returncode"] not in (0, 1, None)
        if name == "vanilla" and (unexpected or env["health"] or env["load_error"] or ran_nothing or interrupted):
            ok = False
    return {
        "generated": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "smoke": smoke,
        "seconds": seconds,
        "environments": envs,
        "ok": ok,
    }


def _rate(c):
    if not c or not c.get("total"):
        return "-"
    rate = f"{100 * c['pass_rate']:.1f}%" if c.get("pass_rate") is not None else "n/a"
    return f"{c['passed']}/{c['total'] - c['skipped']} ({rate})"


def markdown(report):
    envs = report["environments"]
    names = list(envs)
    lines = [
        "# Upstream device-generic tests on `neuron`",
        "",
        f"Generated {report['generated']}{' (smoke subset)' if report['smoke'] else ''}; "
        f"wall time {report['seconds']} s; status **{'OK' if report['ok'] else 'FAILING'}**.",
        "",
        "Pass rate = passed / (run = total - skipped). Unexpected = failed + error + stale xfail.",
        "",
        "## Summary" + (" (vanilla vs patched torch)" if len(names) > 1 else ""),
        "",
        "| suite | " + " | ".join(names) + " |",
        "|---|" + "---|" * len(names),
    ]
    suites = sorted({s for e in envs.values() for s in e["suites"]})
    for s in suites:
        lines.append(f"| {s} | " + " | ".join(_rate(envs[n]["suites"].get(s)) for n in names) + " |")
    lines.append("| ops: compare vs CPU, all dtypes | " + " | ".join(_rate(envs[n]["compare_cpu"]) for n in names) + " |")
    lines.append("| **overall (suites)** | " + " | ".join(_rate(envs[n]["overall"]) for n in names) + " |")
    # Upstream test files next to the suites: passed / (cpu-passing tests run on neuron - skipped).
    file_envs = {n: (envs[n].get("files") or {}).get("files") or {} for n in names}
    for fname in dict.fromkeys(f for n in names for f in file_envs[n]):
        lines.append(f"| file `{fname}` | " + " | ".join(
            file_rate(file_envs[n].get(fname, {})) or "-" for n in names) + " |")
    lines += ["", "| counts | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for k in OUTCOMES:
        lines.append(f"| {k} | " + " | ".join(str(envs[n]["overall"][k]) for n in names) + " |")
    lines.append("| seconds | " + " | ".join(str(envs[n]["seconds"]) for n in names) + " |")
    lines.append("| load average (1 min) at start / end | " + " | ".join(
        " / ".join(f"{x:.2f}" for x in envs[n]["load_average"]) if envs[n].get("load_average") else "-"
        for n in names) + " |")
    for s in suites:
        lines.append(f"| test seconds: {s} | " + " | ".join(
            str(envs[n]["suites"][s]["test_seconds"]) if s in envs[n]["suites"] else "-" for n in names) + " |")
    lines.append("| scope | " + " | ".join("smoke subset" if envs[n].get("smoke") else "full" for n in names) + " |")
    lines += files_table(envs)
    for n in names:
        env = envs[n]
        lines += ["", f"## {n}", ""]
        if env["load_error"]:
            lines += [f"The backend did not load: `{env['load_error']}`", ""]
            continue
        if env["health"]:
            lines += [f"**Run stopped by the device-health probe:** {env['health']}", ""]
        lines += ["### Per test", "", "| suite | test | passed | failed | error | xfailed | stale | skipped |",
                  "|---|---|---|---|---|---|---|---|"]
        for s, tests in env["per_test"].items():
            for t, c in tests.items():
                lines.append(f"| {s} | {t} | {c['passed']} | {c['failed']} | {c['error']} | {c['xfailed']} | "
                             f"{c['stale']} | {c['skipped']} |")
        if "ops" in env["per_dtype"]:
            lines += ["", "### Ops suite per dtype", "", "| dtype | passed / run | xfailed | skipped |", "|---|---|---|---|"]
            for d, c in env["per_dtype"]["ops"].items():
                lines.append(f"| {d} | {_rate(c)} | {c['xfailed']} | {c['skipped']} |")
        lines += ["", "### Unexpected failures", ""]
        if env["failures"] or env["stale"]:
            lines += ["| suite | test | subject | dtype | first error line |", "|---|---|---|---|---|"]
            for f in env["failures"]:
                lines.append(f"| {f['suite']} | {f['test']} | {f.get('subject', '')} | {f.get('dtype', '')} | "
                             f"{_cell(f.get('error', ''))} |")
            for f in env["stale"]:
                lines.append(f"| {f['suite']} | {f['test']} | {f.get('subject', '')} | {f.get('dtype', '')} | "
                             f"stale xfail ({f.get('category', '')}): passes now |")
        else:
            lines.append("None.")
        lines += ["", "### Expected failures and skips by category", "", "| category | xfailed | skipped |", "|---|---|---|"]
        cats = sorted(set(env["xfails_by_category"]) | set(env["skips_by_category"]))
        for c in cats:
            lines.append(f"| {c} | {env['xfails_by_category'].get(c, 0)} | {env['skips_by_category'].get(c, 0)} |")
        lines += ["", "### Subjects with any non-passing case", "", "| suite | subject | passed | failed | xfailed | skipped |",
                  "|---|---|---|---|---|---|"]
        for s, subjects in env["per_subject"].items():
            for subj, c in subjects.items():
                if c["passed"] != c["total"]:
                    lines.append(f"| {s} | {subj} | {c['passed']} | {c['failed'] + c['error'] + c['stale']} | "
                                 f"{c['xfailed']} | {c['skipped']} |")
        files = env.get("files")
        if files:
            lines += ["", "### Upstream test files", ""]
            if "error" in files:
                lines.append(files["error"])
            for fname, f in files.get("files", {}).items():
                if f.get("import_error"):
                    lines.append(f"- `{fname}`: does not import: `{f['import_error']}`")
                elif f.get("run_error"):
                    lines.append(f"- `{fname}`: {f['run_error']}")
                else:
                    lines.append(f"- `{fname}` ({file_figures(f)['wall_seconds']} s): excluded {_by(f['excluded_by'])}; "
                                 f"skipped on neuron {_by(f['skipped_by'])}"
                                 + (" [file time budget exhausted]" if f.get("timed_out") else ""))
                    for fail in f.get("failures", []):
                        lines.append(f"  - {fail['outcome']}: `{fail['test']}`: {_cell(fail.get('error', ''))}")
                    for t in f.get("stale_tests", []):
                        lines.append(f"  - stale xfail: `{t}` passes now")
                    for r in f.get("unused_expectations", []):
                        lines.append(f"  - expectation matches no cpu-passing test: {_cell(r)}")
    return "\n".join(lines) + "\n"


FILE_COLUMNS = (("collected", "collected"), ("cpu_passed", "cpu-passing"), ("excluded", "excluded"),
                ("skipped", "skipped"), ("skipped_non_native", "of which non-native skips"),
                ("passed", "passed"), ("failed", "unexpected"), ("xfailed", "xfailed"),
                ("cpu_seconds", "cpu s"), ("neuron_seconds", "neuron s"), ("wall_seconds", "wall s"))


def file_figures(f):
    """The dashboard's figures of one upstream file in one environment (FILE_COLUMNS keys); the
    wall time is the cpu pre-pass plus the neuron run (each as measured when it ran), the neuron
    run alone when the cpu pre-pass is another environment's."""
    out = {key: f.get(key) for key, _ in FILE_COLUMNS if key != "wall_seconds"}
    parts = [0.0 if f.get("cpu_reused_from") else f.get("cpu_seconds"), f.get("neuron_seconds")]
    out["wall_seconds"] = round(sum(parts), 1) if all(x is not None for x in parts) else None
    return out


def file_rate(f):
    """passed / (tests run on neuron - skipped), as the suites' rate; None without figures."""
    if "passed" not in f:
        return None
    ran = f.get("run", 0) - f.get("skipped", 0)
    counts = {"passed": f["passed"], "total": f.get("run", 0), "skipped": f.get("skipped", 0),
              "pass_rate": round(f["passed"] / ran, 4) if ran else None}
    return _rate(counts)


def non_native_turned_on(vanilla, patched):
    """For one file: the tests vanilla torch skipped on neuron for not being a native device,
    and what the patched run (patch 0012) did with them: {"vanilla": n, "run": n, "passed": n,
    "still skipped": n}, or None when either run has no figures."""
    if "skipped_non_native_tests" not in vanilla or "skipped_non_native_tests" not in patched:
        return None
    skipped = set(vanilla["skipped_non_native_tests"])
    still = skipped & set(patched["skipped_non_native_tests"])
    failing = skipped & {f["test"] for f in patched.get("failures", [])}
    not_run = skipped & {f["test"] for f in patched.get("failures", []) if f["outcome"] == "not run"}
    run = skipped - still - not_run
    return {"vanilla": len(skipped), "run": len(run), "passed": len(run - failing), "still skipped": len(still)}


def files_table(envs):
    """Upstream files: one row per file and environment (vanilla and patched torch one under the other)."""
    names = [n for n in envs if (envs[n].get("files") or {}).get("files")]
    if not names:
        return []
    fnames = list(dict.fromkeys(f for n in names for f in envs[n]["files"]["files"]))
    lines = ["", "## Upstream test files (from " + envs[names[0]]["files"].get("tree", "?") + ")", "",
             "Tests of each file that pass on cpu with the same wheel run on neuron, except device-independent "
             "ones and expectation skips (excluded). Non-native skips: tests torch's decorators skip on a "
             "device only for not being one of torch's own (onlyNativeDeviceTypes, largeTensorTest, and the "
             "fused-optimizer tests OptimInfo.supports_fused_on limits to cpu, cuda, xpu and mps); "
             "onlyCPU/onlyCUDA-style skips are not among them (they skip CUDA too). Wall time: the cpu "
             "pre-pass plus the neuron run, in seconds (the neuron run alone where the cpu pre-pass is "
             "vanilla's). Per-test timeout on neuron: the run's --timeout, or 20 times the "
             "test's cpu duration when that is longer (at most 900 s).", "",
             "| file | torch | " + " | ".join(label for _, label in FILE_COLUMNS) + " |",
             "|---|---|" + "---|" * len(FILE_COLUMNS)]
    totals = {n: collections.Counter() for n in names}
    for fname in fnames:
        for n in names:
            f = envs[n]["files"]["files"].get(fname, {})
            if "collected" not in f:
                why = "import error" if f.get("import_error") else (f.get("run_error") and "no cpu run") or "not run"
                lines.append(f"| `{fname}` | {n} | {why} |" + " |" * (len(FILE_COLUMNS) - 1))
                continue
            figures = file_figures(f)
            cells = ["-" if figures[k] is None else str(figures[k]) for k, _ in FILE_COLUMNS]
            for k, _ in FILE_COLUMNS:
                totals[n][k] += figures[k] or 0
            lines.append(f"| `{fname}` | {n} | " + " | ".join(cells) + " |")
    for n in names:
        lines.append(f"| **all** | {n} | " + " | ".join(f"**{round(totals[n][k], 1)}**" for k, _ in FILE_COLUMNS)
                     + " |")
    for n in names:
        reused = sorted(f for f, e in envs[n]["files"]["files"].items() if e.get("cpu_reused_from"))
        if reused:
            lines += ["", f"{n}: the cpu pre-pass of {', '.join(reused)} is the vanilla run's."]
    if "vanilla" in names and "patched" in names:
        lines += ["", "Non-native skips under vanilla torch, and what patch 0012 makes of them in the patched run:", "",
                  "| file | skipped on vanilla | run on patched | passed | still skipped |", "|---|---|---|---|---|"]
        for fname in fnames:
            turned = non_native_turned_on(envs["vanilla"]["files"]["files"].get(fname, {}),
                                          envs["patched"]["files"]["files"].get(fname, {}))
            if turned is None:
                lines.append(f"| `{fname}` | - | - | - | - |")
            else:
                lines.append(f"| `{fname}` | {turned['vanilla']} | {turned['run']} | {turned['passed']} | "
                             f"{turned['still skipped']} |")
    return lines


def _by(counts):
    return ", ".join(f"{v} {k}" for k, v in counts.items()) if counts else "none"


def _cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")[:200]


def write(report, out):
    out = pathlib.Path(out)
    (out / "dashboard.json").write_text(json.dumps(report, indent=1, sort_keys=False) + "\n")
    (out / "dashboard.md").write_text(markdown(report))


def summary_line(report, out):
    parts = []
    for name, env in report["environments"].items():
        if env["load_error"]:
            parts.append(f"{name}: backend did not load")
            continue
        o = env["overall"]
        unexpected = o["failed"] + o["error"] + o["stale"]
        cmp = env["compare_cpu"]
        cmp_txt = f", ops vs CPU {_rate(cmp)}" if cmp["total"] else ""
        parts.append(f"{name}: {o['passed']} passed, {unexpected} unexpected, {o['xfailed']} xfailed, "
                     f"{o['skipped']} skipped ({_rate(o)}{cmp_txt}; {env['seconds']} s)"
                     + (" [STOPPED: device unhealthy]" if env["health"] else ""))
        files = env.get("files") or {}
        for fname, f in files.get("files", {}).items():
            if f.get("import_error"):
                parts.append(f"{name} {fname}: does not import")
            elif "passed" in f:
                parts.append(f"{name} {fname}: {f['passed']}/{f['run']} pass, {f['failed']} unexpected")
    status = "OK" if report["ok"] else "FAILED"
    return f"test-upstream {status}: " + "; ".join(parts) + f" -> {pathlib.Path(out) / 'dashboard.md'}"
