# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""torch_neuron.projection: figures against the timeline they come from, the HBM fit verdict, and
the CLI's report on several profiles."""
import os
import subprocess
import sys
import textwrap

import neuron_sim
import pytest
import torch
import torch_neuron.projection as projection

DEV = "neuron"


def test_region_figures_match_the_timeline_and_events():
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64)).to(DEV)
    x = torch.randn(32, 64, device=DEV)
    model(x).sum().backward()
    torch.neuron.synchronize()
    start, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
    with projection.region() as proj:
        start.record()
        for _ in range(3):
            model(x).sum().backward()
            proj.step()
        end.record()
    s = proj.summary
    assert s["steps"] == 3
    assert s["step_time_ms"] == pytest.approx(start.elapsed_time(end) / 3, rel=1e-3)
    assert sum(s["by_model_ms"].values()) == pytest.approx(s["device_time_ms"])
    assert "kernel schedule" in s["by_model_ms"]
    # Counted flops: two forward and three backward matmuls of 2*32*64*256 (x needs no gradient),
    # plus one per element of the elementwise ops.
    mm = 2 * 32 * 64 * 256
    assert 5 * mm <= s["counted_flops_per_step"] < 6 * mm
    assert 0 < s["hfu"] < 1 and s["mfu"] == pytest.approx(s["hfu"])
    assert 0 < s["engine_utilisation"]["tensor"] <= 1
    assert s["fits"] and s["hbm_peak_bytes"] > 0
    assert "peak" in s["sources"] and "HBM" in s["sources"]
    assert "step time" in proj.text()


def _run(code, env, timeout=300):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=dict(os.environ, **env),
                          capture_output=True, text=True, timeout=timeout)


FIT_CHECK = """
    import torch, torch_neuron.projection as projection
    try:
        with projection.region() as proj:
            t = torch.empty({n} * 2**20, dtype=torch.uint8, device="neuron")
            t.fill_(1)
            proj.step()
    except torch.OutOfMemoryError:
        pass
    print("FITS", proj.summary["fits"], proj.summary["hbm_peak_bytes"], proj.summary["hbm_capacity_bytes"])
"""


@pytest.mark.parametrize("mib,fits", [(16, True), (60, False), (80, False)])   # 80 MiB: out of memory
def test_a_run_beyond_trn1s_scaled_hbm_share_is_flagged(mib, fits):
    r = _run(FIT_CHECK.format(n=mib), {"NEURON_SIM_PROFILE": "trn1", "NEURON_SIM_HBM_CAPACITY": "64MiB"})
    assert r.returncode == 0, r.stderr
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("FITS")][0].split()
    assert line[1] == str(fits), line
    assert int(line[3]) == 64 * 2**20


def test_cli_writes_a_report_for_three_profiles(tmp_path):
    script = tmp_path / "step.py"
    script.write_text(textwrap.dedent("""
        import torch, torch_neuron.projection as projection
        m = torch.nn.Linear(128, 128).to("neuron")
        x = torch.randn(64, 128, device="neuron")
        with projection.region(name="linear") as proj:
            for _ in range(2):
                m(x).sum().backward()
                proj.step()
    """))
    out = tmp_path / "report"
    r = subprocess.run([sys.executable, "-m", "torch_neuron.projection", "--profiles", "trn1,trn2,trn3", "--out",
                        str(out), str(script)], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr
    md = (out / "report.md").read_text()
    for p in ("trn1", "trn2", "trn3"):
        assert f"| {p} |" in md
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 5
    assert len([f for f in os.listdir(out) if f.endswith(".png")]) == 5
    # Each profile is simulated on its own figures: the projections differ.
    summary_table = md.split("## HBM fit")[0]
    rows = {ln.split("|")[1].strip(): float(ln.split("|")[2]) for ln in summary_table.splitlines()
            if ln.startswith("| trn")}
    assert all(v > 0 for v in rows.values()) and len(set(rows.values())) > 1, rows


# A training step whose HBM high-water grows with --batch: an MLP of 4 x (512 x 512) fp32 weights
# (4 MiB; 16 MiB with gradients and Adam's two moments) and activations of batch x 32 KiB each.
BATCHED_SCRIPT = """
    import argparse, torch, torch_neuron.projection as projection
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=2)
    a = ap.parse_args()
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(512, 512) for _ in range(4)]).to("neuron")
    opt = torch.optim.Adam(model.parameters())
    x = torch.randn(a.batch * 16, 512, device="neuron")
    with projection.region(name="mlp") as proj:
        for _ in range(a.steps):
            model(x).square().mean().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            proj.step()
"""


def _runs_without_oom(script, batch, capacity):
    code = f"""
        import runpy, sys, torch
        sys.argv = ["s", "--batch", "{batch}"]
        try:
            runpy.run_path({str(script)!r}, run_name="__main__")
            print("RESULT ok")
        except torch.OutOfMemoryError:
            print("RESULT oom")
    """
    r = _run(code, {"NEURON_SIM_PROFILE": "trn1", "NEURON_SIM_HBM_CAPACITY": str(capacity)})
    assert r.returncode == 0, r.stderr
    return "RESULT ok" in r.stdout


def test_cli_flags_a_model_beyond_trn1s_scaled_share_and_checks_the_largest_batch(tmp_path):
    from torch_neuron.projection import capacity

    script = tmp_path / "mlp.py"
    script.write_text(textwrap.dedent(BATCHED_SCRIPT))
    out = tmp_path / "report"
    scale = 1 / 256     # trn1's 16 GiB share per core becomes 64 MiB
    r = subprocess.run([sys.executable, "-m", "torch_neuron.projection", "--profiles", "trn1", "--out", str(out),
                        "--hbm-scale", "1/256", "--batch-arg=--batch", str(script), "--batch", "512"],
                       capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    cap = capacity.scaled_capacity("trn1", scale)
    assert cap == 64 * 2**20
    md = (out / "report.md").read_text()
    # Batch 512 needs 16 MiB per activation: out of memory at 64 MiB, flagged as such.
    row = next(ln for ln in md.splitlines() if ln.startswith("| trn1 | 64.00 MiB"))
    assert "out of memory" in row and "1/256 of 16.00 GiB" in row, row
    assert "scaled by **1/256**" in md
    largest = int(row.split("**")[1])
    # 48 MiB left for activations of ~10 x 32 KiB per unit of batch: well above 1, well below 512.
    assert 8 <= largest < 256, row
    assert f"{largest} ran" in row and f"{largest + 1} out of memory" in row, row
    # The search's answer, checked here on its own: that batch runs, the one above does not.
    assert _runs_without_oom(script, largest, cap)
    assert not _runs_without_oom(script, largest + 1, cap)
