"""The environment variables the runtime reads: one typed registry, owned by the C++ runtime.

The runtime reads the variables at ``init()``; ``shutdown()`` then the next
call (or a new process) applies changed values. ``python -m neuron_sim.env_table``
prints the registry as the Markdown table the docs carry.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from . import _C


class EnvVar(NamedTuple):
    name: str
    type: str        # string | int | bool | core_list | bytes
    default: str
    meaning: str


def env_registry() -> list[EnvVar]:
    """Every environment variable the runtime reads, in registry order."""
    return [EnvVar(*row) for row in _C.env_registry()]


def env_values() -> dict[str, str | None]:
    """The current process environment's value of each registered variable (None: unset)."""
    return {var.name: os.environ.get(var.name) or None for var in env_registry()}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown() -> str:
    lines = ["| Variable | Type | Default | Meaning |", "|---|---|---|---|"]
    for var in env_registry():
        lines.append(f"| `{var.name}` | {var.type} | {_cell(var.default)} | {_cell(var.meaning)} |")
    return "\n".join(lines) + "\n"

