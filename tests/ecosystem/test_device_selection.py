"""transformers and accelerate choose device "neuron" by themselves: no argument, no variable."""
from __future__ import annotations

import torch


def test_detection_predicates_of_both_libraries():
    from accelerate.utils import is_neuron_available
    from transformers.utils import (
        is_torch_neuron_available,
        is_torch_neuroncore_available,
    )

    assert is_torch_neuron_available() and is_torch_neuron_available(check_device=True)
    assert is_neuron_available() and is_neuron_available(check_device=True)
    # The XLA-era check (torch_xla + torch_neuronx) must stay off: it would route to torch_xla.
    assert not is_torch_neuroncore_available(check_device=False)


def test_training_arguments_pick_neuron(tmp_path):
    from transformers import TrainingArguments

    args = TrainingArguments(output_dir=str(tmp_path), report_to="none")
    assert args.device == torch.device("neuron", 0)
    assert args.n_gpu == 1
    assert torch.neuron.current_device() == 0
    cpu = TrainingArguments(output_dir=str(tmp_path), report_to="none", use_cpu=True)
    assert cpu.device == torch.device("cpu")


def test_accelerator_picks_neuron_and_places_the_model():
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState
    from accelerate.utils import DistributedType

    AcceleratorState._reset_state(reset_partial_state=True)
    accelerator = Accelerator()
    assert accelerator.device.type == "neuron"
    assert accelerator.distributed_type == DistributedType.NO
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4)
    reference = model(torch.ones(2, 8))
    prepared = accelerator.prepare(model)
    assert {p.device.type for p in prepared.parameters()} == {"neuron"}
    out = prepared(torch.ones(2, 8, device=accelerator.device))
    assert out.device.type == "neuron"
    torch.testing.assert_close(out.cpu(), reference)
