"""``matrix``: run tests/patches on vanilla and patched torch and check each patch's proof.

Expected outcomes: a patch's proof tests (``@pytest.mark.torch_patch``) fail on vanilla
torch and pass on the patched wheel; workaround tests (``@pytest.mark.torch_workaround``)
pass on both. C++ patches cannot be carried by the wheel and are proven by ``check``.
Skipped tests prove nothing: they are shown as UNPROVEN with the reason, and fail the
run only with ``--strict``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from . import build as build_mod
from .check import check
from .series import REPO, SeriesError, load_series

OUT = REPO / "build" / "patches"
VANILLA = Path(sys.executable)  # the interpreter running the matrix: vanilla .venv
_PROBE = "import torch; t = torch.ones(2, device='neuron'); print(torch.__version__, t.device)"


def _env(variant: str, report: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        TORCH_PATCHES_PROOF="1",
        TORCH_PATCHES_VARIANT=variant,
        TORCH_PATCHES_REPORT=str(report),
        # Proof tests must see torch's own behaviour, not torch_neuron's workarounds.
        TORCH_NEURON_DISABLE_WORKAROUNDS="1",
        TORCH_NEURON_FALLBACK_WARN="0",
    )
    return env


def _start(variant: str, python: Path, pytest_args: list[str]) -> tuple[subprocess.Popen, Path, Path]:
    report = OUT / f"matrix-{variant}.json"
    log = OUT / f"matrix-{variant}.log"
    report.unlink(missing_ok=True)
    cmd = [
        str(python), "-m", "pytest", "tests/patches", "-q", "-p", "no:cacheprovider",
        "-m", "torch_patch or torch_workaround", "--timeout=240", *pytest_args,
    ]
    proc = subprocess.Popen(cmd, cwd=REPO, env=_env(variant, report), stdout=log.open("w"), stderr=subprocess.STDOUT)
    return proc, report, log


def _probe(python: Path) -> str | None:
    """None when the neuron device works under ``python``, else why not."""
    proc = subprocess.run(
        [str(python), "-c", _PROBE], cwd=REPO, capture_output=True, text=True, timeout=300, check=False
    )
    if proc.returncode:
        return (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return None


def _outcomes(report: Path) -> dict[str, dict]:
    """nodeid -> record, keeping the worst outcome per test (call and teardown may both report)."""
    rank = {"passed": 0, "skipped": 1, "failed": 2}
    results: dict[str, dict] = {}
    for rec in json.loads(report.read_text()) if report.is_file() else []:
        prev = results.get(rec["nodeid"])
        if prev is None or rank[rec["outcome"]] > rank[prev["outcome"]]:
            results[rec["nodeid"]] = rec
    return results


def _cell(records: list[dict], expect: str) -> tuple[str, bool, bool]:
    """(text, as expected, unproven) for one patch x variant."""
    if not records:
        return "no tests", False, False
    counts = {o: sum(r["outcome"] == o for r in records) for o in ("passed", "failed", "skipped")}
    n = len(records)
    if counts["skipped"] == n:
        return f"SKIP {n}/{n}", True, True
    if expect == "fail":
        ok = counts["failed"] == n - counts["skipped"]
        text = f"FAIL {counts['failed']}/{n}" if ok else f"PASS {counts['passed']}/{n}"
    else:
        ok = counts["passed"] == n - counts["skipped"]
        text = f"PASS {counts['passed']}/{n}" if ok else f"FAIL {counts['failed']}/{n}"
    if counts["skipped"]:
        text += f" (+{counts['skipped']} skip)"
    return text, ok, bool(counts["skipped"])


def matrix(pytest_args: list[str], strict: bool = False, skip_build: bool = False) -> int:
    start = time.monotonic()
    OUT.mkdir(parents=True, exist_ok=True)
    patches = load_series()
    header_ok = {r.patch.number: r.ok for r in check()}
    # The vanilla run needs no build: start it first so it overlaps the build.
    broken = {}
    runs = {}
    reason = _probe(VANILLA)
    if reason:
        broken["vanilla"] = reason
    else:
        runs["vanilla"] = _start("vanilla", VANILLA, pytest_args)
    try:
        patched_python = build_mod.VENV / "bin" / "python" if skip_build else build_mod.build()
    except BaseException:
        for proc, _, _ in runs.values():
            proc.kill()
        raise
    variants = {"vanilla": VANILLA, "patched": patched_python}
    reason = _probe(patched_python)
    if reason:
        broken["patched"] = reason
    else:
        runs["patched"] = _start("patched", patched_python, pytest_args)
    for variant, (proc, _, log) in runs.items():
        proc.wait()
    results = {v: _outcomes(report) for v, (_, report, _) in runs.items()}

    rows = []
    violations = []
    unproven = []
    for patch in patches:
        for kind, expect in (("torch_patch", {"vanilla": "fail", "patched": "pass"}),
                             ("torch_workaround", {"vanilla": "pass", "patched": "pass"})):
            label = patch.number if kind == "torch_patch" else f"{patch.number}w"
            if kind == "torch_patch" and patch.needs_rebuild:
                text = "header check ok" if header_ok.get(patch.number) else "HEADER CHECK FAILED"
                rows.append((label, patch.name, patch.finding, "n/a (C++)", text, "check"))
                if not header_ok.get(patch.number):
                    violations.append(f"{patch.file.name}: does not apply to the wheel's headers")
                continue
            cells = []
            any_tests = False
            for variant in variants:
                if variant in broken:
                    cells.append("ERROR")
                    continue
                recs = [r for r in results[variant].values() if r["kind"] == kind and r["patch"] == patch.number]
                any_tests |= bool(recs)
                if not recs:
                    cells.append("-")
                    continue
                text, ok, skip = _cell(recs, expect[variant])
                cells.append(text)
                if not ok:
                    bad = [r for r in recs if r["outcome"] != ("failed" if expect[variant] == "fail" else "passed")
                           and r["outcome"] != "skipped"]
                    detail = "; ".join(f"{r['nodeid'].split('::')[-1]}: {r['outcome']} {r['message']}".strip() for r in bad)
                    violations.append(f"{label} {variant}: expected {expect[variant]}, got {text}: {detail}")
                if skip:
                    reasons = {r["message"] for r in recs if r["outcome"] == "skipped"}
                    unproven.append(f"{label} {variant}: skipped ({'; '.join(sorted(reasons))})")
            if kind == "torch_workaround" and not any_tests:
                continue
            if kind == "torch_patch" and not any_tests and not broken:
                violations.append(f"{patch.file.name}: no proof test marked torch_patch({patch.number!r})")
            expectation = "fail -> pass" if kind == "torch_patch" else "pass -> pass"
            rows.append((label, patch.name, patch.finding, cells[0], cells[1], expectation))

    widths = [max(len(str(r[i])) for r in rows + [("patch", "name", "finding", "vanilla", "patched", "expected")]) for i in range(6)]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    print(line.format("patch", "name", "finding", "vanilla", "patched", "expected"))
    print(line.format(*("-" * w for w in widths)))
    for r in rows:
        print(line.format(*r))
    for variant, reason in broken.items():
        violations.append(f"{variant}: device 'neuron' does not work under {variants[variant]}: {reason}")
    for variant, (proc, _, log) in runs.items():
        if proc.returncode not in (0, 1):  # 1 = some tests failed, which is expected on vanilla
            violations.append(f"{variant}: pytest exited with {proc.returncode}; see {log.relative_to(REPO)}")
    if unproven:
        print("\nunproven (skipped):")
        for u in unproven:
            print(f"  {u}")
    if violations:
        print("\nexpectation violated:")
        for v in violations:
            print(f"  {v}")
    print(f"\nmatrix: {len(rows)} rows, {len(violations)} violations, {len(unproven)} unproven, "
          f"{time.monotonic() - start:.0f} s; logs in {OUT.relative_to(REPO)}/matrix-*.log")
    return 1 if violations or (strict and unproven) else 0


def run(pytest_args: list[str], strict: bool, skip_build: bool) -> int:
    try:
        return matrix(pytest_args, strict=strict, skip_build=skip_build)
    except (SeriesError, subprocess.CalledProcessError) as e:
        print(f"matrix: {e}")
        return 1
