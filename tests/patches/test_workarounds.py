"""torch_neuron.workarounds: on vanilla torch they fix 0001/0002's symptoms, and they turn
themselves off when torch has the fix (the patched wheel).

The matrix runs the proof tests with TORCH_NEURON_DISABLE_WORKAROUNDS=1, so each check
here runs in a fresh interpreter with the workarounds enabled.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

_CHECKS = textwrap.dedent(
    """
    import json, warnings
    import torch, torch_neuron
    from torch.utils.checkpoint import checkpoint

    warnings.simplefilter("always")
    result = {"status": torch_neuron.workarounds.status()}
    with warnings.catch_warnings(record=True) as caught:
        def grads(use_checkpoint):
            torch.manual_seed(0)
            lin = torch.nn.Linear(32, 32).to("neuron")
            x = torch.randn(16, 32, device="neuron", requires_grad=True)
            def block(t):
                t = torch.tanh(lin(t))
                return t * (torch.rand_like(t) >= 0.5) * 2.0
            torch.manual_seed(1)
            for _ in range(2):  # twice: the workaround warns only once
                x.grad = None
                out = checkpoint(block, x, use_reentrant=False) if use_checkpoint else block(x)
                out.square().sum().backward()
            return x.grad.cpu()
        result["checkpoint_grads_match"] = torch.equal(grads(True), grads(False))
        result["scale"] = torch.amp.GradScaler().scale(torch.tensor(1.0, device="neuron")).item()
        result["scale_again"] = torch.amp.GradScaler().scale(torch.tensor(1.0, device="neuron")).item()
        from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler
        result["sharded_scale"] = ShardedGradScaler().scale(torch.tensor(1.0, device="neuron")).item()
    result["warnings"] = sorted(str(w.message).split(":")[0] for w in caught if "torch_neuron workaround" in str(w.message))
    print("RESULT " + json.dumps(result))
    """
)


@pytest.fixture(scope="module")
def with_workarounds():
    env = {k: v for k, v in os.environ.items() if k != "TORCH_NEURON_DISABLE_WORKAROUNDS"}
    proc = subprocess.run(
        [sys.executable, "-c", _CHECKS], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def _expected_status():
    variant = os.environ.get("TORCH_PATCHES_VARIANT")
    if variant not in ("vanilla", "patched"):
        pytest.skip("TORCH_PATCHES_VARIANT (set by the matrix runner) says which torch this is")
    return "applied" if variant == "vanilla" else "not needed"


@pytest.mark.torch_workaround("0001")
def test_checkpoint_workaround(with_workarounds):
    assert with_workarounds["status"]["0001"] == _expected_status()
    assert with_workarounds["checkpoint_grads_match"], "checkpointed gradients differ from uncheckpointed ones"


@pytest.mark.torch_workaround("0002")
def test_grad_scaler_workaround(with_workarounds):
    assert with_workarounds["status"]["0002"] == _expected_status()
    assert with_workarounds["scale"] == with_workarounds["scale_again"] == 2.0**16
    assert with_workarounds["sharded_scale"] == 2.0**16


@pytest.mark.torch_workaround("0001")
def test_workarounds_warn_once_and_only_when_applied(with_workarounds):
    applied = [pid for pid, st in with_workarounds["status"].items() if st == "applied"]
    # 0014 only keeps the Parameter objects vanilla torch would replace, and stays silent.
    findings = {"0001": "F01", "0002": "F02"}
    expected = sorted(f"torch_neuron workaround {pid} ({findings[pid]}) is active" for pid in applied if pid in findings)
    assert with_workarounds["warnings"] == expected


_TIED = textwrap.dedent(
    """
    import json
    import torch, torch_neuron

    emb = torch.nn.Embedding(8, 4)
    head = torch.nn.Linear(4, 8, bias=False)
    head.weight = emb.weight
    model = torch.nn.ModuleDict({"emb": emb, "head": head})
    before = model["emb"].weight
    model.to("neuron")
    print("RESULT " + json.dumps({
        "status": torch_neuron.workarounds.status()["0014"],
        "fixed_in_torch": torch._has_compatible_shallow_copy_type(torch.empty(1), torch.empty(1, device="neuron")),
        "same_object": model["emb"].weight is before,
        "tied": model["emb"].weight is model["head"].weight,
        "device": model["head"].weight.device.type,
    }))
    """
)


def _run_tied(disable: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TORCH_NEURON_DISABLE_WORKAROUNDS"}
    if disable:
        env["TORCH_NEURON_DISABLE_WORKAROUNDS"] = "1"
    proc = subprocess.run([sys.executable, "-c", _TIED], capture_output=True, text=True, env=env, timeout=300,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def test_module_to_keeps_tied_parameters_and_honours_the_switch():
    on, off = _run_tied(disable=False), _run_tied(disable=True)
    assert on["device"] == off["device"] == "neuron"
    # Enabled: the objects survive the move whether torch has the fix or the workaround does.
    assert on["status"] == ("not needed" if on["fixed_in_torch"] else "applied")
    assert on["same_object"] and on["tied"]
    # Disabled: torch's own behaviour, which on a torch without patch 0014 replaces the Parameter.
    assert off["status"] == "disabled"
    assert off["same_object"] == off["fixed_in_torch"]
