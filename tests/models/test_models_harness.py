# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""The architecture sweep (`python -m tools.models.run`): a real architecture runs through the
spawn workers and passes; expectations are checked (a stale entry fails the run); malformed
entries are refused."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from tools.models import expectations  # noqa: E402


def _entry(**kw):
    return {"archs": ["gpt2"], "status": "mismatch", "category": "backend bug", "reason": "r",
            "reproducer": "x", **kw}


def test_entries_need_reason_reproducer_and_known_status():
    assert expectations.parse({"expectations": [_entry()]})[0].archs == ("gpt2",)
    for bad in (_entry(reason=""), _entry(reproducer=None), _entry(status="slow"),
                _entry(status="cpu_fail", category="backend bug"), _entry(category="torch bug")):
        with pytest.raises(expectations.ExpectationError):
            expectations.parse({"expectations": [bad]})


def test_classify_marks_expected_unexpected_and_stale():
    entries = expectations.parse({"expectations": [
        _entry(archs=["a*"]),
        {"archs": ["b"], "status": "cpu_fail", "category": "model bug", "reason": "r"}]})
    records = [{"arch": "a1", "status": "mismatch"}, {"arch": "a2", "status": "pass"},
               {"arch": "b", "status": "neuron_error"}, {"arch": "c", "status": "mismatch"},
               {"arch": "d", "status": "pass", "bf16": {"status": "mismatch"}}]
    stale = expectations.classify(records, entries)
    assert [r["outcome"] for r in records] == ["expected", "stale", "unexpected", "unexpected", "unexpected"]
    assert {x["arch"] for x in stale} == {"a2", "b"}


@pytest.mark.timeout(420)
def test_sweep_runs_an_architecture_and_fails_on_a_stale_entry(tmp_path):
    exp = tmp_path / "exp.yaml"
    exp.write_text("expectations:\n  - archs: [gpt2]\n    status: mismatch\n    category: backend bug\n"
                   "    reason: claimed for the test\n    reproducer: none\n")
    r = subprocess.run([sys.executable, "-m", "tools.models.run", "--archs", "gpt2", "--workers", "1",
                        "--expectations", str(exp), "--out", str(tmp_path / "out")],
                       cwd=ROOT, capture_output=True, text=True, timeout=400, check=False)
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    lines = r.stdout.strip().splitlines()
    assert "STALE expectation gpt2" in r.stdout
    assert lines[-1] == "models: attempted=1 cpu_ok=1 neuron_ok=1 rate=100.0%"
    data = json.loads((tmp_path / "out" / "dashboard.json").read_text())
    (rec,) = data["records"]
    assert rec["head"] == "causal_lm" and rec["ops_native"] > 0
    assert sum(rec["native_ops"].values()) == rec["ops_native"] and "aten::mm" in rec["native_ops"]
    assert data["native_overloads"] == {op: 1 for op in rec["native_ops"]}
    assert rec["bf16"]["status"] == "pass"
    assert (tmp_path / "out" / "dashboard.md").read_text().count("| gpt2 |") >= 1


@pytest.mark.timeout(420)
def test_a_hung_architecture_restarts_its_worker_and_is_recorded(tmp_path):
    # A 1 s limit is shorter than any first architecture of a fresh worker (it imports the
    # model code), so each one times out; the sweep must kill and replace the worker and go on.
    r = subprocess.run([sys.executable, "-m", "tools.models.run", "--archs", "gpt2,bert", "--workers", "1",
                        "--limit", "1", "--out", str(tmp_path)],
                       cwd=ROOT, capture_output=True, text=True, timeout=400, check=False)
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    assert r.stdout.strip().splitlines()[-1].startswith("models: attempted=2 ")
    data = json.loads((tmp_path / "dashboard.json").read_text())
    assert [x["arch"] for x in data["worker_restarts"]] == ["gpt2", "bert"]
    for rec in data["records"]:
        assert rec["worker_lost"] == "timed out after 1 s"
        assert rec["status"] in ("cpu_fail", "no_tiny_config", "neuron_error")
    assert "## Worker restarts" in (tmp_path / "dashboard.md").read_text()


