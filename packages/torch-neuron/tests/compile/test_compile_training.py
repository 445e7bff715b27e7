# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""Compiled training (backend="neuron") matches eager training on neuron for 5 steps, fp32 and
under bf16 autocast: an MLP, a conv net, the demo's char-GPT, tiny GPT-2 and Llama."""
from __future__ import annotations

import os
import sys

import pytest
import torch
import torch.nn.functional as F
import torch_neuron
from compile_helpers import assert_parity
from torch import nn

pytestmark = pytest.mark.timeout(300)
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))


def _batches(n, make):
    g = torch.Generator().manual_seed(0)
    return [make(g) for _ in range(n)]


def mlp_case():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 32), nn.LayerNorm(32), nn.Tanh(),
                          nn.Linear(32, 8))
    batches = _batches(5, lambda g: (torch.randn(64, 16, generator=g), torch.randn(64, 8, generator=g)))
    return model, (lambda m, x, y: F.mse_loss(m(x).float(), y)), batches


def conv_case():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(8, 8, 3, padding=1),
                          nn.SiLU(), nn.Flatten(), nn.Linear(8 * 4 * 4, 10))
    batches = _batches(5, lambda g: (torch.randn(4, 3, 8, 8, generator=g), torch.randint(0, 10, (4,), generator=g)))
    return model, (lambda m, x, y: F.cross_entropy(m(x).float(), y)), batches


def char_gpt_case():
    sys.path.insert(0, os.path.join(REPO, "tools", "demo"))
    import train_char_gpt as demo
    cfg = demo.GPTConfig(seq_len=16, d_model=32, n_heads=2, n_layers=2)
    torch.manual_seed(0)
    model = demo.CharGPT(cfg)

    def loss_fn(m, x, y):
        logits = m(x)
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.view(-1))
    batches = _batches(5, lambda g: (torch.randint(0, cfg.vocab_size, (4, 16), generator=g),
                                     torch.randint(0, cfg.vocab_size, (4, 16), generator=g)))
    return model, loss_fn, batches


def hf_case(kind):
    def make():
        pytest.importorskip("transformers")
        sys.path.insert(0, os.path.join(REPO, "tests", "ecosystem"))
        import hf_models
        model = hf_models.tiny_model(kind).train()
        batches = _batches(5, lambda g: (torch.randint(2, hf_models.VOCAB, (2, 12), generator=g),))
        return model, (lambda m, ids: m(input_ids=ids, labels=ids).loss), batches
    return make


CASES = {"mlp": mlp_case, "conv": conv_case, "char_gpt": char_gpt_case, "gpt2": hf_case("gpt2"),
         "llama": hf_case("llama")}


# Under autocast, the conv net and GPT-2 add little over the MLP and Llama (same op kinds), and
# the suite's time budget is tight.
MATRIX = [(c, amp) for c in CASES for amp in (False, True) if not (c in ("gpt2", "conv") and amp)]


@pytest.mark.parametrize("case,amp", MATRIX, ids=[f"{c}-{'bf16_autocast' if a else 'fp32'}" for c, a in MATRIX])
def test_compiled_training_matches_eager(case, amp):
    model, loss_fn, batches = CASES[case]()
    assert_parity(model, loss_fn, batches, amp=amp)
    stats = torch_neuron.compile_stats()
    assert stats["graphs"] >= 1 and stats["partitions"] >= 2   # forward and backward were lowered
    assert stats["fused_launches"] > 0, stats["unfused_chains"]
