"""0002 (F02): GradScaler() / ShardedGradScaler() without a device must scale on neuron."""

import pytest
import torch
from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

pytestmark = pytest.mark.torch_patch("0002")


def test_default_grad_scaler_scales_neuron_loss(neuron):
    scaler = torch.amp.GradScaler()
    assert scaler.is_enabled(), "GradScaler() disabled itself on a neuron host"
    loss = torch.tensor(3.0, device=neuron)
    assert scaler.scale(loss).item() == 3.0 * 2.0**16


def test_default_grad_scaler_keeps_small_fp16_gradients(neuron):
    # The fp16 gradient of w.half() is 1e-8, which underflows to 0 unless the loss is scaled.
    w = torch.nn.Parameter(torch.ones(4, device=neuron))
    opt = torch.optim.SGD([w], lr=1.0)
    scaler = torch.amp.GradScaler()
    loss = (w.half() * 1e-4).float().sum() * 1e-4
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    torch.testing.assert_close(w.grad.cpu(), torch.full((4,), 1e-8), rtol=1e-2, atol=0.0)


def test_default_sharded_grad_scaler_scales_neuron_loss(neuron):
    scaler = ShardedGradScaler()
    assert scaler.is_enabled(), "ShardedGradScaler() disabled itself on a neuron host"
    loss = torch.tensor(3.0, device=neuron)
    assert scaler.scale(loss).item() == 3.0 * 2.0**16
