"""model.generate() on device "neuron": greedy decoding with the dynamic KV cache gives CPU's tokens."""
from __future__ import annotations

import copy

import hf_models
import pytest
import torch
import torch_neuron

PROMPT_LEN = 6
NEW_TOKENS = 20


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_greedy_generate_matches_cpu(kind):
    from transformers import DynamicCache

    cpu_model = hf_models.tiny_model(kind)
    neuron_model = copy.deepcopy(cpu_model).to("neuron")
    prompt = torch.randint(2, hf_models.VOCAB, (2, PROMPT_LEN), generator=torch.Generator().manual_seed(3))
    outputs = {}
    for device, model in (("cpu", cpu_model), ("neuron", neuron_model)):
        torch_neuron.clear_op_tracking()
        ids = prompt.to(device)
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=NEW_TOKENS,
                             do_sample=False, return_dict_in_generate=True, pad_token_id=model.config.eos_token_id)
        assert isinstance(out.past_key_values, DynamicCache), type(out.past_key_values)
        outputs[device] = out
    executed = torch_neuron.get_executed_ops()
    assert sum(c["native"] for c in executed.values()) > 0, executed
    assert outputs["neuron"].sequences.device.type == "neuron"
    assert outputs["neuron"].past_key_values.layers[0].keys.device.type == "neuron"
    cpu_tokens, neuron_tokens = outputs["cpu"].sequences, outputs["neuron"].sequences.cpu()
    assert cpu_tokens.shape == (2, PROMPT_LEN + NEW_TOKENS)
    assert torch.equal(neuron_tokens, cpu_tokens), f"neuron {neuron_tokens.tolist()}\ncpu    {cpu_tokens.tolist()}"
