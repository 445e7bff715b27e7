"""The version checks of ``python -m tools.packaging versions --check``, on a small workspace
in a git repository of its own."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tools.packaging import versions


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=root,
                   check=True, capture_output=True)


def _package(root: Path, name: str, version: str, deps: list[str]) -> Path:
    path = root / "packages" / name
    (path / name.replace("-", "_")).mkdir(parents=True)
    (path / "tests").mkdir()
    (path / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n\n'
        f'[project]\nname = "{name}"\nversion = "{version}"\ndependencies = {deps!r}\n'.replace("'", '"'))
    (path / "CHANGELOG.md").write_text(f"# Changelog\n\n## {version}\n\n- First release.\n")
    (path / name.replace("-", "_") / "__init__.py").write_text('"""A package."""\n')
    (path / "tests" / "test_it.py").write_text("def test_it():\n    pass\n")
    return path


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    """packages/base 0.1.0 and packages/user 0.1.0 requiring base==0.1.0, committed on main,
    with a branch 'work' checked out."""
    monkeypatch.setenv("CHANGELOG_BASE", "main")
    _package(tmp_path, "base", "0.1.0", ["numpy"])
    _package(tmp_path, "user", "0.1.0", ["base==0.1.0"])
    _git(tmp_path, "init", "-q", "-b", "main")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "first")
    _git(tmp_path, "checkout", "-q", "-b", "work")
    return tmp_path


def _set_version(root: Path, name: str, old: str, new: str, changelog: bool = True) -> None:
    pyproject = root / "packages" / name / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(f'version = "{old}"', f'version = "{new}"'))
    if changelog:
        log = root / "packages" / name / "CHANGELOG.md"
        log.write_text(log.read_text().replace("# Changelog\n", f"# Changelog\n\n## {new}\n\n- A change.\n"))


def test_a_consistent_workspace_has_no_problems(workspace):
    assert versions.problems(workspace) == []
    rows = versions.table(workspace)
    assert [(r[0], r[2], r[3]) for r in rows] == [("base", "0.1.0", "0.1.0"), ("user", "0.1.0", "0.1.0")]


def test_changelog_top_entry_must_be_the_version(workspace):
    _set_version(workspace, "user", "0.1.0", "0.2.0", changelog=False)
    found = versions.problems(workspace)
    assert any("user: CHANGELOG.md's top entry is '## 0.1.0', pyproject.toml's version is 0.2.0" in p for p in found)


def test_a_pin_that_excludes_the_workspace_version_is_reported(workspace):
    _set_version(workspace, "base", "0.1.0", "0.2.0")
    found = versions.problems(workspace)
    assert any("user: dependencies 'base==0.1.0' excludes base 0.2.0" in p for p in found), found


def test_a_second_copy_of_the_version_is_reported(workspace):
    (workspace / "packages" / "base" / "base" / "__init__.py").write_text('__version__ = "0.1.0"\n')
    (workspace / "packages" / "base" / "CMakeLists.txt").write_text("project(base VERSION 0.1.0 LANGUAGES CXX)\n")
    (workspace / "packages" / "base" / "CHANGELOG.md").write_text("# Changelog\n\n## 0.1.0\n\n- Two copies.\n")
    found = versions.problems(workspace)
    assert sum("writes the version a second time" in p for p in found) == 2, found


def test_a_source_change_needs_a_changelog_entry(workspace):
    module = workspace / "packages" / "base" / "base" / "__init__.py"
    module.write_text('"""A changed package."""\n')
    found = versions.problems(workspace)
    assert len(found) == 1 and "base: sources changed since" in found[0] and "base/base/__init__.py" in found[0]

    # Committed on the branch it is still a change against main; an entry under the top heading settles it.
    _git(workspace, "commit", "-q", "-am", "change")
    assert len(versions.problems(workspace)) == 1
    log = workspace / "packages" / "base" / "CHANGELOG.md"
    log.write_text(log.read_text() + "- The docstring says what changed.\n")
    assert versions.problems(workspace) == []


def test_tests_and_docs_are_not_sources(workspace):
    (workspace / "packages" / "base" / "tests" / "test_it.py").write_text("def test_other():\n    pass\n")
    (workspace / "packages" / "base" / "README.md").write_text("# base\n")
    assert versions.problems(workspace) == []


def test_on_the_base_branch_only_uncommitted_changes_count(workspace):
    _git(workspace, "checkout", "-q", "main")
    module = workspace / "packages" / "user" / "user" / "new.py"
    module.write_text("X = 1\n")
    assert any(p.startswith("user: sources changed") for p in versions.problems(workspace))
    _git(workspace, "add", ".")
    _git(workspace, "commit", "-q", "-m", "change on main")
    assert versions.problems(workspace) == []


def test_changelog_top():
    assert versions.changelog_top("# Changelog\n\nIntro.\n\n## 1.2.0 (2026-12-01)\n\n- a\n\n## 1.1.0\n\n- b\n") == (
        "1.2.0", "## 1.2.0 (2026-12-01)\n\n- a")
    assert versions.changelog_top("# Changelog\n") == (None, "")
