# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""Compiled FlexAttention on neuron. Stock torch 2.13.0 rejects PrivateUse1 devices in
flex_attention's device check (the error names patch 0004); the patched torch of
``make patched-torch`` (.venv-patched) runs it, forward and backward, compared here with
CPU eager values in that environment."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import textwrap

import pytest
import torch
from compile_helpers import DEV

pytestmark = pytest.mark.timeout(900)

REPO = pathlib.Path(__file__).resolve().parents[4]
PATCHED_PYTHON = REPO / ".venv-patched" / "bin" / "python"
PATCH = "0004-flex-attention-privateuse1.patch"

# Runs in the patched environment: eager CPU reference, then torch.compile(backend="neuron")
# on neuron, with a score_mod and a causal block mask, forward and backward.
SCRIPT = textwrap.dedent("""
    import json
    import torch
    import torch_neuron
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    def relative_bias(score, b, h, q_idx, kv_idx):
        return score + (q_idx - kv_idx).to(score.dtype) * 0.1

    def causal(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx

    torch.manual_seed(0)
    B, H, L, D = 2, 2, 128, 16
    q, k, v, grad = (torch.randn(B, H, L, D) for _ in range(4))
    report = {"torch": torch.__version__, "cases": {}}
    for case in ("score_mod", "block_mask"):
        def attend(q, k, v, device):
            if case == "score_mod":
                return flex_attention(q, k, v, score_mod=relative_bias)
            mask = create_block_mask(causal, B=None, H=None, Q_LEN=L, KV_LEN=L, device=device)
            return flex_attention(q, k, v, block_mask=mask)

        ref_in = [t.clone().requires_grad_() for t in (q, k, v)]
        ref = attend(*ref_in, "cpu")
        ref.backward(grad)
        torch._dynamo.reset()
        torch_neuron.clear_compile_stats()
        dev_in = [t.to("neuron").requires_grad_() for t in (q, k, v)]
        compiled = torch.compile(lambda q, k, v: attend(q, k, v, "neuron"), backend="neuron")
        out = compiled(*dev_in)
        out.backward(grad.to("neuron"))
        assert out.device.type == "neuron", out.device
        errors = {"out": (out.detach().cpu() - ref.detach()).abs().max().item()}
        torch.testing.assert_close(out.detach().cpu(), ref.detach(), rtol=1e-4, atol=1e-5)
        for name, got, want in zip("qkv", dev_in, ref_in):
            assert got.grad is not None and got.grad.device.type == "neuron", name
            torch.testing.assert_close(got.grad.cpu(), want.grad, rtol=1e-4, atol=1e-5)
            errors["grad_" + name] = (got.grad.cpu() - want.grad).abs().max().item()
        stats = torch_neuron.compile_stats()
        report["cases"][case] = {"errors": errors, "graphs": stats["graphs"], "partitions": stats["partitions"]}
    print(json.dumps(report))
""")


def test_compiled_flex_attention_error_names_the_patch_on_stock_torch():
    if "+pu" in torch.__version__:
        pytest.skip(f"torch {torch.__version__} carries the patch series")
    from torch.nn.attention.flex_attention import flex_attention
    q = torch.randn(1, 2, 16, 8, device=DEV)
    with pytest.raises(ValueError, match=rf"{PATCH}.*make patched-torch") as err:
        torch.compile(flex_attention, backend="neuron")(q, q, q)
    assert "neuron" in str(err.value) or "PrivateUse1" in str(err.value)


@pytest.mark.skipif(not PATCHED_PYTHON.exists(),
                    reason=f"{PATCHED_PYTHON} does not exist: `make patched-torch` builds torch with {PATCH}")
def test_compiled_flex_attention_forward_and_backward_on_patched_torch():
    env = {**os.environ, "TORCH_NEURON_FALLBACK_WARN": "0"}
    proc = subprocess.run([str(PATCHED_PYTHON), "-c", SCRIPT], capture_output=True, text=True, timeout=800,
                          env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "+pu" in report["torch"], report
    for case, r in report["cases"].items():
        # One Dynamo graph through backend "neuron": AOTAutograd's forward and backward partitions.
        assert r["graphs"] >= 1 and r["partitions"] >= 2, (case, r)
