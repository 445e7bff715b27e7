"""accelerate's seeding and checkpointing on device "neuron" (they call torch.neuron's RNG API)."""
from __future__ import annotations

import torch


def test_set_seed_seeds_the_neuron_generator():
    from accelerate.utils import set_seed

    set_seed(7)
    first = torch.randn(64, device="neuron").cpu()
    set_seed(7)
    again = torch.randn(64, device="neuron").cpu()
    set_seed(8)
    other = torch.randn(64, device="neuron").cpu()
    assert torch.equal(first, again)
    assert not torch.equal(first, other)


def test_save_state_and_load_state_round_trip(tmp_path):
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)
    accelerator = Accelerator()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model, opt = accelerator.prepare(model, opt)
    x = torch.randn(32, 8, device=accelerator.device)

    def step():
        loss = model(x).square().mean()
        accelerator.backward(loss)
        opt.step()
        opt.zero_grad()
        return loss.item()

    step()
    accelerator.save_state(str(tmp_path / "ckpt"))
    saved_params = [p.detach().cpu().clone() for p in model.parameters()]
    expected_noise = torch.randn(16, device="neuron").cpu()
    expected_losses = [step() for _ in range(3)]

    accelerator.load_state(str(tmp_path / "ckpt"))
    for p, saved in zip(model.parameters(), saved_params):
        assert p.device.type == "neuron"
        assert torch.equal(p.detach().cpu(), saved)
    # The neuron generator is part of the saved random states.
    assert torch.equal(torch.randn(16, device="neuron").cpu(), expected_noise)
    assert [step() for _ in range(3)] == expected_losses
