"""The upstream-test tooling itself: expectation files, test-name parsing, dashboard figures,
upstream-file outcome matching. Cheap; collected by a plain ``pytest tests``."""

import json

import pytest

import upstream_common as common
from tools.upstream import dashboard, expectations, files, selection


def _all_expectation_files():
    yield from ((suite, None) for suite in ("ops", "gradients", "modules", "optim"))
    yield from ((p.stem, files.FILES_EXPECTATIONS) for p in sorted(files.FILES_EXPECTATIONS.glob("*.yaml")))


def test_expectation_files_parse_and_carry_reasons():
    for suite, directory in _all_expectation_files():
        loaded = expectations.load(suite, directory)
        for entry in loaded.entries:
            assert entry.reason and entry.category in expectations.CATEGORIES
            if entry.category in ("backend bug", "missing kernel"):
                assert entry.reproducer


@pytest.mark.parametrize(
    "raw, message",
    [
        ({"mode": "xfail", "category": "backend bug", "reason": "r"}, "reproducer"),
        ({"mode": "xfail", "category": "torch bug", "reason": "r"}, "patch id"),
        ({"mode": "xfail", "category": "tolerance"}, "reason"),
        ({"mode": "maybe", "category": "tolerance", "reason": "r"}, "mode"),
        ({"mode": "skip", "category": "flaky", "reason": "r"}, "category"),
    ],
)
def test_expectation_entries_are_validated(raw, message):
    with pytest.raises(expectations.ExpectationError, match=message):
        expectations.parse("ops", {"expectations": [raw]})


def test_lookup_matches_globs_dtypes_and_first_entry_wins():
    data = {
        "expectations": [
            {"ops": ["linalg.*"], "dtypes": ["float16"], "mode": "xfail", "category": "tolerance", "reason": "a"},
            {"ops": ["linalg.svd"], "mode": "skip", "category": "out of scope", "reason": "b"},
        ],
        "tolerances": [{"ops": ["mm"], "dtypes": ["bfloat16"], "atol": 0.1, "rtol": 0.2, "reason": "c"}],
    }
    exp = expectations.parse("ops", data)
    assert exp.lookup("test_compare_cpu", "linalg.svd", "float16").reason == "a"
    assert exp.lookup("test_compare_cpu", "linalg.svd", "float32").reason == "b"
    assert exp.lookup("test_compare_cpu", "mm", "float32") is None
    assert exp.tolerance("test_compare_cpu", "mm", "bfloat16").atol == 0.1
    assert exp.tolerance("test_compare_cpu", "mm", "float32") is None


def test_describe_splits_instantiated_test_names():
    subjects = {"nn_functional_conv2d": "nn.functional.conv2d", "add": "add", "nn_LSTM": "nn.LSTM"}
    bases = ("test_compare_cpu", "test_compare_cpu_reference", "test_forward")
    got = common.describe("test_compare_cpu_nn_functional_conv2d_neuron_bfloat16", bases, subjects)
    assert got == {"test": "test_compare_cpu", "subject": "nn.functional.conv2d", "dtype": "bfloat16", "variant": None}
    got = common.describe("test_compare_cpu_reference_add_neuron_int8", bases, subjects)
    assert (got["test"], got["subject"], got["dtype"]) == ("test_compare_cpu_reference", "add", "int8")
    got = common.describe("test_forward_nn_LSTM_train_mode_neuron_float32", bases, subjects)
    assert (got["subject"], got["variant"]) == ("nn.LSTM", "train_mode")
    assert common.describe("test_other_add_neuron_int8", bases, subjects) is None


def _records(tmp_path, rows):
    path = tmp_path / "vanilla.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return {"name": "vanilla", "python": "py", "returncode": 1, "seconds": 1.0, "results": str(path), "health": None}


