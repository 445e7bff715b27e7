# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""End-to-end training on `neuron` against CPU: the main demo as a user runs it, a clean
process exit after training, and a train / checkpoint / resume-on-another-device flow that
must track an uninterrupted CPU run."""

import copy
import importlib.util
import io
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DEMO = os.path.join(ROOT, "tools", "demo", "train_char_gpt.py")
TINY = ("--d-model", "32", "--layers", "1", "--batch", "4", "--seq", "32")  # for checks of the script itself


def _run_demo(*args, timeout=150):
    return subprocess.run([sys.executable, DEMO, *args], capture_output=True, check=False, text=True, timeout=timeout,
                          cwd=ROOT)


@pytest.mark.timeout(180)
def test_demo_losses_match_cpu():
    r = _run_demo("--steps", "6")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = r.stdout
    assert "max |loss diff| cpu vs neuron" in out and "OK" in out
    assert "device time per step on Trainium2" in out and "projection on trn2" in out and "step time" in out
    assert "op executions on the device" in out and "host fallback:" in out
    rows = [line.split() for line in out.splitlines() if line[:4].strip().isdigit()]
    assert len(rows) == 6
    losses = [float(r[2]) for r in rows]
    assert losses[-1] < losses[0]  # it trains
    dev_ms = [float(r[6]) for r in rows]
    assert all(ms > 0 for ms in dev_ms)


def _demo_module():
    spec = importlib.util.spec_from_file_location("train_char_gpt", DEMO)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses resolve their module through sys.modules
    spec.loader.exec_module(mod)
    return mod


# The flag variants run in-process: the subprocess run above already covers the script as
# users start it, and each extra interpreter start costs seconds on a loaded machine.
@pytest.mark.timeout(180)
def test_demo_amp_and_device_only(capsys):
    demo = _demo_module()
    assert demo.main(["--steps", "3", "--amp", *TINY]) == 0
    out = capsys.readouterr().out
    assert "bf16 autocast" in out and "OK" in out
    assert demo.main(["--steps", "2", "--device-only", *TINY]) == 0
    out = capsys.readouterr().out
    assert "max |loss diff|" not in out and "projection on trn2" in out


@pytest.mark.timeout(240)
def test_demo_compile_prints_the_same_table_with_less_device_time(capsys):
    """--compile: the model and the optimizer step compiled; losses still match the CPU twin and
    the steady steps take less simulated device time than the same run eager."""
    demo = _demo_module()

    def dev_ms(out):
        rows = [line.split() for line in out.splitlines() if line[:4].strip().isdigit()]
        assert len(rows) == 3, out
        return [float(r[6]) for r in rows]
    assert demo.main(["--steps", "3", *TINY]) == 0
    eager = dev_ms(capsys.readouterr().out)
    assert demo.main(["--steps", "3", "--compile", *TINY]) == 0
    out = capsys.readouterr().out
    assert "compiled (backend neuron)" in out and "OK" in out and "fused kernels" in out
    compiled = dev_ms(out)
    assert compiled[-1] < eager[-1], (compiled, eager)


@pytest.mark.timeout(180)
def test_demo_fails_when_losses_disagree(capsys):
    # A negative tolerance can never be met: the run must say FAIL and return 1.
    assert _demo_module().main(["--steps", "1", "--tol", "-1", *TINY]) == 1
    assert "FAIL" in capsys.readouterr().out


@pytest.mark.timeout(120)
def test_training_process_exits_cleanly():
    # Teardown at interpreter exit (autograd worker threads, device runtime) must not abort:
    # a script that trained and returned must report success to its shell or scheduler.
    # Ending right after backward() is the case that exposes a race with those threads.
    code = (
        "import torch\n"
        "m = torch.nn.Linear(8, 1).to('neuron')\n"
        "print(m.weight.device)\n"
        "m(torch.randn(4, 8, device='neuron')).sum().backward()\n"
    )
    for _ in range(3):  # the failure this guards against is intermittent (a race at exit)
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
        assert r.returncode == 0, f"exit status {r.returncode}: {r.stderr[-2000:]}"
        assert r.stdout.strip() == "neuron:0"


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 4 * 4, 3)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
        return self.fc(x.flatten(1))


def _epoch(model, opt, sched, loader, device, steps):
    losses = []
    for i, (xb, yb) in enumerate(loader):
        if i == steps:
            break
        xb, yb = xb.to(device, non_blocking=True), yb.to(device, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    return losses


def _make(model):
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    return opt, sched


@pytest.mark.timeout(120)
def test_checkpoint_resume_on_other_device_tracks_cpu():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(96, 1, 8, 8, generator=g)
    y = torch.randint(0, 3, (96,), generator=g)
    data = TensorDataset(x, y)

    def loader(seed, pin):
        return DataLoader(data, batch_size=16, shuffle=True, generator=torch.Generator().manual_seed(seed),
                          pin_memory=pin)

    torch.manual_seed(0)
    cpu_model = SmallCNN()
    init = copy.deepcopy(cpu_model)
    cpu_opt, cpu_sched = _make(cpu_model)
    cpu_losses = _epoch(cpu_model, cpu_opt, cpu_sched, loader(1, False), "cpu", 3)
    cpu_losses += _epoch(cpu_model, cpu_opt, cpu_sched, loader(2, False), "cpu", 3)

    dev_model = copy.deepcopy(init).to("neuron:0")
    dev_opt, dev_sched = _make(dev_model)
    dev_losses = _epoch(dev_model, dev_opt, dev_sched, loader(1, True), "neuron:0", 3)
    buf = io.BytesIO()
    torch.save({"model": dev_model.state_dict(), "opt": dev_opt.state_dict(), "sched": dev_sched.state_dict()}, buf)
    del dev_model, dev_opt, dev_sched

    buf.seek(0)
    ckpt = torch.load(buf, map_location="neuron:1")
    resumed = copy.deepcopy(init).to("neuron:1")
    resumed.load_state_dict(ckpt["model"])
    opt, sched = _make(resumed)
    opt.load_state_dict(ckpt["opt"])
    sched.load_state_dict(ckpt["sched"])
    for state in opt.state.values():
        assert state["momentum_buffer"].device == torch.device("neuron", 1)
    dev_losses += _epoch(resumed, opt, sched, loader(2, True), "neuron:1", 3)

    assert cpu_losses[-1] < cpu_losses[0]
    torch.testing.assert_close(torch.tensor(dev_losses), torch.tensor(cpu_losses), rtol=1e-4, atol=1e-5)
    for (name, p_dev), p_cpu in zip(resumed.state_dict().items(), cpu_model.state_dict().values()):
        assert p_dev.device == torch.device("neuron", 1), name
        torch.testing.assert_close(p_dev.cpu(), p_cpu, rtol=1e-4, atol=1e-5, msg=name)
