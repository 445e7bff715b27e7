"""Pytest plugin that writes one JSON line per test outcome to $NEURON_UPSTREAM_RESULTS.

Loaded with ``-p tools.upstream.plugin``; under xdist it runs on the controller, which sees
every worker's reports (metadata travels in ``report.user_properties``).
"""

import json
import os


def _first_error_line(report):
    text = getattr(report, "longreprtext", "") or ""
    lines = [ln.strip() for ln in text.splitlines()]
    # pytest marks the raising line with "E   "; the first such line is the error itself.
    for ln in lines:
        if ln.startswith("E ") and ln[1:].strip():
            return ln[1:].strip()[:300]
    for ln in reversed(lines):
        if ln:
            return ln[:300]
    return ""


def _outcome(report):
    if hasattr(report, "wasxfail"):
        return "xfailed" if report.skipped else "stale"
    if report.failed and report.when == "call" and "XPASS(strict)" in (report.longreprtext or ""):
        return "stale"
    if report.failed:
        return "failed" if report.when == "call" else "error"
    if report.skipped:
        return "skipped"
    return "passed"


class _Recorder:
    def __init__(self, path):
        self.path = path
        self.fh = open(path, "a", buffering=1)

    def pytest_runtest_logreport(self, report):
        # One record per test: the call phase, or setup when it did not pass (skip / error).
        if report.when == "call" or (report.when == "setup" and not report.passed) or (
            report.when == "teardown" and report.failed
        ):
            props = dict(report.user_properties).get("upstream", {})
            rec = {
                "nodeid": report.nodeid,
                "outcome": _outcome(report),
                "duration": round(report.duration, 3),
                **props,
            }
            if rec["outcome"] in ("failed", "error", "stale"):
                rec["error"] = _first_error_line(report)
            elif rec["outcome"] == "skipped" and isinstance(report.longrepr, tuple):
                rec["error"] = str(report.longrepr[2])[:300]
            self.fh.write(json.dumps(rec) + "\n")


def pytest_configure(config):
    path = os.environ.get("NEURON_UPSTREAM_RESULTS")
    if path and not hasattr(config, "workerinput"):
        config.pluginmanager.register(_Recorder(path), "neuron-upstream-recorder")
