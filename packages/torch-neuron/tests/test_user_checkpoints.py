"""Checkpoints of neuron tensors: ``torch.load(weights_only=True)`` restores model state dicts,
optimizer states and RNG states onto neuron (and onto CPU) with the saved values; truncated or
corrupted files and ``map_location`` to a neuron device that does not exist raise a clear
RuntimeError, the type CUDA raises for the same mistakes."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

pytestmark = pytest.mark.timeout(180)


def _model_and_optimizer(device: str):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16),
                                torch.nn.Linear(16, 4)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x = torch.randn(5, 8, device=device)
    model(x).square().mean().backward()
    opt.step()
    return model, opt


def _checkpoint():
    model, opt = _model_and_optimizer("neuron")
    torch.neuron.manual_seed(1234)
    return model, opt, {
        "model": model.state_dict(),
        "optim": opt.state_dict(),
        "rng_neuron": torch.neuron.get_rng_state(),
        "rng_neuron_all": torch.neuron.get_rng_state_all(),
        "rng_cpu": torch.get_rng_state(),
        "step": 7,
        "bf16": torch.arange(6.0, device="neuron:1").to(torch.bfloat16).reshape(2, 3).t(),
    }


def test_weights_only_load_restores_neuron_state(tmp_path):
    model, opt, ck = _checkpoint()
    path = tmp_path / "ck.pt"
    torch.save(ck, path)
    loaded = torch.load(path, weights_only=True)
    for k, v in ck["model"].items():
        assert loaded["model"][k].device == v.device
        torch.testing.assert_close(loaded["model"][k].cpu(), v.cpu(), rtol=0, atol=0)
    st = loaded["optim"]["state"]
    for pid, s in ck["optim"]["state"].items():
        for name, t in s.items():
            got = st[pid][name]
            if isinstance(t, torch.Tensor):
                assert got.device == t.device, (pid, name)
                torch.testing.assert_close(got.cpu(), t.cpu(), rtol=0, atol=0)
    assert loaded["optim"]["param_groups"] == ck["optim"]["param_groups"]
    assert loaded["bf16"].device == torch.device("neuron:1") and loaded["bf16"].dtype == torch.bfloat16
    assert loaded["bf16"].stride() == ck["bf16"].stride()
    assert torch.equal(loaded["bf16"].cpu(), ck["bf16"].cpu())
    assert loaded["step"] == 7

    # The restored RNG state reproduces the same random numbers on neuron.
    torch.neuron.set_rng_state(loaded["rng_neuron"])
    a = torch.rand(64, device="neuron").cpu()
    torch.neuron.set_rng_state(ck["rng_neuron"])
    b = torch.rand(64, device="neuron").cpu()
    assert torch.equal(a, b)
    torch.neuron.set_rng_state_all(loaded["rng_neuron_all"])

    # A fresh model and optimizer continue identically from the loaded state.
    model2, opt2 = _model_and_optimizer("neuron")
    model2.load_state_dict(loaded["model"])
    opt2.load_state_dict(loaded["optim"])
    x = torch.randn(5, 8)
    for m, o in ((model, opt), (model2, opt2)):
        o.zero_grad()
        m(x.to("neuron")).square().mean().backward()
        o.step()
    for p, q in zip(model.parameters(), model2.parameters()):
        torch.testing.assert_close(p.cpu(), q.cpu(), rtol=0, atol=0)


@pytest.mark.parametrize("map_location", ["cpu", "neuron:2", {"neuron:0": "neuron:3", "neuron:1": "neuron:3"}])
def test_weights_only_load_with_map_location(tmp_path, map_location):
    _, _, ck = _checkpoint()
    path = tmp_path / "ck.pt"
    torch.save(ck, path)
    loaded = torch.load(path, weights_only=True, map_location=map_location)
    want = {"cpu": "cpu", "neuron:2": "neuron:2"}.get(map_location, "neuron:3") \
        if isinstance(map_location, str) else "neuron:3"
    for k, v in ck["model"].items():
        assert str(loaded["model"][k].device) == want
        torch.testing.assert_close(loaded["model"][k].cpu(), v.cpu(), rtol=0, atol=0)
    assert str(loaded["bf16"].device) == want


def _load_error(path):
    try:
        torch.load(path, weights_only=True)
    except Exception as e:  # noqa: BLE001 - the type is what is compared
        return e
    return None


def _cut_and_corrupt(tmp_path, tag, state):
    """Errors from loading truncated and corrupted copies of torch.save(state)."""
    path = tmp_path / f"{tag}.pt"
    torch.save(state, path)
    data = path.read_bytes()
    errors = {}
    for name, cut in (("half", len(data) // 2), ("tail", len(data) - 30), ("head", 100)):
        bad = tmp_path / f"{tag}-{name}.pt"
        bad.write_bytes(data[:cut])
        errors[name] = _load_error(bad)
    # The pickle record: the loader must refuse it rather than build tensors from garbage.
    corrupt = bytearray(data)
    start = corrupt.index(b"data.pkl") + len(b"data.pkl")
    for i in range(start, start + 64):
        corrupt[i] ^= 0xFF
    bad = tmp_path / f"{tag}-pickle.pt"
    bad.write_bytes(bytes(corrupt))
    errors["pickle"] = _load_error(bad)
    return errors


def test_truncated_or_corrupted_checkpoint_raises_as_on_cpu(tmp_path):
    # torch's loader raises the same for every device (CUDA included): compare with CPU.
    _, _, ck = _checkpoint()
    neuron = _cut_and_corrupt(tmp_path, "neuron", ck)
    cpu_ck = {k: (v.cpu() if isinstance(v, torch.Tensor) else v) for k, v in ck.items()
              if k not in ("model", "optim", "rng_neuron_all")}
    cpu_ck["model"] = {k: v.cpu() for k, v in ck["model"].items()}
    cpu = _cut_and_corrupt(tmp_path, "cpu", cpu_ck)
    for name, err in neuron.items():
        assert err is not None, f"the {name} copy loaded"
        assert type(err) is type(cpu[name]), (name, err, cpu[name])
        assert str(err), name
    assert any("PytorchStreamReader failed reading zip archive" in str(e) for e in neuron.values())
    assert "Weights only load failed" in str(neuron["pickle"])


def test_map_location_to_a_missing_neuron_device_raises(tmp_path):
    path = tmp_path / "t.pt"
    torch.save({"w": torch.ones(3, device="neuron:1")}, path)
    n = torch.neuron.device_count()
    for loc in (f"neuron:{n + 5}", torch.device("neuron", n + 5), {"neuron:1": f"neuron:{n + 5}"}):
        with pytest.raises(RuntimeError) as e:
            torch.load(path, weights_only=True, map_location=loc)
        msg = str(e.value)
        assert f"device {n + 5}" in msg and f"device_count() is {n}" in msg and "map_location" in msg, msg


def test_checkpoint_from_a_device_not_visible_here_names_the_fix(tmp_path):
    path = tmp_path / "t.pt"
    torch.save({"w": torch.arange(4.0, device="neuron:3")}, path)
    env = dict(os.environ, NEURON_RT_VISIBLE_CORES="0-1", TORCH_NEURON_FALLBACK_WARN="0")
    body = textwrap.dedent(f"""
        import torch
        try:
            torch.load({str(path)!r}, weights_only=True)
        except RuntimeError as e:
            assert type(e) is RuntimeError, type(e)
            assert "device 3" in str(e) and "device_count() is 2" in str(e), e
        else:
            raise SystemExit("loaded onto a missing device")
        t = torch.load({str(path)!r}, weights_only=True, map_location="neuron:1")["w"]
        assert t.device == torch.device("neuron:1") and torch.equal(t.cpu(), torch.arange(4.0))
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", body], check=False, env=env, capture_output=True, text=True,
                          timeout=150)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr
