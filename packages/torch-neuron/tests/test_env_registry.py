"""The environment-variable registry is the one source for the docs and the code."""
import pathlib
import re

from torch_neuron import env

PKG = pathlib.Path(__file__).resolve().parents[1]


def test_readme_table_matches_registry():
    text = (PKG / "README.md").read_text()
    block = text.split("<!-- env-table:begin -->")[1].split("<!-- env-table:end -->")[0].strip()
    assert block == env.markdown_table()


def test_every_variable_read_in_the_sources_is_registered():
    names = {v.name for v in env.REGISTRY}
    read = set()
    for path in list((PKG / "python").rglob("*.py")) + list((PKG / "csrc").rglob("*.[ch]*")):
        src = path.read_text()
        read |= set(re.findall(r'environ(?:\.get)?\(\s*"([A-Z0-9_]+)"', src))
        read |= set(re.findall(r'environ\[\s*"([A-Z0-9_]+)"\s*\]', src))
        read |= set(re.findall(r'getenv\(\s*"([A-Z0-9_]+)"', src))
        read |= set(re.findall(r'get_(?:bool|choice)\(\s*"([A-Z0-9_]+)"', src))
    assert read, "no environment reads found: the scan is broken"
    assert read <= names, f"unregistered variables: {sorted(read - names)}"


def test_invalid_boolean_is_reported_with_the_variable(monkeypatch):
    monkeypatch.setenv("TORCH_NEURON_STRICT", "maybe")
    try:
        env.get_bool("TORCH_NEURON_STRICT")
    except ValueError as e:
        assert "TORCH_NEURON_STRICT" in str(e) and "0 or 1" in str(e)
    else:
        raise AssertionError("an invalid boolean must raise")
