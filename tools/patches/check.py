"""``check``: the series applies exactly to the pinned torch and every patch passes the linter."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from .diff import ApplyError, apply_hunks, parse_hunks
from .series import REPO, SECTIONS, Patch, SeriesError, load_series
from .tree import installed_torch, wheel_path

_FROM_LINE = re.compile(r"^From [0-9a-f]{40} Mon Sep 17 00:00:00 2001$")
# The backend's own name must not leak into torch: fixes go through PrivateUse1 APIs.
_BACKEND_LITERAL = re.compile(r"neuron", re.IGNORECASE)
_MAX_SUBJECT = 78


@dataclass
class PatchReport:
    patch: Patch
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def lint(patch: Patch) -> list[str]:
    problems = []
    first = patch.file.read_text().split("\n", 1)[0]
    if not _FROM_LINE.match(first):
        problems.append("first line is not a `git format-patch` 'From <sha> Mon Sep 17 00:00:00 2001' line")
    for header in ("From", "Date", "Subject"):
        if not patch.headers.get(header):
            problems.append(f"missing {header}: header")
    if not patch.subject:
        problems.append("empty subject")
    elif len(patch.subject) > _MAX_SUBJECT:
        problems.append(f"subject is {len(patch.subject)} characters, at most {_MAX_SUBJECT}")
    for section in SECTIONS:
        if not patch.sections.get(section):
            problems.append(f"commit message lacks a non-empty '{section}:' section")
    if "https://" not in patch.sections.get("Related", "") and "pytorch" not in patch.sections.get("Related", ""):
        problems.append("'Related:' names no upstream issue, PR or code")
    if not patch.finding:
        problems.append("missing 'Finding:' trailer (the fact-sheet finding id)")
    if not patch.trailers.get("Proof"):
        problems.append("missing 'Proof:' trailer (the test that shows the fix)")
    elif not patch.needs_rebuild and not (REPO / patch.trailers["Proof"]).is_file():
        problems.append(f"Proof: {patch.trailers['Proof']} does not exist")
    if patch.needs_rebuild and "Rebuild:" not in patch.body:
        problems.append("C++ change without a 'Rebuild:' paragraph saying it needs a source build")
    for fp in patch.files:
        for n, line in enumerate(fp.diff.split("\n"), 1):
            if line.startswith("+") and not line.startswith("+++") and _BACKEND_LITERAL.search(line):
                problems.append(f"{fp.path}: added line mentions a backend by name ({line[1:].strip()[:60]!r}); use the PrivateUse1 name")
    return problems


def check(patches_dir: Path | None = None) -> list[PatchReport]:
    """Lint each patch and apply the series to the installed wheel's files, in order."""
    patches = load_series(patches_dir) if patches_dir else load_series()
    site, _ = installed_torch()
    contents: dict[str, str] = {}
    reports = []
    for patch in patches:
        report = PatchReport(patch, problems=lint(patch))
        for fp in patch.files:
            target = wheel_path(fp.path)
            if target is None:
                report.notes.append(f"{fp.path}: not shipped in the wheel, checked only against a source checkout")
                continue
            if target not in contents:
                file = site / target
                if not file.is_file():
                    report.problems.append(f"{fp.path}: {file} does not exist in the installed wheel")
                    continue
                contents[target] = file.read_text()
            try:
                contents[target] = apply_hunks(contents[target], parse_hunks(fp.diff), target)
            except ApplyError as e:
                report.problems.append(f"does not apply: {e}")
                continue
            if target.endswith(".py"):
                try:
                    compile(contents[target], target, "exec")
                except SyntaxError as e:
                    report.problems.append(f"{target} no longer compiles: {e}")
            else:
                report.notes.append(f"{fp.path}: applies to the wheel's {target}; needs a source rebuild")
        reports.append(report)
    return reports


def print_reports(reports: list[PatchReport]) -> bool:
    for r in reports:
        status = "ok  " if r.ok else "FAIL"
        kind = "C++, rebuild" if r.patch.needs_rebuild else "python"
        print(f"{status} {r.patch.file.name} [{r.patch.finding or '?'}; {kind}]")
        for p in r.problems:
            print(f"       problem: {p}")
        for n in r.notes:
            print(f"       note: {n}")
    bad = [r for r in reports if not r.ok]
    print(f"{len(reports) - len(bad)}/{len(reports)} patches pass check")
    return not bad


def run() -> int:
    try:
        return 0 if print_reports(check()) else 1
    except SeriesError as e:
        print(f"check: {e}")
        return 1
