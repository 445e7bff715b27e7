"""Proof tests for the patch series in patches/.

Each test carries ``@pytest.mark.torch_patch("NNNN")`` (it must fail on vanilla
torch 2.13.0 and pass on the patched wheel) or ``@pytest.mark.torch_workaround("NNNN")``
(it must pass on both). They only run under ``python -m tools.patches matrix``, which
sets TORCH_PATCHES_PROOF=1 and TORCH_NEURON_DISABLE_WORKAROUNDS=1; a plain
``pytest tests/`` skips them, because on vanilla torch the proof tests fail by design.
"""

import contextlib
import json
import os
import sys
from pathlib import Path

import pytest

# The tooling tests import tools.patches from the repository root.
_REPO = str(Path(__file__).resolve().parents[2])
if _REPO not in sys.path:
    sys.path.insert(0, _REPO)

PROOF_ENV = "TORCH_PATCHES_PROOF"
REPORT_ENV = "TORCH_PATCHES_REPORT"
_results = []


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "torch_patch(id): proves patch <id> of patches/series (fails on vanilla torch)"
    )
    config.addinivalue_line(
        "markers", "torch_workaround(id): checks the torch_neuron workaround for patch <id>"
    )


def pytest_collection_modifyitems(config, items):
    if os.environ.get(PROOF_ENV) == "1":
        return
    skip = pytest.mark.skip(
        reason=f"patch proof tests run only under `python -m tools.patches matrix` ({PROOF_ENV}=1)"
    )
    for item in items:
        if item.get_closest_marker("torch_patch") or item.get_closest_marker("torch_workaround"):
            item.add_marker(skip)


def _patch_of(item):
    for kind in ("torch_patch", "torch_workaround"):
        marker = item.get_closest_marker(kind)
        if marker is not None:
            return kind, marker.args[0]
    return None, None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    kind, patch = _patch_of(item)
    if kind is None:
        return
    # One record per test: failures in setup/teardown count as failures.
    if report.when == "call" or (report.when == "setup" and not report.passed):
        message = ""
        if report.failed:
            crash = getattr(report.longrepr, "reprcrash", None)
            message = crash.message if crash is not None else str(report.longrepr).strip().splitlines()[-1]
        elif report.skipped and isinstance(report.longrepr, tuple):
            message = str(report.longrepr[2])
        message = " ".join(message.split())[:300]
        _results.append(
            {"nodeid": item.nodeid, "kind": kind, "patch": patch, "outcome": report.outcome, "message": message}
        )


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get(REPORT_ENV)
    if path:
        with open(path, "w") as f:
            json.dump(_results, f, indent=1)


@pytest.fixture
def neuron():
    """The neuron device; the matrix runner checks up front that the backend loads."""
    import torch

    if not (hasattr(torch, "neuron") and torch.neuron.is_available()):
        pytest.fail("device 'neuron' is not available: is torch_neuron installed in this interpreter?")
    return torch.device("neuron", 0)


@pytest.fixture
def process_group():
    """Context manager factory: a process group of this one process (HashStore)."""
    import torch.distributed as dist

    @contextlib.contextmanager
    def make(backend):
        if not dist.is_available():
            pytest.skip("torch.distributed is not available in this build")
        if backend == "neuron" and backend not in dist.Backend.backend_list:
            # The neuron c10d backend registers when torch_neuron.distributed is imported.
            with contextlib.suppress(ImportError):
                import torch_neuron.distributed  # noqa: F401
        if backend not in dist.Backend.backend_list:
            pytest.skip(f"c10d backend {backend!r} is not registered")
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
        try:
            yield
        finally:
            dist.destroy_process_group()

    return make
