"""Package versions: the list, and the checks that keep each one written once.

A package's version is the ``version`` of its ``pyproject.toml``; everything else derives it
(``__version__`` from the installed metadata, CMake from scikit-build-core or the file). The
checks:

- the CHANGELOG's top entry (``## <version>``) is that version;
- every requirement one package states on another admits the other's version;
- no ``__version__ = "..."`` or ``project(... VERSION x.y)`` writes it a second time;
- a package whose sources changed since the base commit has a new CHANGELOG entry: its top
  entry differs from the base's. The base is ``git merge-base HEAD <ref>`` with ``ref`` from
  ``$CHANGELOG_BASE``, else ``origin/main``, else ``main``; on that branch itself only the
  uncommitted changes count. Sources are the package's files outside ``tests/``, ``bench/``,
  ``docs/`` and Markdown files.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from packaging.utils import canonicalize_name

from .workspace import DIST, ROOT, Package, packages

_HEADING = re.compile(r"^## +(\S+)")
_SECOND_COPY = (("*.py", re.compile(r"^__version__\s*=\s*['\"]", re.MULTILINE)),
                ("CMakeLists.txt", re.compile(r"\bproject\s*\([^)]*\bVERSION\s+[0-9]", re.DOTALL)))
_NOT_SOURCES = ("tests/", "bench/", "docs/")


def changelog_top(text: str) -> tuple[str | None, str]:
    """(version of the first ``## `` heading, that entry's text up to the next heading)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = _HEADING.match(line)
        if m:
            end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("## ")), len(lines))
            return m.group(1), "\n".join(lines[i:end]).strip()
    return None, ""


def table(root: Path = ROOT) -> list[tuple[str, str, str, str, str]]:
    """(directory, distribution, version, CHANGELOG top entry, wheel in dist/) per package."""
    rows = []
    for pkg in packages(root):
        top, _ = changelog_top((pkg.path / "CHANGELOG.md").read_text())
        wheel = pkg.wheel(root / DIST.name)
        rows.append((pkg.directory, pkg.name, pkg.version, top or "(none)", wheel.name if wheel else "-"))
    return rows


def _git(root: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        return None
    return out.stdout if out.returncode == 0 else None


def changelog_base(root: Path = ROOT) -> tuple[str | None, str]:
    """(base commit, how it was chosen); None when there is no git history to compare with."""
    refs = [os.environ["CHANGELOG_BASE"]] if os.environ.get("CHANGELOG_BASE") else ["origin/main", "main"]
    for ref in refs:
        base = _git(root, "merge-base", "HEAD", ref)
        if base:
            return base.strip(), f"merge-base of HEAD and {ref}"
    return None, f"no merge-base of HEAD with {' or '.join(refs)}"


def _files(root: Path, pkg: Package) -> list[Path]:
    """The package's files that git does not ignore (without git: all but build trees)."""
    listed = _git(root, "ls-files", "--cached", "--others", "--exclude-standard", "--", f"packages/{pkg.directory}")
    if listed is not None:
        return [root / f for f in listed.split() if (root / f).is_file()]
    return [f for f in pkg.path.rglob("*") if f.is_file() and "build" not in f.relative_to(pkg.path).parts]


def _is_source(pkg: Package, path: str) -> bool:
    inner = path[len(f"packages/{pkg.directory}/"):]
    return not inner.startswith(_NOT_SOURCES) and not inner.endswith(".md")


def _changed_files(root: Path, base: str) -> list[str]:
    changed = (_git(root, "diff", "--name-only", base, "--", "packages") or "").split()
    changed += (_git(root, "ls-files", "--others", "--exclude-standard", "--", "packages") or "").split()
    return changed


def problems(root: Path = ROOT) -> list[str]:
    """Everything the checks find, one line each."""
    found: list[str] = []
    pkgs = packages(root)
    versions = {p.key: p for p in pkgs}
    for pkg in pkgs:
        top, _ = changelog_top((pkg.path / "CHANGELOG.md").read_text())
        if top != pkg.version:
            found.append(f"{pkg.directory}: CHANGELOG.md's top entry is '## {top}', pyproject.toml's version "
                         f"is {pkg.version}: add '## {pkg.version}' above it (or correct the version)")
        for where, req in pkg.all_requirements():
            dep = versions.get(canonicalize_name(req.name))
            if dep is not None and not req.specifier.contains(dep.version, prereleases=True):
                found.append(f"{pkg.directory}: {where} '{req}' excludes {dep.name} {dep.version}, the workspace's "
                             f"version (packages/{dep.directory}/pyproject.toml)")
        for path in _files(root, pkg):
            if any(path.match(pattern) and regex.search(path.read_text()) for pattern, regex in _SECOND_COPY):
                found.append(f"{path.relative_to(root)}: writes the version a second time; derive it "
                             "(importlib.metadata.version(...), SKBUILD_PROJECT_VERSION)")
    base, how = changelog_base(root)
    if base is None:
        return found
    changed = _changed_files(root, base)
    for pkg in pkgs:
        sources = [f for f in changed if f.startswith(f"packages/{pkg.directory}/") and _is_source(pkg, f)]
        if not sources:
            continue
        before = _git(root, "show", f"{base}:packages/{pkg.directory}/CHANGELOG.md")
        if before is None:
            continue  # a package new since the base
        now = (pkg.path / "CHANGELOG.md").read_text()
        if changelog_top(before)[1] == changelog_top(now)[1]:
            shown = ", ".join(f[len("packages/"):] for f in sources[:3]) + (" ..." if len(sources) > 3 else "")
            found.append(f"{pkg.directory}: sources changed since {base[:12]} ({how}): {shown}, but "
                         f"CHANGELOG.md's top entry did not: describe the change under '## {pkg.version}'")
    return found


def report(check: bool) -> int:
    rows = table()
    head = ("package", "distribution", "version", "CHANGELOG", "dist/")
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
    for row in [head] + rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    if not check:
        return 0
    found = problems()
    for line in found:
        print(f"versions: {line}")
    return 1 if found else 0