def test_dashboard_counts_rates_and_stale_xfails(tmp_path):
    base = {"suite": "ops", "test": "test_compare_cpu"}
    rows = [
        dict(base, subject="add", dtype="float32", outcome="passed"),
        dict(base, subject="add", dtype="int8", outcome="passed"),
        dict(base, subject="mm", dtype="float32", outcome="failed", error="AssertionError: x"),
        dict(base, subject="mm", dtype="int8", outcome="stale", category="backend bug"),
        dict(base, subject="mm", dtype="complex32", outcome="skipped", category="out of scope"),
        dict(base, subject="mm", dtype="float16", outcome="xfailed", category="tolerance"),
    ]
    report = dashboard.build([_records(tmp_path, rows)])
    env = report["environments"]["vanilla"]
    assert env["compare_cpu"]["passed"] == 2 and env["compare_cpu"]["total"] == 6
    assert env["compare_cpu"]["pass_rate"] == pytest.approx(2 / 5)
    assert [f["subject"] for f in env["failures"]] == ["mm"]
    assert [f["dtype"] for f in env["stale"]] == ["int8"]
    assert env["per_dtype"]["ops"]["float32"]["failed"] == 1
    assert not report["ok"]
    dashboard.write(report, tmp_path)
    md = (tmp_path / "dashboard.md").read_text()
    assert "stale xfail" in md and "AssertionError: x" in md
    assert dashboard.summary_line(report, tmp_path).startswith("test-upstream FAILED")


def test_dashboard_is_ok_only_without_unexpected_outcomes(tmp_path):
    rows = [{"suite": "optim", "test": "t", "subject": "SGD", "outcome": o} for o in ("passed", "xfailed", "skipped")]
    report = dashboard.build([_records(tmp_path, rows)])
    assert report["ok"]


def test_dashboard_reports_test_seconds_per_suite_and_load_average(tmp_path):
    rows = [{"suite": "ops", "test": "t", "subject": "add", "outcome": "passed", "duration": 0.25},
            {"suite": "ops", "test": "t", "subject": "mul", "outcome": "failed", "duration": 1.5},
            {"suite": "optim", "test": "t", "subject": "SGD", "outcome": "passed", "duration": 2.0}]
    run = dict(_records(tmp_path, rows), load_average=[3.5, 1.25])
    report = dashboard.build([run])
    env = report["environments"]["vanilla"]
    assert env["suites"]["ops"]["test_seconds"] == 1.8  # 1.75, rounded to 0.1 s
    assert env["suites"]["optim"]["test_seconds"] == 2.0
    assert env["load_average"] == [3.5, 1.25]
    md = dashboard.markdown(report)
    assert "| test seconds: ops | 1.8 |" in md and "| 3.50 / 1.25 |" in md


def test_upstream_file_ids_match_across_devices():
    assert selection.test_id("test_view_ops.py::TestViewOpsCPU::test_view_cpu_float32") == \
        selection.test_id("test_view_ops.py::TestViewOpsPRIVATEUSE1::test_view_neuron_float32")
    assert selection.test_id("f.py::TestOldViewOpsCPU::test_diagonal_cpu") != \
        selection.test_id("f.py::TestOldViewOpsCPU::test_diagonal_multi_cpu")
    assert selection.is_device_generic("f.py::TestAutogradDeviceTypeCPU::test_x_cpu")
    assert not selection.is_device_generic("f.py::TestAutograd::test_x")


def test_non_native_skips_are_told_apart():
    assert files.skip_kind("Skipped: Unknown device type") == "largeTensorTest"
    assert files.SKIP_KINDS[files.skip_kind("Skipped: onlyNativeDeviceTypes: doesn't run on neuron")][0]
    assert not files.SKIP_KINDS[files.skip_kind("Skipped: Only runs on cuda")][0]
    assert files.skip_kind("Skipped: test is slow; run with PYTORCH_TEST_WITH_SLOW") == "other"
    # test_optim's fused-vs-forloop tests run on the devices OptimInfo lists (cuda among them).
    kind = files.skip_kind("Skipped: neuron:0 is not supported for fused on AdamW")
    assert kind == "OptimInfo.supports_fused_on" and files.SKIP_KINDS[kind][0]


