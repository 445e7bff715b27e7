"""The alone-install check: each package installed by itself, the way a user installs it, into
an environment of its own that holds only what the package declares; then a smoke subset of
its own tests runs there (``smoke.yaml``).

Per package, from the wheels of the build in ``dist/``:

1. audit the package's wheel (``audit.py``): no path of the build machine, run paths
   relative to ``$ORIGIN``;
2. bring ``build/packaging/alone/<package>/venv`` to what a fresh environment would hold:
   ``pip install --find-links dist '<name>[test]==<version>'`` with pip's defaults (build
   isolation included; ``--no-compile`` only defers byte code to first import): the workspace
   packages it needs come from ``dist/``, ``torch==2.13.0`` from pip's configured sources, and
   only when absent (a run that finds torch replaced fails). Workspace wheels rebuilt since the
   last run are reinstalled, and every distribution outside the requirement closure of
   ``<name>[test]`` is uninstalled. The environment is kept between runs;
3. imports: each import in the package's modules names the package itself, the standard
   library or a distribution it declares (its dependencies, or an extra other than 'test'),
   unless guarded by ``except ImportError``; then every module is imported in the environment;
4. the ``run`` line and the smoke tests, from a copy of ``packages/<package>/tests`` in the
   environment's directory: only what is installed there is importable, nothing of the checkout.
"""

from __future__ import annotations

import concurrent.futures
import email.parser
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from importlib import metadata
from pathlib import Path

import yaml
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from .audit import audit
from .imports import imports
from .workspace import DIST, ROOT, Package, packages

ENVS = ROOT / "build" / "packaging" / "alone"
SMOKE = Path(__file__).with_name("smoke.yaml")
# What `python -m venv` puts into every environment.
SEEDED = {"pip", "setuptools", "wheel"}
TEST_EXTRA = "test"

# Run inside an environment: its distributions and which of them provide each top-level module.
_INVENTORY = """
import json, os, importlib.metadata as m
dists = {}
for d in m.distributions():
    path = getattr(d, "_path", None)  # the dist-info directory: a reinstall makes a new one
    dists[d.metadata["Name"]] = {"version": d.version, "requires": d.requires or [],
                                 "stamp": os.stat(path).st_mtime_ns if path else 0}
print(json.dumps({"dists": dists, "modules": m.packages_distributions()}))
"""

# Run inside an environment: imports every module of the given top-level packages.
_IMPORT_ALL = """
import importlib, pkgutil, sys, traceback
failed = []
def record(name):
    failed.append(f"{name}: {traceback.format_exc().strip().splitlines()[-1]}")
for top in sys.argv[1:]:
    try:
        module = importlib.import_module(top)
    except Exception:
        record(top)
        continue
    for info in pkgutil.walk_packages(getattr(module, "__path__", []), top + ".", onerror=record):
        if info.name.rsplit(".", 1)[-1] == "__main__":
            continue  # runs a program
        spec = info.module_finder.find_spec(info.name)
        if not info.ispkg and spec is not None and not (spec.origin or "").endswith(".py"):
            continue  # a native library or extension: the package's own imports load those
        try:
            importlib.import_module(info.name)
        except Exception:
            record(info.name)
print("\\n".join(failed))
sys.exit(1 if failed else 0)
"""


class CheckFailed(Exception):
    pass


