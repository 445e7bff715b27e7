"""Which installed distribution owns the ``torch_neuronx`` directory.

AWS's ``torch-neuronx`` and this ``torch-neuronx-api`` both ship the top-level package
``torch_neuronx``; pip lets the second install overwrite the first one's files, leaving a
mix of both. This module uses only the standard library so that the workspace's install
step can run it as a script before installing (``python ownership.py``, exit status 1 and
a message when AWS's distribution is present), and ``torch_neuronx`` runs it on import.
"""
from __future__ import annotations

import json
import sys
from importlib import metadata
from pathlib import Path

DISTRIBUTION = "torch-neuronx-api"
AWS_DISTRIBUTION = "torch-neuronx"
# The Make variable that leaves this distribution out of `make install`.
SKIP_VARIABLE = "TORCH_NEURONX_API=0"


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def aws_conflict_message(aws_version: str) -> str:
    return (
        f"AWS's '{AWS_DISTRIBUTION}' {aws_version} is installed in this environment ({sys.prefix}). "
        f"It and '{DISTRIBUTION}' (TorchNeuron's Python API for torch-neuron-backend) both provide the "
        "package 'torch_neuronx' and would overwrite each other's files. Choose one: "
        f"'{sys.executable} -m pip uninstall {AWS_DISTRIBUTION}' to use torch-neuron-backend's "
        f"'torch_neuronx' (then reinstall {DISTRIBUTION}), or keep AWS's and skip ours with "
        f"'make install {SKIP_VARIABLE}' ('pip uninstall {DISTRIBUTION}' if it is already installed)."
    )


def _editable_root(dist: metadata.Distribution) -> Path | None:
    """The source directory of an editable (``pip install -e``) install, else None."""
    text = dist.read_text("direct_url.json")
    if not text:
        return None
    info = json.loads(text)
    if not info.get("dir_info", {}).get("editable"):
        return None
    url = info.get("url", "")
    return Path(url[len("file://"):]).resolve() if url.startswith("file://") else None


def owner_problem(package_init: str) -> str | None:
    """Why the ``torch_neuronx/__init__.py`` at ``package_init`` is not ours; None when it is."""
    init = Path(package_init).resolve()
    aws_version = _version(AWS_DISTRIBUTION)
    if aws_version is not None:
        return aws_conflict_message(aws_version)
    try:
        ours = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return (f"'torch_neuronx' at {init.parent} does not belong to an installed '{DISTRIBUTION}' "
                f"distribution (none is installed in {sys.prefix}); install it with "
                f"'{sys.executable} -m pip install packages/torch-neuronx-api' or 'make install'.")
    recorded = {Path(ours.locate_file(f)).resolve() for f in (ours.files or ())
                if f.parts[:1] == ("torch_neuronx",) and f.name == "__init__.py"}
    if init in recorded:
        return None
    root = _editable_root(ours)
    if root is not None and init.is_relative_to(root):
        return None
    where = ", ".join(str(p.parent) for p in sorted(recorded)) or "no files"
    return (f"'torch_neuronx' imported from {init.parent} is not the copy installed by '{DISTRIBUTION}' "
            f"{ours.version} (which installed {where}); another 'torch_neuronx' shadows it on sys.path. "
            "Remove that directory from sys.path/PYTHONPATH or reinstall the distribution it came from.")


def main() -> int:
    aws_version = _version(AWS_DISTRIBUTION)
    if aws_version is not None:
        print(f"error: {aws_conflict_message(aws_version)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