def _fake_tree(tmp_path, source: str):
    """(tree, env, out): an upstream-like tree whose test/test_fake.py is `source`, an environment
    that imports tools.upstream, and an empty results directory."""
    import os

    tree = tmp_path / "tree"
    (tree / "test").mkdir(parents=True)
    (tree / "test" / "test_fake.py").write_text(source)
    env = dict(os.environ, PYTHONPATH=str(files.pathlib.Path(files.__file__).resolve().parents[2]))
    out = tmp_path / "out"
    out.mkdir()
    return tree, env, out


def test_device_run_counts_device_independent_tests_without_running_them(tmp_path):
    import sys

    tree, env, out = _fake_tree(tmp_path,
        "import unittest\n"
        "class TestPlain(unittest.TestCase):\n"
        "    def test_plain(self):\n        raise AssertionError('device-independent tests do not run')\n"
        "class TestThingCPU(unittest.TestCase):\n"
        "    def test_a_cpu(self):\n        pass\n"
        "    def test_b_cpu_float32(self):\n        self.skipTest('Unknown device type')\n"
    )
    run = files.run_device(tree, "test_fake.py", "cpu", sys.executable, env, out, budget=0, timeout=60, workers=1)
    assert sorted(run["records"]) == ["TestThing.test_a_DEV", "TestThing.test_b_DEV_float32"]
    assert run["records"]["TestThing.test_a_DEV"]["outcome"] == "passed"
    assert run["device_independent"] == 1 and not run["timed_out"] and run["seconds"] > 0
    again = files.run_device(tree, "test_fake.py", "cpu", sys.executable, env, out, budget=0, timeout=60,
                             workers=1, reuse=True)
    assert again == run


def test_slow_tests_get_a_timeout_scaled_from_their_cpu_duration(tmp_path):
    """A test whose cpu run took long gets SLOW_FACTOR times that on neuron (capped); the others
    keep the run's --timeout, which still ends a test that hangs."""
    import sys

    cpu = {"TestThing.test_slow_DEV": {"outcome": "passed", "duration": 1.0},
           "TestThing.test_hang_DEV": {"outcome": "passed", "duration": 0.01},
           "TestThing.test_huge_DEV": {"outcome": "passed", "duration": 10_000.0},
           "TestThing.test_failed_DEV": {"outcome": "failed", "duration": 50.0}}
    timeouts = files.test_timeouts(cpu, 2)
    assert timeouts == {"TestThing.test_slow_DEV": files.SLOW_FACTOR + 1,
                        "TestThing.test_huge_DEV": files.LONG_TEST_CAP_S}
    tree, env, out = _fake_tree(tmp_path,
        "import time, unittest\n"
        "class TestThingCPU(unittest.TestCase):\n"
        "    def test_slow_cpu(self):\n        time.sleep(3)\n"
        "    def test_hang_cpu(self):\n        time.sleep(60)\n"
    )
    run = files.run_device(tree, "test_fake.py", "cpu", sys.executable, env, out, budget=0, timeout=2, workers=1,
                           timeouts={"TestThing.test_slow_DEV": 30})
    assert run["records"]["TestThing.test_slow_DEV"]["outcome"] == "passed"
    assert run["records"]["TestThing.test_hang_DEV"]["outcome"] == "failed"
    assert "Timeout" in run["records"]["TestThing.test_hang_DEV"]["error"]


