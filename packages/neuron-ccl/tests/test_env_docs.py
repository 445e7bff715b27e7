"""The environment registry (src/ccl/env.cpp) is the one source for the README's table and for
every variable the library reads."""
import pathlib
import re
import subprocess
import sys

import neuron_ccl
from neuron_ccl import env_table
from neuron_sim import docgen

PKG = pathlib.Path(__file__).resolve().parents[1]


def test_readme_table_matches_registry():
    readme = PKG / "README.md"
    assert docgen.extract(readme.read_text(), "env-table", str(readme)) == env_table.markdown(), (
        f"{readme} is out of date; run python -m neuron_ccl.env_table --write {readme}")


def test_every_variable_read_in_the_sources_is_registered():
    names = {v[0] for v in neuron_ccl.env_vars()}
    read = set()
    for path in (PKG / "src").rglob("*.[ch]*"):
        read |= set(re.findall(r'env_(?:int|string|bool|bytes)\(\s*"([A-Z0-9_]+)"', path.read_text()))
        read |= set(re.findall(r'getenv\(\s*"([A-Z0-9_]+)"', path.read_text()))
    assert read, "no environment reads found: the scan is broken"
    assert read <= names, f"unregistered variables: {sorted(read - names)}"


def test_check_command_fails_on_a_stale_copy(tmp_path):
    stale = tmp_path / "README.md"
    stale.write_text("<!-- env-table:begin -->\n| old |\n<!-- env-table:end -->\n")
    cmd = [sys.executable, "-m", "neuron_ccl.env_table"]
    assert subprocess.run(cmd + ["--check", str(stale)], capture_output=True, timeout=60).returncode == 1
    assert subprocess.run(cmd + ["--write", str(stale)], capture_output=True, timeout=60).returncode == 0
    assert subprocess.run(cmd + ["--check", str(stale)], capture_output=True, timeout=60).returncode == 0
