"""The committed documents carry the tables the runtime's registry and profiles generate."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import pytest

import neuron_sim as ns
from neuron_sim import docgen, env, profile_table
from nsim_child import child_env

PACKAGE = pathlib.Path(__file__).resolve().parents[1]
README = PACKAGE / "README.md"
ENV_DOC = PACKAGE / "docs" / "environment.md"


@pytest.mark.parametrize("path", [README, ENV_DOC], ids=lambda p: p.name)
def test_env_table_matches_registry(path):
    block = docgen.extract(path.read_text(), "env-table", str(path))
    assert block == env.markdown(), (
        f"{path} is out of date; run python -m neuron_sim.env_table --write {path}")
    for var in ns.env_registry():
        assert f"`{var.name}`" in block


def test_profile_table_matches_profiles():
    block = docgen.extract(README.read_text(), "profile-table", str(README))
    assert block == profile_table.markdown(), (
        f"{README} is out of date; run python -m neuron_sim.profile_table --write {README}")


def test_registry_lists_the_documented_variables():
    names = [v.name for v in ns.env_registry()]
    assert names == ["NEURON_SIM_PROFILE", "NEURON_SIM_NUM_CHIPS", "NEURON_LOGICAL_NC_CONFIG",
                     "NEURON_RT_VISIBLE_CORES", "NEURON_SIM_HBM_CAPACITY", "NEURON_SIM_TIMELINE",
                     "NEURON_SIM_TIMELINE_CAPACITY", "NEURON_SIM_FAULT_ALLOC",
                     "NEURON_SIM_FAULT_KERNEL", "NEURON_SIM_FAULT_DEVICE_LOST"]
    types = {v.name: v.type for v in ns.env_registry()}
    assert types["NEURON_RT_VISIBLE_CORES"] == "core_list" and types["NEURON_SIM_HBM_CAPACITY"] == "bytes"
    assert all(v.meaning and v.default for v in ns.env_registry())


def test_generator_check_and_write(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text("intro\n<!-- env-table:begin -->\n| stale |\n<!-- env-table:end -->\ntail\n")
    cmd = [sys.executable, "-m", "neuron_sim.env_table"]
    stale = subprocess.run(cmd + ["--check", str(doc)], capture_output=True, text=True, env=child_env())
    assert stale.returncode == 1 and "out of date" in stale.stdout
    subprocess.run(cmd + ["--write", str(doc)], check=True, env=child_env())
    text = doc.read_text()
    assert text.startswith("intro\n") and text.endswith("<!-- env-table:end -->\ntail\n")
    assert docgen.extract(text, "env-table") == env.markdown()
    fresh = subprocess.run(cmd + ["--check", str(doc)], capture_output=True, text=True, env=child_env())
    assert fresh.returncode == 0, fresh.stdout + fresh.stderr
    printed = subprocess.run(cmd + ["--markdown"], capture_output=True, text=True, env=child_env())
    assert printed.stdout == env.markdown() and printed.stderr == ""


def test_missing_markers_are_reported(tmp_path):
    with pytest.raises(ValueError, match="env-table:begin"):
        docgen.extract("no markers here", "env-table", "x.md")


def _fenced_blocks(text: str, lang: str) -> list[str]:
    """Bodies of the Markdown code blocks opened with ```lang."""
    blocks = re.findall(r"^```(\w*)\n(.*?)^```$", text, re.S | re.M)
    return [body for block_lang, body in blocks if block_lang == lang]


def test_readme_python_example_runs(tmp_path):
    example = _fenced_blocks(README.read_text(), "python")[0]
    proc = subprocess.run([sys.executable, "-c", example], cwd=tmp_path, capture_output=True, text=True,
                          env=child_env(), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "trace.json").is_file()


def test_readme_neuron_ls_example_is_real_output():
    block = next(b for b in _fenced_blocks(README.read_text(), "") if b.startswith("$ NEURON_RT_VISIBLE_CORES=1,3"))
    shown = block.split("\n", 1)[1]
    exe = pathlib.Path(sys.executable).parent / "neuron-ls"
    real = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60,
                          env=child_env(NEURON_RT_VISIBLE_CORES="1,3")).stdout
    assert shown == real
