"""0001 (F01): activation checkpointing must replay the neuron RNG on recomputation."""

import pytest
import torch
from torch.utils.checkpoint import checkpoint

pytestmark = pytest.mark.torch_patch("0001")


def _dropout(t, p=0.5):
    # Dropout written with rand_like: the same RNG draw per element as F.dropout,
    # independent of the backend's native_dropout kernel.
    return t * (torch.rand_like(t) >= p) / (1 - p)


def _grads(neuron, use_checkpoint, use_reentrant):
    torch.manual_seed(0)
    lin = torch.nn.Linear(32, 32).to(neuron)
    x = torch.randn(16, 32, device=neuron, requires_grad=True)

    def block(inp):
        return _dropout(torch.tanh(lin(inp)))

    torch.manual_seed(1)
    out = checkpoint(block, x, use_reentrant=use_reentrant) if use_checkpoint else block(x)
    out.square().sum().backward()
    return x.grad.cpu(), lin.weight.grad.cpu()


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_with_dropout_gives_uncheckpointed_gradients(neuron, use_reentrant):
    ref_x, ref_w = _grads(neuron, use_checkpoint=False, use_reentrant=use_reentrant)
    got_x, got_w = _grads(neuron, use_checkpoint=True, use_reentrant=use_reentrant)
    torch.testing.assert_close(got_x, ref_x, msg="input gradient differs: dropout mask was not replayed")
    torch.testing.assert_close(got_w, ref_w, msg="weight gradient differs: dropout mask was not replayed")
