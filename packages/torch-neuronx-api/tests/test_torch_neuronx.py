"""torch_neuronx: TorchNeuron's names backed by torch_neuron, and the ownership checks."""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import torch
import torch_neuron
import torch_neuronx

PACKAGE_DIR = Path(torch_neuronx.__file__).resolve().parent
TIMEOUT = 120


def test_every_name_is_torch_neurons_object():
    for name in torch_neuronx.__all__:
        expected = getattr(torch_neuron, name, None) or getattr(torch.neuron, name)
        assert getattr(torch_neuronx, name) is expected, name


def test_op_tracking_sees_neuron_work():
    torch_neuronx.clear_op_tracking()
    a = torch.arange(12.0).reshape(3, 4)
    d = a.to("neuron")
    torch.testing.assert_close((d @ d.T).cpu(), a @ a.T)
    assert "aten::mm" in torch_neuronx.get_executed_ops()
    torch_neuronx.clear_op_tracking()
    assert torch_neuronx.get_executed_ops() == {}


def test_streams_and_memory_through_torch_neuronx():
    before = torch_neuronx.memory_allocated()
    x = torch.empty(1 << 20, device="neuron")
    assert torch_neuronx.memory_allocated() >= before + x.numel() * 4
    s = torch_neuronx.Stream()
    with torch_neuronx.stream(s):
        assert torch_neuronx.current_stream() == s
        y = x.fill_(2.0).sum()
    torch_neuronx.synchronize()
    assert y.item() == 2.0 * (1 << 20)
    assert torch_neuronx.current_stream() == torch_neuronx.default_stream()
    assert torch_neuronx.get_device_properties(0).total_memory > 0
    assert "allocated_bytes.all.current" in torch_neuronx.memory_stats()


def test_found_the_way_hugging_face_looks_for_it():
    # transformers.utils.import_utils.is_torch_neuron_available / accelerate's is_neuron_available
    spec = importlib.util.find_spec("torch_neuronx")
    assert spec is not None and Path(spec.origin).resolve() == PACKAGE_DIR / "__init__.py"
    assert hasattr(torch, "neuron") and torch.neuron.is_available()


def _run(code_or_script: list[str], pythonpath: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(pythonpath), TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    return subprocess.run([sys.executable, *code_or_script], env=env, capture_output=True, text=True,
                          timeout=TIMEOUT, check=False)


def _fake_aws_distribution(site: Path) -> None:
    info = site / "torch_neuronx-2.13.3.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch-neuronx\nVersion: 2.13.3.0\n")


def test_refuses_a_copy_it_did_not_install(tmp_path):
    shutil.copytree(PACKAGE_DIR, tmp_path / "torch_neuronx", ignore=shutil.ignore_patterns("__pycache__"))
    p = _run(["-c", "import torch_neuronx"], tmp_path)
    assert p.returncode != 0
    assert "ImportError" in p.stderr and "is not the copy installed by 'torch-neuronx-api'" in p.stderr, p.stderr
    assert str(tmp_path / "torch_neuronx") in p.stderr


def test_refuses_next_to_aws_torch_neuronx(tmp_path):
    _fake_aws_distribution(tmp_path)
    p = _run(["-c", "import torch_neuronx"], tmp_path)
    assert p.returncode != 0
    assert "ImportError" in p.stderr and "AWS's 'torch-neuronx' 2.13.3.0 is installed" in p.stderr, p.stderr
    assert "pip uninstall torch-neuronx" in p.stderr and "make install TORCH_NEURONX_API=0" in p.stderr


def test_install_check_script(tmp_path):
    script = str(PACKAGE_DIR / "ownership.py")
    clean = _run([script], tmp_path)
    assert clean.returncode == 0, clean.stderr
    _fake_aws_distribution(tmp_path)
    p = _run([script], tmp_path)
    assert p.returncode == 1
    assert "pip uninstall torch-neuronx" in p.stderr and "make install TORCH_NEURONX_API=0" in p.stderr, p.stderr


def test_only_our_distribution_provides_the_package():
    import importlib.metadata as md
    assert md.packages_distributions()["torch_neuronx"] == ["torch-neuronx-api"]
