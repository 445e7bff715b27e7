# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""Sparse (COO, CSR) and quantized tensors on `neuron`, as CUDA supports them: results match
CPU, and every result -- including the dense parts of sparse tensors and the quantizer's
per-channel tensors -- stays on neuron (host execution never hands back a CPU tensor)."""

import copy

import pytest
import torch
import torch_neuron
from torch import nn

pytestmark = pytest.mark.timeout(120)

DEV = torch.device("neuron", 0)


def _on_neuron(t):
    assert t.device == DEV, t.device
    if t.layout == torch.sparse_coo:
        assert t._indices().device == DEV and t._values().device == DEV
    elif t.layout == torch.sparse_csr:
        assert t.crow_indices().device == DEV and t.col_indices().device == DEV and t.values().device == DEV
    return t


def _sparse_pair(seed=0):
    g = torch.Generator().manual_seed(seed)
    i = torch.tensor([[0, 1, 1, 3, 0], [2, 0, 2, 1, 2]])
    v = torch.randn(5, generator=g)
    cpu = torch.sparse_coo_tensor(i, v, (4, 3))
    return cpu, torch.sparse_coo_tensor(i.to(DEV), v.to(DEV), (4, 3))


def test_sparse_coo_construction_and_ops_match_cpu():
    cpu, dev = _sparse_pair()
    _on_neuron(dev)
    assert dev.layout == torch.sparse_coo and not dev.is_coalesced()
    moved = _on_neuron(cpu.to("neuron"))
    assert moved._nnz() == 5 and moved.sparse_dim() == 2 and moved.dense_dim() == 0
    dense = torch.randn(3, 2)
    for f in (lambda s: s.coalesce(), lambda s: s.to_dense(), lambda s: s * 2.0, lambda s: s + s,
              lambda s: torch.sparse.sum(s, dim=0), lambda s: s.t().coalesce()):
        torch.testing.assert_close(f(dev).cpu().to_dense(), f(cpu).to_dense())
        out = f(dev)
        _on_neuron(out)
    c = _on_neuron(dev.coalesce())
    assert c.is_coalesced() and c._nnz() == 4
    torch.testing.assert_close(torch.sparse.mm(dev, dense.to(DEV)).cpu(), torch.sparse.mm(cpu, dense))
    torch.testing.assert_close((dev.to_dense() + dev).cpu(), cpu.to_dense() + cpu)
    back = dev.cpu()
    assert back.device.type == "cpu" and back.layout == torch.sparse_coo
    torch.testing.assert_close(back.to_dense(), cpu.to_dense())
    # A dense neuron tensor converts on the device.
    x = torch.tensor([[0.0, 1.5, 0.0], [2.0, 0.0, 0.0]])
    torch.testing.assert_close(_on_neuron(x.to(DEV).to_sparse()).cpu().to_dense(), x)


def test_in_place_sparse_ops_write_through_to_the_neuron_tensor():
    cpu, dev = _sparse_pair()
    acc_cpu, acc_dev = cpu.coalesce(), dev.coalesce()
    acc_cpu.add_(cpu)
    acc_dev.add_(dev)
    _on_neuron(acc_dev)
    torch.testing.assert_close(acc_dev.cpu().to_dense(), acc_cpu.to_dense())
    dense_cpu, dense_dev = torch.zeros(4, 3), torch.zeros(4, 3, device=DEV)
    dense_cpu.add_(cpu, alpha=0.5)
    dense_dev.add_(dev, alpha=0.5)
    torch.testing.assert_close(dense_dev.cpu(), dense_cpu)
    acc_dev.zero_()
    assert acc_dev._nnz() == 0 and _on_neuron(acc_dev).to_dense().abs().sum().item() == 0


def test_sparse_csr_matches_cpu():
    x = torch.tensor([[0.0, 1.0, 0.0, 2.0], [0.0, 0.0, 0.0, 0.0], [3.0, 0.0, 4.0, 0.0]])
    csr_cpu = x.to_sparse_csr()
    csr_dev = _on_neuron(x.to(DEV).to_sparse_csr())
    assert csr_dev.layout == torch.sparse_csr and csr_dev._nnz() == 4
    torch.testing.assert_close(csr_dev.crow_indices().cpu(), csr_cpu.crow_indices())
    torch.testing.assert_close(csr_dev.col_indices().cpu(), csr_cpu.col_indices())
    w = torch.randn(4, 2, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close((csr_dev @ w.to(DEV)).cpu(), csr_cpu @ w)
    torch.testing.assert_close(csr_dev.to_dense().cpu(), x)
    torch.testing.assert_close(_on_neuron(csr_cpu.to("neuron")).to_dense().cpu(), x)


def test_sparse_op_without_a_cpu_kernel_raises_naming_the_neuron_key():
    _, dev = _sparse_pair()
    with pytest.raises(NotImplementedError, match="Sparseneuron"):
        torch.cumsum(dev, 0)


def _embedding_bag_model(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Embedding(20, 6, sparse=True), nn.Flatten(), nn.Linear(18, 2))


def _train_sparse(model, make_opts, device, steps=4):
    opts = make_opts(model)
    g = torch.Generator().manual_seed(3)
    losses = []
    for _ in range(steps):
        idx = torch.randint(0, 20, (5, 3), generator=g).to(device)
        y = torch.randn(5, 2, generator=g).to(device)
        for o in opts:
            o.zero_grad()
        loss = nn.functional.mse_loss(model(idx), y)
        loss.backward()
        grad = model[0].weight.grad
        assert grad.layout == torch.sparse_coo and grad.device.type == device.type
        for o in opts:
            o.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("make_opts", [
    lambda m: [torch.optim.SGD(m.parameters(), lr=0.1)],
    lambda m: [torch.optim.SparseAdam(list(m[0].parameters()), lr=0.05),
               torch.optim.Adam(list(m[2].parameters()), lr=0.05)],
    lambda m: [torch.optim.Adagrad(m.parameters(), lr=0.1)],
], ids=["SGD", "SparseAdam", "Adagrad"])
def test_sparse_embedding_training_matches_cpu(make_opts):
    cpu_model = _embedding_bag_model()
    dev_model = copy.deepcopy(cpu_model).to(DEV)
    cpu_losses = _train_sparse(cpu_model, make_opts, torch.device("cpu"))
    dev_losses = _train_sparse(dev_model, make_opts, DEV)
    torch.testing.assert_close(dev_losses, cpu_losses, rtol=1e-5, atol=1e-6)
    for (name, p_dev), p_cpu in zip(dev_model.named_parameters(), cpu_model.parameters()):
        assert p_dev.device == DEV, name
        torch.testing.assert_close(p_dev.detach().cpu(), p_cpu.detach(), rtol=1e-5, atol=1e-6, msg=name)


def test_quantized_per_tensor_views_match_cpu():
    x = torch.randn(4, 6, generator=torch.Generator().manual_seed(0))
    q_cpu = torch.quantize_per_tensor(x, 0.05, 3, torch.qint8)
    q_dev = torch.quantize_per_tensor(x.to(DEV), 0.05, 3, torch.qint8)
    assert q_dev.device == DEV and q_dev.is_quantized and q_dev.qscheme() == torch.per_tensor_affine
    assert (q_dev.q_scale(), q_dev.q_zero_point()) == (0.05, 3)
    views = (lambda q: q.t(), lambda q: q[1:3, ::2], lambda q: q.view(3, 8), lambda q: q.reshape(2, 12),
             lambda q: q.permute(1, 0)[2], lambda q: q.unsqueeze(0).expand(2, 4, 6), lambda q: q.select(1, 4),
             lambda q: q.narrow(0, 1, 2), lambda q: q.flatten())
    for view in views:
        v_dev, v_cpu = view(q_dev), view(q_cpu)
        assert v_dev.device == DEV and v_dev.is_quantized
        assert v_dev.untyped_storage().data_ptr() == q_dev.untyped_storage().data_ptr()  # a view, no copy
        assert v_dev.shape == v_cpu.shape and v_dev.stride() == v_cpu.stride()
        torch.testing.assert_close(v_dev.int_repr().cpu(), v_cpu.int_repr())
        torch.testing.assert_close(v_dev.dequantize().cpu(), v_cpu.dequantize())
    torch.testing.assert_close(q_dev.cpu().int_repr(), q_cpu.int_repr())
    torch.testing.assert_close(_on_neuron(q_cpu.to(DEV)).int_repr().cpu(), q_cpu.int_repr())
    c = q_dev.t().contiguous()
    assert c.device == DEV and c.is_contiguous()
    torch.testing.assert_close(c.int_repr().cpu(), q_cpu.t().contiguous().int_repr())


def test_quantized_per_channel_keeps_its_parameters_on_neuron():
    x = torch.randn(3, 5, generator=torch.Generator().manual_seed(1))
    scales, zps = torch.tensor([0.1, 0.02, 0.05], dtype=torch.float64), torch.tensor([0, 2, -1])
    q_cpu = torch.quantize_per_channel(x, scales, zps, 0, torch.qint8)
    q_dev = torch.quantize_per_channel(x.to(DEV), scales.to(DEV), zps.to(DEV), 0, torch.qint8)
    assert q_dev.device == DEV and q_dev.qscheme() == torch.per_channel_affine
    assert q_dev.q_per_channel_scales().device == DEV
    torch.testing.assert_close(q_dev.q_per_channel_scales().cpu(), q_cpu.q_per_channel_scales())
    torch.testing.assert_close(q_dev.int_repr().cpu(), q_cpu.int_repr())
    torch.testing.assert_close(q_dev[:, 1:4].dequantize().cpu(), q_cpu[:, 1:4].dequantize())


def test_sparse_and_quantized_host_execution_is_counted_as_fallback():
    torch_neuron.clear_op_tracking()
    _, dev = _sparse_pair()
    dev.coalesce()
    torch.quantize_per_tensor(torch.ones(3, device=DEV), 0.1, 0, torch.quint8).dequantize()
    fallbacks = torch_neuron.get_fallback_ops()
    assert any("coalesce" in op for op in fallbacks), fallbacks
    assert any("quantize_per_tensor" in op for op in fallbacks), fallbacks
