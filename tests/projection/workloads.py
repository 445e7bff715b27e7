"""Small programs run executed and shape-only; prints what must agree between the two runs.

    python tests/projection/workloads.py WORKLOAD (executed|shape-only)

Prints one JSON line: the launches in order (name, kind, cost model), their device time to the
nanosecond, the native/host decisions per op, and the allocator's high-water of tensor bytes
(host kernels' scratch apart).
"""
from __future__ import annotations

import json
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def char_gpt(compiled: bool = False):
    sys.path.insert(0, os.path.join(ROOT, "tools", "demo"))
    from train_char_gpt import CharGPT, GPTConfig

    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=65, seq_len=32, d_model=64, n_heads=4, n_layers=2, dropout=0.1)
    model = CharGPT(cfg).to("neuron")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    step_model = torch.compile(model, backend="neuron") if compiled else model
    g = torch.Generator().manual_seed(1)
    for _ in range(3):
        x = torch.randint(0, 65, (4, 32), generator=g).to("neuron")
        y = torch.randint(0, 65, (4, 32), generator=g).to("neuron")
        logits = step_model(x)
        loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def _llama():
    import transformers

    cfg = transformers.LlamaConfig(vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                   bos_token_id=1, eos_token_id=511, pad_token_id=0)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(cfg).to("neuron")


def llama_train():
    model = _llama()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    for _ in range(2):
        ids = torch.randint(2, 511, (2, 64), generator=g)
        mask = torch.ones_like(ids)
        mask[1, :8] = 0  # left padding: the masks carry values and decide as when executed
        out = model(input_ids=ids.to("neuron"), attention_mask=mask.to("neuron"), labels=ids.to("neuron"))
        out.loss.backward()
        opt.step()
        opt.zero_grad()


def llama_generate():
    model = _llama().eval()
    ids = torch.tensor([[1, 7, 9, 11, 13, 15]], device="neuron")
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=8, do_sample=False)
    assert out.shape[1] == ids.shape[1] + 8, out.shape


def bert_train():
    import transformers

    cfg = transformers.BertConfig(vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                                  num_attention_heads=4, max_position_embeddings=128)
    torch.manual_seed(0)
    model = transformers.BertForMaskedLM(cfg).to("neuron")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    for _ in range(2):
        ids = torch.randint(5, 512, (2, 48), generator=g)
        labels = torch.full_like(ids, -100)
        labels[:, ::5] = ids[:, ::5]
        out = model(input_ids=ids.to("neuron"), attention_mask=torch.ones_like(ids).to("neuron"),
                    labels=labels.to("neuron"))
        out.loss.backward()
        opt.step()
        opt.zero_grad()


WORKLOADS = {
    "char_gpt": char_gpt,
    "char_gpt_compiled": lambda: char_gpt(compiled=True),
    "llama_train": llama_train,
    "llama_generate": llama_generate,
    "bert_train": bert_train,
}


def main() -> None:
    import neuron_sim
    import torch_neuron
    from torch_neuron import _C
    from torch_neuron.projection import shape_only

    name, mode = sys.argv[1], sys.argv[2]
    torch_neuron.set_fallback_warnings("0")
    torch.neuron.synchronize()
    first = neuron_sim.timeline(0)[-1].sequence if neuron_sim.timeline(0) else -1
    torch.neuron.reset_peak_memory_stats()
    torch_neuron.clear_op_tracking()
    if mode == "shape-only":
        with shape_only() as run:
            WORKLOADS[name]()
        reads = run.summary["host_reads"]
    else:
        WORKLOADS[name]()
        reads = []
    torch.neuron.synchronize()
    records = [r for r in neuron_sim.timeline(0) if r.sequence > first]
    print(json.dumps({
        "launches": [[r.name, int(r.kind), int(r.model)] for r in records],
        "durations": [round(r.duration_ns, 3) for r in records],
        "device_ns": round(sum(r.duration_ns for r in records), 3),
        "ops": torch_neuron.get_executed_ops(),
        "tensor_peak_bytes": _C.memory_usage(0)["tensor_peak"],
        "scratch_peak_bytes": _C.memory_usage(0)["scratch_peak"],
        "host_reads": reads,
    }))


if __name__ == "__main__":
    main()
