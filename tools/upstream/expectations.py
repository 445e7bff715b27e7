"""Expectation files: one YAML file per suite listing skips, xfails and tolerances.

Each entry names what it matches (test base names, subjects such as OpInfo full names,
dtypes; shell-style globs allowed), a mode (``skip`` or ``xfail``), a category and a reason.
Tolerance entries give per-subject, per-dtype ``atol``/``rtol`` overrides.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import pathlib

import yaml

EXPECTATIONS_DIR = pathlib.Path(__file__).resolve().parents[2] / "tests" / "upstream" / "expectations"

CATEGORIES = (
    "missing kernel",
    "backend bug",
    "torch bug",
    "tolerance",
    "out of scope",
    "test data",
)
MODES = ("skip", "xfail")


class ExpectationError(ValueError):
    pass


def _as_list(value):
    if value is None:
        return None
    return [value] if isinstance(value, str) else list(value)


def _matches(patterns, value):
    if patterns is None:
        return True
    return value is not None and any(fnmatch.fnmatchcase(value, p) for p in patterns)


@dataclasses.dataclass(frozen=True)
class Expectation:
    mode: str
    category: str
    reason: str
    tests: tuple | None = None
    subjects: tuple | None = None
    dtypes: tuple | None = None
    patch: str | None = None
    reproducer: str | None = None

    def matches(self, test, subject, dtype):
        return (
            _matches(self.tests, test)
            and _matches(self.subjects, subject)
            and _matches(self.dtypes, dtype)
        )


@dataclasses.dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float
    subjects: tuple | None = None
    dtypes: tuple | None = None
    tests: tuple | None = None
    reason: str = ""

    def matches(self, test, subject, dtype):
        return (
            _matches(self.tests, test)
            and _matches(self.subjects, subject)
            and _matches(self.dtypes, dtype)
        )


@dataclasses.dataclass
class SuiteExpectations:
    suite: str
    entries: list
    tolerances: list

    def lookup(self, test, subject, dtype):
        """The first entry matching (test base name, subject, dtype name), or None."""
        for entry in self.entries:
            if entry.matches(test, subject, dtype):
                return entry
        return None

    def tolerance(self, test, subject, dtype):
        for tol in self.tolerances:
            if tol.matches(test, subject, dtype):
                return tol
        return None


def _tuple(value):
    items = _as_list(value)
    return tuple(str(v) for v in items) if items is not None else None


def parse(suite, data, source="<memory>"):
    data = data or {}
    entries = []
    for i, raw in enumerate(data.get("expectations") or []):
        where = f"{source}: expectations[{i}]"
        mode = raw.get("mode")
        if mode not in MODES:
            raise ExpectationError(f"{where}: mode must be one of {MODES}, got {mode!r}")
        category = raw.get("category")
        if category not in CATEGORIES:
            raise ExpectationError(f"{where}: category must be one of {CATEGORIES}, got {category!r}")
        reason = (raw.get("reason") or "").strip()
        if not reason:
            raise ExpectationError(f"{where}: every entry needs a reason")
        if category == "torch bug" and not raw.get("patch") and not raw.get("upstream"):
            raise ExpectationError(f"{where}: a 'torch bug' entry needs a patch id or an upstream link")
        if category in ("backend bug", "missing kernel") and not raw.get("reproducer"):
            raise ExpectationError(f"{where}: a '{category}' entry needs a reproducer")
        subjects = raw.get("subjects", raw.get("ops", raw.get("modules", raw.get("optims"))))
        entries.append(
            Expectation(
                mode=mode,
                category=category,
                reason=reason,
                tests=_tuple(raw.get("tests")),
                subjects=_tuple(subjects),
                dtypes=_tuple(raw.get("dtypes")),
                patch=str(raw["patch"]) if raw.get("patch") else raw.get("upstream"),
                reproducer=(raw.get("reproducer") or "").strip() or None,
            )
        )
    tolerances = []
    for i, raw in enumerate(data.get("tolerances") or []):
        where = f"{source}: tolerances[{i}]"
        if "atol" not in raw or "rtol" not in raw or not (raw.get("reason") or "").strip():
            raise ExpectationError(f"{where}: a tolerance needs atol, rtol and a reason")
        subjects = raw.get("subjects", raw.get("ops", raw.get("modules")))
        tolerances.append(
            Tolerance(
                atol=float(raw["atol"]),
                rtol=float(raw["rtol"]),
                subjects=_tuple(subjects),
                dtypes=_tuple(raw.get("dtypes")),
                tests=_tuple(raw.get("tests")),
                reason=raw["reason"].strip(),
            )
        )
    return SuiteExpectations(suite, entries, tolerances)


def load(suite, directory=None):
    path = pathlib.Path(directory or EXPECTATIONS_DIR) / f"{suite}.yaml"
    if not path.exists():
        return SuiteExpectations(suite, [], [])
    return parse(suite, yaml.safe_load(path.read_text()), source=str(path))
