"""0004 (F04): flex_attention runs on neuron and matches CPU."""

import pytest
import torch
from torch.nn.attention.flex_attention import flex_attention

pytestmark = pytest.mark.torch_patch("0004")


def test_flex_attention_on_neuron_matches_cpu(neuron):
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 16, 8) for _ in range(3))

    def relative_bias(score, b, h, q_idx, kv_idx):
        return score + (q_idx - kv_idx).to(score.dtype) * 0.1

    ref = flex_attention(q, k, v, score_mod=relative_bias)
    got = flex_attention(q.to(neuron), k.to(neuron), v.to(neuron), score_mod=relative_bias)
    assert got.device.type == "neuron"
    torch.testing.assert_close(got.cpu(), ref, rtol=1e-5, atol=1e-5)
