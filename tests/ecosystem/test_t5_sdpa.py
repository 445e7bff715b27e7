# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""A tiny T5 from transformers trains on `neuron` as on CPU. T5 adds its relative position bias
to the attention mask, so scaled_dot_product_attention sees a mask that requires grad: CPU
takes the math path for it, and neuron must too (its fused kernel has no mask gradient)."""

import copy

import pytest
import torch
import torch_neuron

transformers = pytest.importorskip("transformers")

pytestmark = pytest.mark.timeout(300)

DEV = torch.device("neuron", 0)
FUSED_OP = "aten::_scaled_dot_product_fused_attention_overrideable"


def _tiny_t5():
    config = transformers.T5Config(
        vocab_size=48, d_model=16, d_kv=8, d_ff=32, num_layers=2, num_decoder_layers=2,
        num_heads=2, relative_attention_num_buckets=8, relative_attention_max_distance=16,
        dropout_rate=0.0, decoder_start_token_id=0, pad_token_id=0, attn_implementation="sdpa")
    torch.manual_seed(0)
    return transformers.T5ForConditionalGeneration(config)


def _batch():
    g = torch.Generator().manual_seed(1)
    input_ids = torch.randint(1, 48, (2, 7), generator=g)
    attention_mask = torch.ones(2, 7, dtype=torch.long)
    attention_mask[1, 5:] = 0  # padding: the encoder's mask is not all ones
    labels = torch.randint(1, 48, (2, 5), generator=g)
    return input_ids, attention_mask, labels


def _node_names(root):
    """Names of every node of the autograd graph below `root`, with repeats."""
    names, seen, todo = [], set(), [root]
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        names.append(node.name())
        todo.extend(next_fn for next_fn, _ in node.next_functions)
    return names


def _loss_and_grads(model, device):
    input_ids, attention_mask, labels = (t.to(device) for t in _batch())
    out = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
    nodes = _node_names(out.loss.grad_fn)
    out.loss.backward()
    grads = {n: p.grad for n, p in model.named_parameters()}
    return out.loss, grads, nodes


def test_tiny_t5_loss_and_every_gradient_match_cpu():
    cpu_model = _tiny_t5()
    assert cpu_model.config._attn_implementation == "sdpa"
    dev_model = copy.deepcopy(cpu_model).to(DEV)
    cpu_loss, cpu_grads, cpu_nodes = _loss_and_grads(cpu_model, "cpu")
    torch_neuron.clear_op_tracking()
    dev_loss, dev_grads, dev_nodes = _loss_and_grads(dev_model, DEV)
    ops = torch_neuron.get_executed_ops()
    # Self-attention masks carry the learned position bias (they require grad) and take the math
    # path on CPU; cross-attention masks do not, and take CPU's fused kernel. Neuron makes the
    # same choice for each of the 6 attention calls.
    cpu_fused = cpu_nodes.count("ScaledDotProductFlashAttentionForCpuBackward0")
    dev_fused = dev_nodes.count("ScaledDotProductFusedAttentionOverrideableBackward0")
    assert 0 < cpu_fused < 6
    assert dev_fused == cpu_fused
    assert sum(ops.get(FUSED_OP, {}).values()) == cpu_fused

    torch.testing.assert_close(dev_loss.cpu(), cpu_loss, rtol=1e-5, atol=1e-5)
    assert cpu_grads.keys() == dev_grads.keys()
    for name, g in cpu_grads.items():
        assert g is not None, name
        assert dev_grads[name] is not None, f"{name}: no gradient on neuron"
        assert dev_grads[name].device == DEV
        torch.testing.assert_close(dev_grads[name].cpu(), g, rtol=1e-4, atol=1e-5, msg=name)
    # The relative position bias is learned through the mask, so its gradient must be non-zero.
    bias_grads = [g for n, g in cpu_grads.items() if "relative_attention_bias" in n]
    assert bias_grads and all(g.abs().sum() > 0 for g in bias_grads)


def test_tiny_t5_eval_without_grad_matches_cpu():
    # Under no_grad the mask needs no gradient and CPU picks its fused kernel; neuron follows.
    cpu_model = _tiny_t5().eval()
    dev_model = copy.deepcopy(cpu_model).to(DEV)
    input_ids, attention_mask, labels = _batch()
    with torch.no_grad():
        want = cpu_model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).logits
        torch_neuron.clear_op_tracking()
        got = dev_model(input_ids=input_ids.to(DEV), attention_mask=attention_mask.to(DEV),
                        labels=labels.to(DEV)).logits
        ops = torch_neuron.get_executed_ops()
    torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-5)
    # No mask requires grad here: every attention call takes the fused kernel, on CPU as here.
    assert sum(ops[FUSED_OP].values()) == 6, ops.get(FUSED_OP)
