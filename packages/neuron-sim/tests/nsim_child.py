"""Child processes with a chosen neuron_sim configuration (the environment is read at init)."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import textwrap

import neuron_sim as ns

REGISTERED = [var.name for var in ns.env_registry()]


def child_env(**overrides: str) -> dict[str, str]:
    """This environment without any registered variable, plus ``overrides``."""
    env = {k: v for k, v in os.environ.items() if k not in REGISTERED}
    env.update(overrides)
    return env


def _no_core_dump() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run_python(code: str, env: dict[str, str] | None = None, timeout: float = 60,
               expect_crash: bool = False) -> subprocess.CompletedProcess:
    """Runs ``code`` in a child; ``expect_crash`` keeps a deliberate crash from writing a core file."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env or child_env(),
                          capture_output=True, text=True, timeout=timeout,
                          preexec_fn=_no_core_dump if expect_crash else None)


def run_json(code: str, **env: str):
    """Runs ``code`` (which prints one JSON document) in a child with ``env``; returns the document."""
    proc = run_python(code, child_env(**env))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)
