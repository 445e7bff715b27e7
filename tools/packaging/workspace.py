"""The workspace's packages as their ``pyproject.toml`` files describe them.

Each package's name, version and requirements are read from its ``pyproject.toml`` (the one
place they are written); ``packages()`` lists them in dependency order.
"""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
DIST = ROOT / "dist"


@dataclasses.dataclass(frozen=True)
class Package:
    path: Path                                    # <workspace>/packages/<directory>
    name: str                                     # distribution name
    version: str
    requires: tuple[Requirement, ...]             # [project] dependencies
    extras: dict[str, tuple[Requirement, ...]]    # [project.optional-dependencies]
    build_requires: tuple[Requirement, ...]       # [build-system] requires
    build_backend: str

    @property
    def directory(self) -> str:
        return self.path.name

    @property
    def key(self) -> str:
        return canonicalize_name(self.name)

    @property
    def file_stem(self) -> str:
        """``<name>-<version>`` as wheel and sdist file names spell it."""
        return f"{self.key.replace('-', '_')}-{self.version}"

    def wheel(self, dist: Path = DIST) -> Path | None:
        """This version's wheel in ``dist``, if built."""
        found = sorted(dist.glob(f"{self.file_stem}-*.whl"))
        return found[-1] if found else None

    def sdist(self, dist: Path = DIST) -> Path:
        return dist / f"{self.file_stem}.tar.gz"

    def all_requirements(self) -> list[tuple[str, Requirement]]:
        """(where, requirement) for every requirement the package states."""
        out = [("dependencies", r) for r in self.requires]
        out += [(f"extra '{e}'", r) for e, reqs in self.extras.items() for r in reqs]
        out += [("build-system requires", r) for r in self.build_requires]
        return out


def load(path: Path) -> Package:
    with open(path / "pyproject.toml", "rb") as f:
        data = tomllib.load(f)
    project = data["project"]
    return Package(
        path=path,
        name=project["name"],
        version=project["version"],
        requires=tuple(Requirement(r) for r in project.get("dependencies", ())),
        extras={e: tuple(Requirement(r) for r in reqs)
                for e, reqs in project.get("optional-dependencies", {}).items()},
        build_requires=tuple(Requirement(r) for r in data["build-system"]["requires"]),
        build_backend=data["build-system"]["build-backend"],
    )


def packages(root: Path = ROOT) -> tuple[Package, ...]:
    """Every package under <root>/packages/, each after the workspace packages it needs."""
    found = {p.key: p for p in (load(d) for d in sorted((root / "packages").iterdir())
                                if (d / "pyproject.toml").is_file())}
    ordered: list[Package] = []

    def visit(pkg: Package, path: tuple[str, ...]) -> None:
        if pkg in ordered:
            return
        if pkg.key in path:
            raise RuntimeError(f"dependency cycle between workspace packages: {' -> '.join(path + (pkg.key,))}")
        for dep in _workspace_dependencies(pkg, found):
            visit(dep, path + (pkg.key,))
        ordered.append(pkg)

    for pkg in found.values():
        visit(pkg, ())
    return tuple(ordered)


def _workspace_dependencies(pkg: Package, found: dict[str, Package]) -> list[Package]:
    """The packages of ``found`` that ``pkg`` needs to build or to run."""
    keys = {canonicalize_name(r.name) for r in pkg.requires + pkg.build_requires}
    return [found[k] for k in sorted(keys) if k in found]


def by_directory(directory: str) -> Package:
    for pkg in packages():
        if pkg.directory == directory:
            return pkg
    raise SystemExit(f"no package directory packages/{directory} "
                     f"(one of: {', '.join(p.directory for p in packages())})")
