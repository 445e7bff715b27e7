"""``python -m neuron_sim.env_table``: the environment-variable table, generated from the runtime's registry.

Prints the table (``--markdown``) that the package README and docs/environment.md
carry between their ``env-table`` markers, checks those copies (``--check``) or
rewrites them (``--write``).
"""

from __future__ import annotations

import argparse
import sys

from .docgen import run_doc_command
from .env import markdown


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m neuron_sim.env_table", description=__doc__.splitlines()[0])
    return run_doc_command(parser, argv, "env-table", markdown)


if __name__ == "__main__":
    sys.exit(main())