class Environment:
    """One package's kept environment under build/packaging/alone/<directory>/."""

    def __init__(self, pkg: Package, log: list[str]):
        self.pkg = pkg
        self.home = ENVS / pkg.directory
        self.venv = self.home / "venv"
        self.python = self.venv / "bin" / "python"
        self.state_file = self.home / "state.json"
        self.log = log

    def env(self) -> dict[str, str]:
        """The process environment of a user's shell with this venv activated."""
        # Byte code is written as modules are first imported (pip installs with --no-compile:
        # compiling all of torch's files at install took a minute per environment).
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "PYTHONDONTWRITEBYTECODE")}
        # The workspace venv's programs (an activated .venv) are not the user's.
        path = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d and Path(d) != Path(sys.prefix) / "bin"]
        env.update(VIRTUAL_ENV=str(self.venv), PYTHONNOUSERSITE="1",
                   PATH=os.pathsep.join([str(self.venv / "bin"), *path]))
        return env

    def run(self, args: list[str], what: str, cwd: Path | None = None, timeout: float = 900) -> str:
        p = subprocess.run(args, cwd=cwd or self.home, env=self.env(), capture_output=True, text=True,
                           timeout=timeout, check=False)
        if p.returncode != 0:
            raise CheckFailed(f"{what} failed (exit {p.returncode}):\n{(p.stdout + p.stderr).strip()}")
        return p.stdout

    def pip(self, *args: str, what: str) -> str:
        return self.run([str(self.python), "-m", "pip", "--disable-pip-version-check", "-q", *args], what)

    def inventory(self) -> dict:
        return json.loads(self.run([str(self.python), "-c", _INVENTORY], "listing the environment"))

    def create_if_missing(self) -> None:
        if self.python.exists() and subprocess.run([str(self.python), "-c", ""], env=self.env(), check=False).returncode == 0:
            return
        shutil.rmtree(self.home, ignore_errors=True)
        self.home.mkdir(parents=True)
        subprocess.run([sys.executable, "-m", "venv", str(self.venv)], check=True)
        self.log.append(f"created {self.venv.relative_to(ROOT)}")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _applies(req: Requirement, extras: set[str]) -> bool:
    """Whether a requirement holds here when the given extras ("" for none) are asked for."""
    return req.marker is None or any(req.marker.evaluate(dict(default_environment(), extra=e)) for e in extras)


def closure(root: Requirement, dists: dict[str, dict]) -> set[str]:
    """Canonical names of the distributions ``root`` needs, as installed in ``dists``."""
    installed = {canonicalize_name(name): info for name, info in dists.items()}
    needed: dict[str, set[str]] = {}
    todo = [(root, frozenset(root.extras))]
    while todo:
        req, extras = todo.pop()
        key = canonicalize_name(req.name)
        if key in needed and extras <= needed[key]:
            continue
        needed.setdefault(key, set()).update(extras)
        info = installed.get(key)
        if info is None:
            continue
        for text in info["requires"]:
            sub = Requirement(text)
            if _applies(sub, {""} | needed[key]):
                todo.append((sub, frozenset(sub.extras)))
    return set(needed)


def _declared(metadata_text: str) -> set[str]:
    """Distributions a wheel's modules may import: its Requires-Dist, those of the 'test' extra
    (for the tests only) excepted."""
    fields = email.parser.HeaderParser().parsestr(metadata_text)
    extras = {""} | {e for e in fields.get_all("Provides-Extra", []) if e != TEST_EXTRA}
    reqs = [Requirement(text) for text in fields.get_all("Requires-Dist", [])]
    return {canonicalize_name(r.name) for r in reqs if _applies(r, extras)}


def import_problems(wheel: Path, modules: dict[str, list[str]]) -> tuple[list[str], list[str]]:
    """(problems, top-level packages) of the wheel's Python files against what its metadata
    declares; ``modules`` maps top-level modules to the distributions installed with it."""
    with zipfile.ZipFile(wheel) as z:
        sources = {n: z.read(n).decode() for n in z.namelist() if n.endswith(".py") and ".dist-info/" not in n}
        metadata_text = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    name = email.parser.HeaderParser().parsestr(metadata_text)["Name"]
    declared = _declared(metadata_text)
    own = {path.split("/")[0] for path in sources}
    build_env_modules = metadata.packages_distributions()
    problems = []
    for file, text in sorted(sources.items()):
        for imp in imports(text, file):
            if imp.guarded or imp.module in own or imp.module in sys.stdlib_module_names:
                continue
            installed = modules.get(imp.module)
            # Distributions of an extra are not installed: the build environment's map, else the name.
            providers = {canonicalize_name(d) for d in installed or build_env_modules.get(imp.module) or [imp.module]}
            if providers & declared:
                continue
            where = f"{file}:{imp.line} imports {imp.module} (distribution {', '.join(sorted(providers))})"
            if installed:
                problems.append(f"{where}, which {name} does not declare: the environment has it only "
                                "through other requirements")
            else:
                problems.append(f"{where}, which {name} does not declare and its requirements do not install")
    return problems, sorted(top for top in own if f"{top}/__init__.py" in sources)


