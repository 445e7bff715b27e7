# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""The native-coverage document, generated from neuron_kernels' op table.

    python -m torch_neuron.native.coverage            # print the document
    python -m torch_neuron.native.coverage --write    # rewrite packages/torch-neuron/docs/native-coverage.md
    python -m torch_neuron.native.coverage --check    # exit 1 when the committed document is stale
"""
from __future__ import annotations

import argparse
import os
import sys

DOCUMENT = os.path.join("packages", "torch-neuron", "docs", "native-coverage.md")


def _code(names) -> str:
    return ", ".join(f"`{n}`" for n in names) or "-"


def render() -> str:
    """The document's Markdown: one line per op-table row, then totals."""
    import neuron_kernels

    rows = list(neuron_kernels.table().values())
    overloads = sum(1 + len(e.columns.get("executed_as", ())) for e in rows)
    dispatched = [e for e in rows if e.columns.get("dispatched") is True]
    lines = [
        "# Native coverage",
        "",
        "Generated from `packages/neuron-kernels/neuron_kernels/op_table.yaml` by",
        "`python -m torch_neuron.native.coverage --write`; edit the table, not this file.",
        "",
        f"{len(rows)} op-table rows, {overloads} ATen overloads executed natively (each row's op and",
        f"its `executed_as` forms). Torch hands {len(dispatched)} rows to the backend (the op or a form",
        f"listed); the other {len(rows) - len(dispatched)} never reach it, for the reason given.",
        "A call counts as native only when its binder covers the arguments; the notes say what that is.",
        "",
        "| op | dtypes | covers | binder | also executed as | dispatched to the backend | cost class |",
        "|---|---|---|---|---|---|---|",
    ]
    for e in rows:
        d = e.columns.get("dispatched")
        dispatch = "yes" if d is True else f"no: {d}"
        lines.append(f"| `{e.aten}` | {', '.join(e.dtypes)} | {e.notes} | `{e.columns.get('binder')}` | "
                     f"{_code(e.columns.get('executed_as', ()))} | {dispatch} | {e.columns.get('cost_class')} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--write", action="store_true", help=f"rewrite {DOCUMENT}")
    p.add_argument("--check", action="store_true", help=f"exit 1 when {DOCUMENT} differs from the table")
    p.add_argument("--root", default=".", help="repository root (default: the current directory)")
    args = p.parse_args(argv)
    path = os.path.join(args.root, DOCUMENT)
    text = render()
    if args.write:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    elif args.check:
        with open(path) as f:
            if f.read() != text:
                print(f"{path} is stale: run python -m torch_neuron.native.coverage --write", file=sys.stderr)
                return 1
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
