"""0003 (F03): torch.compile + checkpoint + dropout on neuron recomputes the same mask."""

import pytest
import torch
from torch.utils.checkpoint import checkpoint

pytestmark = pytest.mark.torch_patch("0003")


def _dropout(t, p=0.5):
    # Dropout written with rand_like: the same RNG draw per element as F.dropout,
    # independent of the backend's native_dropout kernel.
    return t * (torch.rand_like(t) >= p) / (1 - p)


def test_compiled_checkpointed_dropout_backward_matches_forward_mask(neuron):
    torch._dynamo.reset()
    torch.manual_seed(0)
    x = torch.randn(16, 32, device=neuron, requires_grad=True)
    w = torch.randn(32, 32, device=neuron, requires_grad=True)

    def block(inp, weight):
        return _dropout(inp @ weight)

    def fn(inp, weight):
        return checkpoint(block, inp, weight, use_reentrant=False)

    out = torch.compile(fn, backend="aot_eager")(x, w)
    out.sum().backward()
    # d(sum(dropout(x @ w)))/dx = (mask * 2) @ w.T, where mask is the forward's kept set:
    # the recomputation in backward must draw the same mask.
    mask = (out.detach().cpu() != 0).float()
    expected = (mask * 2.0) @ w.detach().cpu().T
    torch.testing.assert_close(x.grad.cpu(), expected, rtol=1e-4, atol=1e-4)
