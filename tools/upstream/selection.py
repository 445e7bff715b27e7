"""Pytest plugin for upstream test files: run only a chosen set of tests, and note each start.

Loaded with ``-p tools.upstream.selection`` next to ``tools.upstream.plugin`` (which records
outcomes). ``NEURON_UPSTREAM_SELECT`` names a file of device-independent test ids, one a line
(``Class.test_name_DEV_dtype``, see :func:`test_id`); every other test is deselected. Without
it, the tests of classes not instantiated per device are deselected (they never touch the
device under test), and ``NEURON_UPSTREAM_DEVICE_INDEPENDENT`` names a file that gets their
node ids.
``NEURON_UPSTREAM_TIMEOUTS`` names a JSON file of {test id: seconds}: those tests get a
``timeout`` mark of their own (longer than the run's ``--timeout``).
``NEURON_UPSTREAM_STARTED`` names a file that gets each test's node id when it starts, so a run
that dies mid-test (a crash, or the file's time budget) tells which test it was in.
"""

from __future__ import annotations

import os
import re

_DEVICE_PART = re.compile(r"_(cpu|neuron|privateuse1)(?=_|$)")
_CLASS_PART = re.compile(r"(CPU|PRIVATEUSE1|NEURON)$")


def test_id(nodeid: str) -> str:
    """A device-independent id: ``f.py::TestFooCPU::test_x_cpu_float32`` -> ``TestFoo.test_x_DEV_float32``."""
    parts = nodeid.split("::")
    name = parts[-1]
    cls = parts[-2] if len(parts) > 2 else ""
    return f"{_CLASS_PART.sub('', cls)}.{_DEVICE_PART.sub('_DEV', name, count=1)}"


def is_device_generic(nodeid: str) -> bool:
    """Whether the test belongs to a class instantiated per device (instantiate_device_type_tests)."""
    parts = nodeid.split("::")
    return len(parts) > 2 and _CLASS_PART.search(parts[-2]) is not None


def pytest_collection_modifyitems(config, items):
    path = os.environ.get("NEURON_UPSTREAM_SELECT")
    keep, drop = [], []
    if path:
        with open(path) as fh:
            wanted = {line.strip() for line in fh if line.strip()}
        for item in items:
            (keep if test_id(item.nodeid) in wanted else drop).append(item)
    else:
        for item in items:
            (keep if is_device_generic(item.nodeid) else drop).append(item)
        listing = os.environ.get("NEURON_UPSTREAM_DEVICE_INDEPENDENT")
        # Under xdist every worker collects and appends; the reader counts distinct node ids.
        if listing and drop:
            with open(listing, "a") as fh:
                fh.write("".join(item.nodeid + "\n" for item in drop))
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
    longer = os.environ.get("NEURON_UPSTREAM_TIMEOUTS")
    if longer:
        import json

        import pytest
        with open(longer) as fh:
            seconds = json.load(fh)
        for item in items:
            s = seconds.get(test_id(item.nodeid))
            if s:
                item.add_marker(pytest.mark.timeout(s))


def pytest_runtest_logstart(nodeid, location):
    path = os.environ.get("NEURON_UPSTREAM_STARTED")
    if path:
        with open(path, "a") as fh:
            fh.write(nodeid + "\n")
