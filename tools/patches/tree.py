"""Where patched files live: a PyTorch source checkout or a torch wheel's file layout."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import shutil
from pathlib import Path

from .diff import ApplyError, apply_hunks, is_applied, parse_hunks
from .series import TORCH_VERSION, Patch, SeriesError

# C++ source directories whose headers the wheel ships under torch/include/.
_HEADER_ROOTS = {"c10/": "torch/include/c10/", "aten/src/ATen/": "torch/include/ATen/", "torch/csrc/": "torch/include/torch/csrc/"}


def wheel_path(source_path: str) -> str | None:
    """Path of a source-tree file inside the wheel, or None when the wheel does not ship it."""
    if source_path.endswith(".py"):
        return source_path
    if source_path.endswith((".h", ".hpp", ".cuh")):
        for prefix, dest in _HEADER_ROOTS.items():
            if source_path.startswith(prefix):
                return dest + source_path[len(prefix) :]
    return None


def installed_torch() -> tuple[Path, importlib.metadata.Distribution]:
    """site-packages holding the running interpreter's torch, and its distribution; no import."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise SeriesError("torch is not installed in this interpreter; run with .venv/bin/python")
    dist = importlib.metadata.distribution("torch")
    if dist.version.split("+")[0] != TORCH_VERSION:
        raise SeriesError(f"the series is pinned to torch {TORCH_VERSION}, installed torch is {dist.version}")
    return Path(spec.submodule_search_locations[0]).parent, dist


def layout_of(root: Path) -> str:
    if (root / "c10" / "core").is_dir() and (root / "torch").is_dir():
        return "source"
    if (root / "torch" / "__init__.py").is_file():
        return "wheel"
    raise SeriesError(f"{root} is neither a PyTorch source checkout (c10/, torch/) nor a wheel copy (torch/__init__.py)")


def target_path(source_path: str, layout: str) -> str | None:
    return source_path if layout == "source" else wheel_path(source_path)


def patch_contents(patches: list[Patch], root: Path, layout: str, include_cpp: bool) -> dict[str, str]:
    """Apply ``patches`` in order to the files under ``root`` in memory; returns target path -> text."""
    contents: dict[str, str] = {}
    for patch in patches:
        for fp in patch.files:
            if fp.is_cpp and not include_cpp:
                continue
            target = target_path(fp.path, layout)
            if target is None:
                raise SeriesError(f"{patch.file.name}: {fp.path} is not shipped in the wheel; apply it to a source checkout")
            if target not in contents:
                file = root / target
                if not file.is_file():
                    raise SeriesError(f"{patch.file.name}: {file} does not exist")
                contents[target] = file.read_text()
            hunks = parse_hunks(fp.diff)
            try:
                contents[target] = apply_hunks(contents[target], hunks, f"{patch.file.name}: {target}")
            except ApplyError as e:
                if is_applied(contents[target], hunks):
                    raise ApplyError(f"{patch.file.name}: {target} already has this patch applied") from e
                raise
    return contents


def apply_to(patches: list[Patch], root: Path, include_cpp: bool) -> list[str]:
    layout = layout_of(root)
    contents = patch_contents(patches, root, layout, include_cpp=include_cpp or layout == "source")
    for target, text in contents.items():
        (root / target).write_text(text)
    return sorted(contents)


def copy_installed_python(dest: Path) -> Path:
    """Copy the installed torch's Python files and headers to ``dest`` (a wheel-layout tree)."""
    site, dist = installed_torch()
    for entry in dist.files or ():
        rel = str(entry)
        if rel.startswith("torch/") and (rel.endswith(".py") or rel.startswith("torch/include/")):
            out = dest / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(site / rel, out)
    return dest


