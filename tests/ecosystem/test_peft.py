"""PEFT LoRA fine-tuning of a tiny Llama on device "neuron" against the same run on CPU."""
from __future__ import annotations

import copy

import hf_models
import torch
import torch_neuron

STEPS = 5
BATCH = 4


def _fine_tune(model, device: str):
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    data = hf_models.ArithmeticSequences(BATCH * STEPS, seed=5).ids
    losses = []
    model.train()
    for step in range(STEPS):
        ids = data[step * BATCH:(step + 1) * BATCH].to(device)
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def test_lora_fine_tune_matches_cpu():
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(task_type="CAUSAL_LM", r=4, lora_alpha=8, lora_dropout=0.0,
                        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj"])
    torch.manual_seed(0)
    cpu_model = get_peft_model(hf_models.tiny_model("llama"), config)
    initial = {k: v.clone() for k, v in cpu_model.state_dict().items()}
    neuron_model = copy.deepcopy(cpu_model).to("neuron")

    cpu_losses = _fine_tune(cpu_model, "cpu")
    torch_neuron.clear_op_tracking()
    neuron_losses = _fine_tune(neuron_model, "neuron")
    executed = torch_neuron.get_executed_ops()
    assert sum(c["native"] for c in executed.values()) > 0, executed
    assert {p.device.type for p in neuron_model.parameters()} == {"neuron"}

    torch.testing.assert_close(torch.tensor(neuron_losses), torch.tensor(cpu_losses))
    assert cpu_losses[-1] < cpu_losses[0]
    trained = {k for k, p in cpu_model.named_parameters() if p.requires_grad}
    assert trained and all("lora_" in k for k in trained)
    neuron_state = neuron_model.state_dict()
    for name, value in cpu_model.state_dict().items():
        torch.testing.assert_close(neuron_state[name].cpu(), value, msg=lambda m, name=name: f"{name}: {m}")
        if name in trained and "lora_B" in name:
            assert not torch.equal(value, initial[name]), f"{name} did not train"
        if name not in trained:
            assert torch.equal(value, initial[name]), f"frozen {name} changed"
