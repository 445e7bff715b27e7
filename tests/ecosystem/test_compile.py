"""Paths where transformers compiles for device "neuron" with torch.compile(backend="neuron").

TorchNeuron registers a Dynamo backend named "neuron" and transformers relies on it:
`TrainingArguments(torch_compile=True)` sets `torch_compile_backend="neuron"` on neuron
(CPU gets "inductor"), and `generate()` with a compilable (static) cache compiles the decoding
step with `CompileConfig(backend="neuron")` on neuron (CPU does not compile). Both compare with
CPU eager runs (ARCHITECTURE.md §4.6).
"""
from __future__ import annotations

import copy

import hf_models
import torch


def test_trainer_with_torch_compile(tmp_path):
    args = hf_models.trainer_arguments(str(tmp_path), 1, torch_compile=True)
    assert args.torch_compile_backend == "neuron"
    _, logged = hf_models.train("llama", args)
    # CPU eager: compiled training must equal eager training (and Inductor's C++ build of the
    # CPU run would take minutes on a small machine).
    reference = hf_models.train("llama", hf_models.trainer_arguments(str(tmp_path / "cpu"), 1, use_cpu=True))[1]
    torch.testing.assert_close(torch.tensor(logged["loss"]), torch.tensor(reference["loss"]), rtol=1e-4, atol=0)


def test_generate_with_static_cache():
    cpu_model = hf_models.tiny_model("llama")
    neuron_model = copy.deepcopy(cpu_model).to("neuron")
    prompt = torch.randint(2, hf_models.VOCAB, (2, 6), generator=torch.Generator().manual_seed(3))
    kwargs = {"max_new_tokens": 20, "do_sample": False, "cache_implementation": "static", "pad_token_id": 1}
    expected = cpu_model.generate(input_ids=prompt, attention_mask=torch.ones_like(prompt), **kwargs)
    ids = prompt.to("neuron")
    out = neuron_model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), **kwargs)
    assert torch.equal(out.cpu(), expected)