def check(pkg: Package, smoke: dict, dist: Path, log: list[str]) -> None:
    """Runs the check for one package, adding what it did to ``log``; raises CheckFailed."""
    wheel = pkg.wheel(dist)
    if wheel is None:
        raise CheckFailed(f"no wheel {pkg.file_stem}-*.whl in {dist}: run 'make wheels'")
    found = audit(wheel)
    if found:
        raise CheckFailed("the wheel is tied to the build machine:\n" + "\n".join(found))

    env = Environment(pkg, log)
    env.create_if_missing()
    before = env.inventory()["dists"]
    root = Requirement(f"{pkg.name}[{TEST_EXTRA}]=={pkg.version}")
    install = ["install", "--no-compile", "--find-links", str(dist), str(root)]
    env.pip(*install, what=f"pip install --find-links {dist.name} '{root}'")

    # Workspace wheels rebuilt since the last run (same version, new contents), then what
    # their new metadata requires; pip has just installed the others from dist/.
    state = json.loads(env.state_file.read_text()) if env.state_file.exists() else {}
    workspace = {p.key: p for p in packages()}
    changed = []
    for name, info in env.inventory()["dists"].items():
        key = canonicalize_name(name)
        dep_wheel = workspace[key].wheel(dist) if key in workspace else None
        if dep_wheel is None or state.get(key) == (digest := _sha256(dep_wheel)):
            continue
        if before.get(name) == info:
            env.pip("install", "--no-compile", "--no-deps", "--force-reinstall", str(dep_wheel),
                    what=f"reinstalling {dep_wheel.name}")
            changed.append(dep_wheel.name)
        state[key] = digest
    env.state_file.write_text(json.dumps(state, indent=1))
    if changed:
        env.pip(*install, what=f"pip install --find-links {dist.name} '{root}' after reinstalling {', '.join(changed)}")
        log.append(f"reinstalled {', '.join(changed)} (rebuilt since the last run)")

    after = env.inventory()["dists"]
    torch_before, torch_after = before.get("torch"), after.get("torch")
    if torch_before and torch_before != torch_after:
        raise CheckFailed(f"pip replaced the environment's torch {torch_before['version']} "
                          f"by {torch_after['version'] if torch_after else 'nothing'}")
    if torch_after and not torch_before:
        log.append(f"installed torch {torch_after['version']} (the environment had none)")

    # Nothing the requirements do not bring: what a fresh environment would hold.
    needed = closure(root, after) | SEEDED
    extra = sorted(name for name in after if canonicalize_name(name) not in needed)
    if extra:
        env.pip("uninstall", "--yes", *extra, what="removing what the package does not need")
        log.append(f"removed {', '.join(extra)} (not required by {root})")
    inventory = env.inventory()

    problems, tops = import_problems(wheel, inventory["modules"])
    if problems:
        raise CheckFailed("undeclared imports:\n" + "\n".join(problems))
    env.run([str(env.python), "-c", _IMPORT_ALL, *tops], f"importing every module of {', '.join(tops)}")

    if smoke.get("run"):
        out = env.run([str(env.python), "-c", smoke["run"]], f"python -c '{smoke['run']}'")
        log.append(f"python -c '{smoke['run']}': {out.strip().splitlines()[-1] if out.strip() else 'ok'}")
    tests = env.home / "tests"
    shutil.rmtree(tests, ignore_errors=True)
    shutil.copytree(pkg.path / "tests", tests, ignore=shutil.ignore_patterns("__pycache__", "cpp"))
    out = env.run([str(env.python), "-m", "pytest", "-q", "-p", "no:cacheprovider", *smoke["tests"]],
                  f"the smoke tests ({' '.join(smoke['tests'])})", cwd=tests)
    log.append(f"smoke tests: {out.strip().splitlines()[-1]}")


def main(directories: list[str], jobs: int, dist: Path = DIST) -> int:
    smoke = yaml.safe_load(SMOKE.read_text())
    selected = [p for p in packages() if not directories or p.directory in directories]
    unknown = set(directories) - {p.directory for p in selected}
    missing = [p.directory for p in selected if p.directory not in smoke]
    if unknown or missing:
        raise SystemExit(f"alone: unknown packages {sorted(unknown)}" if unknown
                         else f"alone: no smoke entry in {SMOKE.name} for {missing}")
    failed = 0

    def one(pkg: Package) -> tuple[Package, float, list[str], str | None]:
        start, log, error = time.monotonic(), [], None
        try:
            check(pkg, smoke[pkg.directory], dist, log)
        except (CheckFailed, subprocess.TimeoutExpired) as e:
            error = str(e)
        return pkg, time.monotonic() - start, log, error

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for pkg, seconds, log, error in pool.map(one, selected):
            print(f"== alone: {pkg.name} {pkg.version} ({seconds:.0f} s)")
            for line in log:
                print(f"   {line}")
            if error:
                failed += 1
                print(f"   FAILED: {error}")
    return 1 if failed else 0
