"""``python -m neuron_ccl.env_table``: the README's environment-variable table, generated from
the registry in ``src/ccl/env.cpp`` (``neuron_ccl.env_vars()``).

Prints the table (``--markdown``), checks the README's copy between its ``env-table`` markers
(``--check``) or rewrites it (``--write``), as ``python -m neuron_sim.env_table`` does.
"""

from __future__ import annotations

import argparse
import sys

from neuron_sim.docgen import run_doc_command

from . import env_vars


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown() -> str:
    lines = ["| Variable | Type | Default | Meaning |", "|---|---|---|---|"]
    for name, type_, default, meaning in env_vars():
        lines.append(f"| `{name}` | {type_} | {_cell(default) or '–'} | {_cell(meaning)} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m neuron_ccl.env_table", description=__doc__.splitlines()[0])
    return run_doc_command(parser, argv, "env-table", markdown)


if __name__ == "__main__":
    sys.exit(main())
