"""Fuzz neuron's ops against CPU with hypothesis.

    python -m tests.fuzz.run                       # the bounded run of `make test` (fixed seed)
    python -m tests.fuzz.run --examples 3000 --seed 7   # a long run (`make test-fuzz-long`)
    python -m tests.fuzz.run --write-floors        # record the bounded run's native counts

Families (families.py): OpInfo samples as given and non-contiguous, and drawn arguments for
unary and binary ufuncs (broadcasting, scalars, CPU scalars, mixed devices, out= of the
wrong dtype or device), reductions (negative and out-of-range dims), matmuls (mismatched
shapes, mixed dtypes), shape and indexing ops, and sizes beyond the device's HBM.
Oracles: oracle.py. Findings that are not in known_findings.yaml fail the run, and so does
an op that reached native kernels in fewer examples than native_floors.yaml records for the
bounded run.
"""
from __future__ import annotations

import argparse
import pathlib
import sys
import time
import warnings

import yaml
from hypothesis import HealthCheck, Phase, given, seed as hseed, settings

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from tests.fuzz import families as fam  # noqa: E402
from tests.fuzz.oracle import STATS, Finding  # noqa: E402

FLOORS = HERE / "native_floors.yaml"
KNOWN = HERE / "known_findings.yaml"
# Examples per family of the bounded run; together they take well under a minute.
BOUNDED = {"unary": 160, "binary": 220, "reduction": 160, "matmul": 120, "shape": 140, "huge": 16, "opinfo": 400}


def run_family(name: str, examples: int, seed: int) -> None:
    make_strategy, body = fam.FAMILIES[name]

    @hseed(seed)
    @settings(max_examples=examples, database=None, deadline=None, derandomize=False,
              suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.generate])
    @given(make_strategy())
    def family(args):
        try:
            body(args)
        except Finding as f:
            STATS.findings.append((name, str(f)))

    family()


def known_reason(text: str, known: list) -> str | None:
    for k in known:
        if k["match"] in text:
            return k["reason"]
    return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--examples", type=int, default=0, help="examples per family (default: the bounded run's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--families", default=",".join(fam.FAMILIES))
    ap.add_argument("--write-floors", action="store_true", help="record this run's native counts as floors")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")  # the ops' own warnings (std with no degrees of freedom, ...)
    bounded = args.examples == 0 and args.seed == 0
    names = args.families.split(",")
    t0 = time.perf_counter()
    per_family = {}
    for name in names:
        before = STATS.examples
        run_family(name, args.examples or BOUNDED[name], args.seed)
        per_family[name] = STATS.examples - before
    elapsed = time.perf_counter() - t0
    known = yaml.safe_load(KNOWN.read_text()) or []
    new = []
    print(f"fuzz: {STATS.examples} examples in {elapsed:.1f} s (seed {args.seed}): "
          + ", ".join(f"{k} {v}" for k, v in per_family.items()))
    print(f"  errors expected (cpu raised, or cuda would) {STATS.expected_errors} (of them beyond HBM {STATS.oom}), both computed {STATS.both_computed}")
    for family, text in STATS.findings:
        reason = known_reason(text, known)
        print(f"  {'known' if reason else 'FINDING'}: {text}" + (f"  [{reason}]" if reason else ""))
        if not reason:
            new.append(text)
    print(f"  native kernels reached by {len(STATS.native)} ops: "
          + ", ".join(f"{op} {n}" for op, n in sorted(STATS.native.items())))
    # Op-table rows torch hands to the backend whose kernels no example reached.
    import neuron_kernels

    rows = [e for e in neuron_kernels.table().values() if e.columns.get("dispatched") is True]
    unreached = sorted(e.aten for e in rows
                       if not any(n == e.aten or n.startswith(e.aten + ".") or n in e.columns.get("executed_as", ())
                                  for n in STATS.native))
    print(f"  op-table rows dispatched to the backend: {len(rows)}; no example reached the kernel of "
          f"{len(unreached)}: {', '.join(unreached)}")
    status = 0
    if new:
        print(f"fuzz: {len(new)} findings not in {KNOWN.name}")
        status = 1
    if args.write_floors:
        FLOORS.write_text("# Examples of the bounded fuzz run (python -m tests.fuzz.run) that reached each op's\n"
                          "# native kernel; the run fails when an op falls below its floor.\n"
                          "# Regenerate with --write-floors after a deliberate change.\n"
                          + yaml.safe_dump(dict(sorted(STATS.native.items())), sort_keys=True))
        print(f"fuzz: wrote {FLOORS}")
    elif bounded and names == list(fam.FAMILIES):
        floors = yaml.safe_load(FLOORS.read_text()) or {}
        low = {op: (STATS.native.get(op, 0), floor) for op, floor in floors.items() if STATS.native.get(op, 0) < floor}
        for op, (got, floor) in sorted(low.items()):
            print(f"fuzz: {op} reached its native kernel in {got} examples, below its floor {floor}")
        status = status or (1 if low else 0)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