def test_dashboard_says_what_patch_0012_makes_of_non_native_skips(tmp_path):
    def entry(non_native, failures=()):
        return {"collected": 10, "cpu_passed": 8, "excluded": 0, "skipped": len(non_native),
                "skipped_non_native": len(non_native), "skipped_non_native_tests": non_native, "passed": 5,
                "failed": len(failures), "xfailed": 0, "cpu_seconds": 2.0, "neuron_seconds": 3.5,
                "failures": [{"test": t, "outcome": "failed", "error": "x"} for t in failures]}

    vanilla = entry(["T.test_big_DEV", "T.test_native_DEV", "T.test_huge_DEV"])
    patched = dict(entry(["T.test_huge_DEV"], failures=["T.test_native_DEV"]), cpu_reused_from="vanilla-files")
    assert dashboard.non_native_turned_on(vanilla, patched) == {"vanilla": 3, "run": 2, "passed": 1,
                                                                "still skipped": 1}
    envs = {n: {"files": {"tree": "t", "files": {"test_x.py": e}}} for n, e in (("vanilla", vanilla),
                                                                               ("patched", patched))}
    md = "\n".join(dashboard.files_table(envs))
    assert "| `test_x.py` | 3 | 2 | 1 | 1 |" in md
    # One row per file and torch: collected, cpu-passing, excluded, skipped, non-native, passed,
    # unexpected, xfailed, cpu s, neuron s, wall s.
    assert "| `test_x.py` | vanilla | 10 | 8 | 0 | 3 | 3 | 5 | 0 | 0 | 2.0 | 3.5 | 5.5 |" in md
    # The patched run reused vanilla's cpu pre-pass: its wall time is its neuron run.
    assert "| `test_x.py` | patched | 10 | 8 | 0 | 1 | 1 | 5 | 1 | 0 | 2.0 | 3.5 | 3.5 |" in md


def test_dashboard_puts_upstream_files_next_to_the_suites(tmp_path):
    rows = [{"suite": "modules", "test": "t", "subject": "Linear", "outcome": "passed"}]
    entry = {"collected": 12, "cpu_passed": 9, "excluded": 1, "run": 8, "skipped": 2, "skipped_non_native": 0,
             "passed": 5, "failed": 1, "xfailed": 0, "cpu_seconds": 4.0, "neuron_seconds": 6.5,
             "seconds": 10.6, "excluded_by": {"expectation: torch bug": 1}, "skipped_by": {"other": 2},
             "failures": [{"test": "T.test_a_DEV", "outcome": "failed", "error": "x"}]}
    run = dict(_records(tmp_path, rows), files={"tree": "t", "files": {"test_y.py": entry}, "regressions": []})
    report = dashboard.build([run])
    figures = report["environments"]["vanilla"]["file_figures"]["test_y.py"]
    assert figures["wall_seconds"] == 10.5 and figures["passed"] == 5 and figures["excluded"] == 1
    md = dashboard.markdown(report)
    assert "| modules | 1/1 (100.0%) |" in md and "| file `test_y.py` | 5/6 (83.3%) |" in md


def test_file_tests_filter_counts_the_other_cpu_passing_tests_as_excluded(tmp_path):
    import os
    import sys

    tree = tmp_path / "tree"
    (tree / "test").mkdir(parents=True)
    (tree / "test" / "test_pick.py").write_text(
        "import unittest\n"
        "class TestPickCPU(unittest.TestCase):\n"
        + "".join(f"    def test_{n}_cpu(self):\n        pass\n" for n in ("to", "to_empty", "repr"))
    )
    env = dict(os.environ, PYTHONPATH=str(files.pathlib.Path(files.__file__).resolve().parents[2]))
    out = tmp_path / "out"
    out.mkdir()
    entry = files.run_file(tree, "test_pick.py", sys.executable, env, out, budget=0, timeout=60, workers=1,
                           tests=["TestPick.test_to*"])
    assert entry["cpu_passed"] == 3 and entry["run"] == 2 and entry["passed"] == 2
    assert entry["excluded_by"] == {"not selected (--file-tests)": 1}


def test_xdist_workers_share_the_cores_intra_op_threads(monkeypatch):
    """Two workers on two cores run one OpenMP thread each (not two spinning threads each), and a
    caller's OMP_NUM_THREADS is kept."""
    monkeypatch.setattr(files.os, "cpu_count", lambda: 2)
    assert files.worker_env({"A": "1"}, 2) == {"A": "1", "OMP_NUM_THREADS": "1"}
    assert files.worker_env({"A": "1"}, 1) == {"A": "1"}
    assert files.worker_env({"OMP_NUM_THREADS": "2"}, 2)["OMP_NUM_THREADS"] == "2"
    monkeypatch.setattr(files.os, "cpu_count", lambda: 8)
    assert files.worker_env({}, 2)["OMP_NUM_THREADS"] == "4"
