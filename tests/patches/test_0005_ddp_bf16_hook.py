"""0005 (F06): DDP's bf16_compress_hook registers and compresses on neuron."""

import copy

import pytest
import torch
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

pytestmark = pytest.mark.torch_patch("0005")


def test_bf16_compress_hook_on_neuron_gives_bf16_rounded_gradients(neuron, process_group):
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 8).to(neuron)
    reference = copy.deepcopy(model)
    x = torch.randn(4, 16, device=neuron)
    reference(x).square().sum().backward()
    expected = reference.weight.grad.cpu().to(torch.bfloat16).float()

    with process_group("neuron"):
        ddp = DDP(model)
        ddp.register_comm_hook(None, default_hooks.bf16_compress_hook)
        ddp(x).square().sum().backward()
        got = model.weight.grad.cpu()
    torch.testing.assert_close(got, expected, rtol=0, atol=0)
    assert not torch.equal(got, reference.weight.grad.cpu()), "gradient was not compressed"
