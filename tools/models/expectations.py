"""Expected non-passing architectures, as data (tools/models/expectations.yaml).

Each entry names architectures (shell-style globs), the status they are expected to have, a
category and a reason. Only the harness-side statuses (cpu_fail, no_tiny_config,
input_unsupported) may be listed without a neuron-side cause; a mismatch or neuron error needs a
"backend bug" / "missing kernel" entry with a reproducer, a "torch bug" with an upstream link, or
a "random in training" entry. An entry whose architecture now passes is stale and fails the run.
"""
from __future__ import annotations

import dataclasses
import fnmatch
import pathlib

import yaml

PATH = pathlib.Path(__file__).resolve().with_name("expectations.yaml")

HARNESS_STATUSES = ("cpu_fail", "no_tiny_config", "input_unsupported")
NEURON_STATUSES = ("mismatch", "neuron_error", "bf16_mismatch", "bf16_neuron_error")
CATEGORIES = {
    # A cpu_fail reproduces with the default config (reproduce.py); "input generation" says the
    # generated inputs are the cause, and counts as a harness skip like input_unsupported.
    "cpu_fail": ("model bug", "input generation", "missing library"),
    "no_tiny_config": ("tiny config",),
    "input_unsupported": ("input generation",),
    **{s: ("backend bug", "missing kernel", "torch bug", "random in training") for s in NEURON_STATUSES},
    # bf16 only: CPU's own bf16 autocast run misses the same tolerance (recorded as cpu_bf16).
    "bf16_mismatch": ("backend bug", "missing kernel", "torch bug", "random in training", "ill-conditioned"),
}


class ExpectationError(ValueError):
    pass


@dataclasses.dataclass(frozen=True)
class Entry:
    archs: tuple
    status: str
    category: str
    reason: str
    reproducer: str | None = None
    upstream: str | None = None

    def matches(self, arch: str) -> bool:
        return any(fnmatch.fnmatchcase(arch, p) for p in self.archs)


def parse(data, source="<memory>") -> list[Entry]:
    entries = []
    for i, raw in enumerate((data or {}).get("expectations") or []):
        where = f"{source}: expectations[{i}]"
        archs = raw.get("archs")
        if isinstance(archs, str):
            archs = [archs]
        if not archs:
            raise ExpectationError(f"{where}: name the architectures (archs: [...])")
        status = raw.get("status")
        if status not in CATEGORIES:
            raise ExpectationError(f"{where}: status must be one of {tuple(CATEGORIES)}, got {status!r}")
        category = raw.get("category")
        if category not in CATEGORIES[status]:
            raise ExpectationError(f"{where}: a {status} entry has category one of {CATEGORIES[status]}, got {category!r}")
        reason = (raw.get("reason") or "").strip()
        if not reason:
            raise ExpectationError(f"{where}: every entry needs a reason")
        reproducer = (raw.get("reproducer") or "").strip() or None
        if category in ("backend bug", "missing kernel") and not reproducer:
            raise ExpectationError(f"{where}: a '{category}' entry needs a reproducer")
        if category == "torch bug" and not raw.get("upstream"):
            raise ExpectationError(f"{where}: a 'torch bug' entry needs an upstream link")
        entries.append(Entry(tuple(str(a) for a in archs), status, category, reason, reproducer, raw.get("upstream")))
    return entries


def load(path=None) -> list[Entry]:
    p = pathlib.Path(path or PATH)
    return parse(yaml.safe_load(p.read_text()), str(p)) if p.exists() else []


def statuses(record) -> list[str]:
    """The statuses of a record that an entry can name: the fp32 status, then the bf16 one."""
    out = [record["status"]]
    bf16 = record.get("bf16")
    if bf16 and bf16["status"] != "pass":
        out.append("bf16_" + bf16["status"])
    return out


def classify(records, entries):
    """Marks each record's `outcome`: pass, expected, unexpected or stale; returns stale entries."""
    used = set()
    stale = []
    for r in records:
        arch = r["arch"]
        mine = [e for e in entries if e.matches(arch)]
        failing = [s for s in statuses(r) if s != "pass"]
        r["outcome"] = "pass"
        for s in failing:
            entry = next((e for e in mine if e.status == s), None)
            if entry is None:
                r["outcome"] = "unexpected"
                break
            used.add(entry)
            r["outcome"] = "expected"
            r["expected"] = {"category": entry.category, "reason": entry.reason}
        for e in mine:
            if e.status not in failing:
                stale.append({"arch": arch, "status": r["status"], "expected": e.status, "reason": e.reason})
                if r["outcome"] != "unexpected":
                    r["outcome"] = "stale"
    return stale