@pytest.mark.timeout(300)
def test_cpu_failures_count_against_the_harness_unless_the_default_config_reproduces_them():
    from tools.models import training
    # Sapiens2's shrunk config breaks its CPU step (attention shapes), its default config trains:
    # the failure is the tiny config's.
    _, rec = training.prepare("sapiens2", lambda phase: None)
    assert rec["status"] == "no_tiny_config", rec
    assert rec["default_config"] == "trains on meta"
    # TVP's column position table only fits a batch of one, at any size: the default config
    # fails at the same line.
    _, rec = training.prepare("tvp", lambda phase: None)
    assert rec["status"] == "cpu_fail", rec
    assert rec["default_config"] == "same failure"


def test_cpu_fail_with_input_generation_category_counts_as_a_harness_skip():
    from tools.models import dashboard
    records = [{"arch": "a", "status": "pass"}, {"arch": "b", "status": "cpu_fail"},
               {"arch": "c", "status": "cpu_fail"}, {"arch": "d", "status": "no_tiny_config"}]
    entries = expectations.parse({"expectations": [
        {"archs": ["b"], "status": "cpu_fail", "category": "input generation", "reason": "r"},
        {"archs": ["c"], "status": "cpu_fail", "category": "model bug", "reason": "r"},
        {"archs": ["d"], "status": "no_tiny_config", "category": "tiny config", "reason": "r"}]})
    assert expectations.classify(records, entries) == []
    s = dashboard.summary(records)
    assert s["cpu_fail_input_generation"] == 1
    assert s["harness_skips_pct"] == 50.0
    with pytest.raises(expectations.ExpectationError):
        expectations.parse({"expectations": [
            {"archs": ["c"], "status": "cpu_fail", "category": "tiny config", "reason": "r"}]})


def test_rung_one_ties_the_widths_the_default_config_ties():
    from tools.models import tiny_config
    # RT-DETR: the hybrid encoder's input channels are the backbone's output stage widths, and
    # its width is the decoder's input width; rung 0 shrinks each on its own, rung 1 ties them.
    cfg = tiny_config.tiny_config("rt_detr", 1)
    stages = [cfg.backbone_config.hidden_sizes[i - 1] for i in cfg.backbone_config.out_indices]
    assert list(cfg.encoder_in_channels) == stages
    assert set(cfg.decoder_in_channels) == {cfg.encoder_hidden_dim} == {cfg.d_model}
    assert tiny_config.tiny_config("gpt2", 1).n_embd == tiny_config.tiny_config("gpt2", 0).n_embd


@pytest.mark.timeout(300)
def test_a_construction_failure_the_default_config_repeats_is_the_models_own():
    from tools.models import training
    _, rec = training.prepare("dbrx", lambda phase: None)
    assert rec["status"] == "cpu_fail", rec
    assert rec["failed_at"] == "construction" and rec["default_config"] == "same failure at construction"


def test_naflex_and_flattened_patch_inputs_agree_with_their_grids():
    import torch
    from tools.models import case, tiny_config
    for arch, grid in (("siglip2_vision_model", "spatial_shapes"), ("qwen2_5_vl_vision", "grid_thw")):
        cfg = tiny_config.tiny_config(arch, 0)
        (head, cls), = case.candidates(arch)
        x = case.make_inputs(arch, head, cls, cfg, torch.Generator().manual_seed(0))
        patches = x[grid].prod(-1).sum()
        rows = x["pixel_values"].shape[0] * x["pixel_values"].shape[1] if grid == "spatial_shapes" else \
            x["hidden_states"].shape[0]
        assert rows == patches, (arch, x[grid], x.get("pixel_values", x.get("hidden_states")).shape)


def test_layout_boxes_are_ordered_corners_inside_the_2d_tables():
    import torch
    from tools.models import case, tiny_config
    cfg = tiny_config.tiny_config("udop", 0)
    boxes = case.boxes(cfg, torch.Generator().manual_seed(0))
    assert boxes.shape == (case.BATCH, case.SEQ, 4)
    assert (boxes[..., 0] <= boxes[..., 2]).all() and (boxes[..., 1] <= boxes[..., 3]).all()
    assert boxes.min() >= 0 and boxes.max() < cfg.max_2d_position_embeddings
