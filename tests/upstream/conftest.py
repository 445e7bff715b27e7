"""Pytest glue for the upstream-style suites.

The suites are large; a plain ``pytest tests`` collects only the registration-order test.
``python -m tools.upstream.run`` sets NEURON_UPSTREAM=1 to collect them. Here each test gets
its expectation (skip / strict xfail) from the suite's YAML file, its metadata for the
dashboard, and after each failure a device-health probe that stops the run if the device
computes wrong results on a known case.
"""

import importlib
import os
import pathlib

import pytest
import torch

HERE = pathlib.Path(__file__).resolve().parent
SUITE_FILES = ("test_ops.py", "test_gradients.py", "test_modules.py", "test_optim.py")

if os.environ.get("NEURON_UPSTREAM") != "1":
    collect_ignore = list(SUITE_FILES)


def _describe(item):
    module = getattr(item, "module", None)
    suite = getattr(module, "SUITE", None)
    describe = getattr(module, "describe", None)
    if suite is None or describe is None:
        return None, None
    return suite, describe(item.name)


def pytest_collection_modifyitems(config, items):
    for item in items:
        suite, info = _describe(item)
        if info is None:
            continue
        expect = item.module.EXPECT.lookup(info["test"], info["subject"], info["dtype"])
        props = dict(suite=suite, **info)
        if expect is not None:
            props.update(mode=expect.mode, category=expect.category, reason=expect.reason)
            label = f"[{expect.category}] {expect.reason}"
            if expect.mode == "skip":
                item.add_marker(pytest.mark.skip(reason=label))
            else:
                item.add_marker(pytest.mark.xfail(reason=label, strict=True))
        item.user_properties.append(("upstream", props))


def _probe():
    """A known computation on every neuron device: elementwise, reduction, matmul, copies."""
    a = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    expected = ((a @ a.T) * 2 + 1).sum(dim=0)
    for index in range(torch.neuron.device_count()):
        d = a.to(f"neuron:{index}")
        got = ((d @ d.T) * 2 + 1).sum(dim=0).cpu()
        if not torch.equal(got, expected):
            return f"neuron:{index} computed {got.tolist()} for a known case, expected {expected.tolist()}"
    return None


# Outermost wrapper: it sees the report after pytest's unittest and xfail handling.
@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed or hasattr(report, "wasxfail"):
        return
    if str(report.longrepr).startswith("Unexpected success") and not item.get_closest_marker("xfail"):
        # An upstream OpInfo xfail (written for CUDA against CPU) that neuron passes: the
        # neuron result matched CPU, which is what these suites check.
        report.outcome = "passed"
        report.longrepr = None
        report.user_properties.append(("upstream_xfail_passed", True))
        return
    try:
        problem = _probe()
    except Exception as exc:  # noqa: BLE001 - any failure of the probe means the device is unusable
        problem = f"device-health probe raised {type(exc).__name__}: {exc}"
    if problem:
        marker = os.environ.get("NEURON_UPSTREAM_HEALTH_FILE")
        if marker:
            pathlib.Path(marker).write_text(f"after {item.nodeid}: {problem}\n")
        pytest.exit(f"device unhealthy after {item.nodeid}: {problem}", returncode=3)
