"""The rules of the alone-install check (``python -m tools.packaging alone``) on small inputs:
undeclared imports, the requirement closure that decides what an environment may hold, and
the wheel audit."""
from __future__ import annotations

import shutil
import subprocess
import textwrap
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tools.packaging import alone, audit, imports
from tools.packaging.workspace import ROOT


def test_imports_marks_guarded_and_type_checking_imports():
    found = imports.imports(textwrap.dedent("""
        import numpy.linalg
        from yaml import safe_load
        from . import sibling
        try:
            import matplotlib
        except ImportError:
            matplotlib = None
        try:
            import scipy
        except ValueError:
            pass
        if TYPE_CHECKING:
            import torch
        def f():
            import ml_dtypes
    """), "m.py")
    assert [(i.module, i.guarded) for i in found] == [
        ("numpy", False), ("yaml", False), ("matplotlib", True), ("scipy", False), ("torch", True), ("ml_dtypes", False)]


def _wheel(tmp_path: Path, files: dict[str, str]) -> Path:
    """demo 1.0: requires numpy, extras 'plots' (matplotlib) and 'test' (pytest)."""
    wheel = tmp_path / "demo-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
        z.writestr("demo-1.0.dist-info/METADATA", textwrap.dedent("""\
            Metadata-Version: 2.1
            Name: demo
            Version: 1.0
            Requires-Dist: numpy>=1
            Provides-Extra: plots
            Requires-Dist: matplotlib; extra == "plots"
            Provides-Extra: test
            Requires-Dist: pytest; extra == "test"
            Requires-Dist: tomli; python_version < "3.0"
            """))
    return wheel


def test_undeclared_and_transitive_imports_are_problems(tmp_path):
    wheel = _wheel(tmp_path, {
        "demo/__init__.py": "import os\nimport numpy\nfrom demo import core\n",
        "demo/core.py": "import yaml\nimport ml_dtypes\n",
        "demo/plots.py": "def draw():\n    import matplotlib\n",
        "demo/testing.py": "import pytest\n",
        "demo/compat.py": "import tomli\n",
    })
    # What the environment holds: ml_dtypes through another requirement, pytest for the tests.
    modules = {"numpy": ["numpy"], "ml_dtypes": ["ml_dtypes"], "pytest": ["pytest"]}
    problems, tops = alone.import_problems(wheel, modules)
    assert tops == ["demo"]
    text = "\n".join(problems)
    assert "demo/core.py:1 imports yaml (distribution pyyaml), which demo does not declare and its " \
           "requirements do not install" in text
    assert "demo/core.py:2 imports ml_dtypes (distribution ml-dtypes), which demo does not declare: the " \
           "environment has it only through other requirements" in text
    assert "demo/testing.py:1 imports pytest (distribution pytest)" in text  # the 'test' extra is for the tests
    assert "demo/compat.py:1 imports tomli" in text  # its requirement's marker is false here
    assert "matplotlib" not in text and "numpy" not in text and "os" not in text
    assert len(problems) == 4


def test_closure_follows_extras_and_markers():
    dists = {
        "demo": {"requires": ["numpy>=1", 'pytest; extra == "test"', 'matplotlib; extra == "plots"',
                              'tomli; python_version < "3.0"']},
        "numpy": {"requires": []},
        "pytest": {"requires": ["pluggy", "iniconfig"]},
        "pluggy": {"requires": []},
        "iniconfig": {"requires": []},
        "matplotlib": {"requires": ["pillow"]},
        "pillow": {"requires": []},
        "leftover": {"requires": []},
    }
    assert alone.closure(Requirement("demo[test]"), dists) == {"demo", "numpy", "pytest", "pluggy", "iniconfig"}
    assert alone.closure(Requirement("demo"), dists) == {"demo", "numpy"}


def test_audit_finds_build_machine_paths(tmp_path):
    wheel = tmp_path / "demo-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("demo/__init__.py", "X = 1\n")
        z.writestr("demo/paths.py", f"SOURCE = {str(ROOT / 'packages' / 'demo')!r}\n")
    found = audit.audit(wheel)
    assert len(found) == 1 and "demo/paths.py contains the build machine's path" in found[0]


@pytest.mark.skipif(not (shutil.which("cc") and shutil.which("readelf")), reason="needs cc and readelf")
def test_audit_requires_run_paths_relative_to_origin(tmp_path):
    src = tmp_path / "x.c"
    src.write_text("int x(void) { return 1; }\n")
    for name, rpath in (("good", "$ORIGIN:$ORIGIN/../lib"), ("bad", "/opt/somewhere")):
        subprocess.run(["cc", "-shared", "-fPIC", "-o", str(tmp_path / f"lib{name}.so"), str(src),
                        f"-Wl,-rpath,{rpath}"], check=True)
    wheel = tmp_path / "demo-1.0-cp311-cp311-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.write(tmp_path / "libgood.so", "demo/libgood.so")
        z.write(tmp_path / "libbad.so", "demo/libbad.so")
    found = audit.audit(wheel)
    assert len(found) == 1 and "demo/libbad.so has the run path '/opt/somewhere'" in found[0], found
