# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""Training on `neuron` matches training on CPU: optimizers, tied weights, modules
with device-specific kernels (convolution, fused RNN cells) and DataLoader pinning."""

import copy
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

pytestmark = pytest.mark.timeout(120)

DEV = torch.device("neuron", 0)


def _data(n=32, d_in=6, d_out=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d_in, generator=g), torch.randn(n, d_out, generator=g)


def _mlp(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))


def _train(model, opt, x, y, steps):
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


OPTIMIZERS = {
    "sgd_momentum": lambda p, fe: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-2, foreach=fe),
    "adam": lambda p, fe: torch.optim.Adam(p, lr=1e-2, foreach=fe),
    "adam_amsgrad": lambda p, fe: torch.optim.Adam(p, lr=1e-2, amsgrad=True, weight_decay=1e-3, foreach=fe),
    "adamw": lambda p, fe: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1, foreach=fe),
}


@pytest.mark.parametrize("foreach", [True, False], ids=["foreach", "single_tensor"])
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizer_training_parity_with_cpu(name, foreach):
    x, y = _data()
    cpu_model = _mlp()
    dev_model = copy.deepcopy(cpu_model).to("neuron")
    init = [p.detach().clone() for p in cpu_model.parameters()]
    cpu_opt = OPTIMIZERS[name](cpu_model.parameters(), foreach)
    dev_opt = OPTIMIZERS[name](dev_model.parameters(), foreach)
    cpu_losses = _train(cpu_model, cpu_opt, x, y, 6)
    dev_losses = _train(dev_model, dev_opt, x.to("neuron"), y.to("neuron"), 6)

    assert cpu_losses[-1] < cpu_losses[0]  # the run actually trains
    torch.testing.assert_close(torch.tensor(dev_losses), torch.tensor(cpu_losses), rtol=1e-5, atol=1e-6)
    for p_dev, p_cpu, p0 in zip(dev_model.parameters(), cpu_model.parameters(), init):
        assert p_dev.device == DEV
        assert not torch.equal(p_cpu, p0)
        torch.testing.assert_close(p_dev.detach().cpu(), p_cpu.detach(), rtol=1e-5, atol=1e-6)
    # optimizer state lives on the device too
    for state in dev_opt.state.values():
        for v in state.values():
            if torch.is_tensor(v) and v.dim() > 0:
                assert v.device == DEV


def test_grad_clipping_and_accumulation_parity():
    x, y = _data(n=16)
    cpu_model = _mlp(1)
    dev_model = copy.deepcopy(cpu_model).to("neuron")
    norms = []
    for model, xx, yy in ((cpu_model, x, y), (dev_model, x.to("neuron"), y.to("neuron"))):
        for half in (slice(0, 8), slice(8, 16)):  # two micro-batches accumulate into .grad
            F.mse_loss(model(xx[half]), yy[half]).backward()
        norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), 0.05).item())
    assert norms[0] > 0.05
    assert norms[1] == pytest.approx(norms[0], rel=1e-5)
    for p_dev, p_cpu in zip(dev_model.parameters(), cpu_model.parameters()):
        torch.testing.assert_close(p_dev.grad.cpu(), p_cpu.grad, rtol=1e-5, atol=1e-7)


LOSSES = {
    "mse": lambda x, y, c: F.mse_loss(x, y),
    "l1_sum": lambda x, y, c: F.l1_loss(x, y, reduction="sum"),
    "smooth_l1": lambda x, y, c: F.smooth_l1_loss(x, y, beta=0.5),
    "huber": lambda x, y, c: F.huber_loss(x, y),
    "bce_logits": lambda x, y, c: F.binary_cross_entropy_with_logits(x, torch.sigmoid(y)),
    "kl_div": lambda x, y, c: F.kl_div(F.log_softmax(x, 1), F.softmax(y, 1), reduction="batchmean"),
    "cross_entropy_smooth": lambda x, y, c: F.cross_entropy(x, c, label_smoothing=0.1),
    "nll_none": lambda x, y, c: F.nll_loss(F.log_softmax(x, 1), c, reduction="none"),
}


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_losses_match_cpu_without_extra_warnings(name):
    x, y = _data(n=8, d_in=3, d_out=3, seed=5)
    cls = torch.tensor([0, 2, 1, 1, 0, 2, 2, 0])
    results = []
    for dev in ("cpu", "neuron"):
        xx = x.to(dev, copy=True).requires_grad_()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            loss = LOSSES[name](xx, y.to(dev), cls.to(dev))
            loss.sum().backward()
        # fallback notices are the backend's own, documented warnings; anything else is not
        msgs = sorted(str(w.message) for w in caught if "no native neuron kernel" not in str(w.message))
        results.append((loss, xx.grad, msgs))
    (l_cpu, g_cpu, w_cpu), (l_dev, g_dev, w_dev) = results
    assert w_dev == w_cpu
    torch.testing.assert_close(l_dev.detach().cpu(), l_cpu.detach(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(g_dev.cpu(), g_cpu, rtol=1e-5, atol=1e-6)


class TiedLM(nn.Module):
    def __init__(self, vocab=20, dim=8):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.mix = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, idx):
        return self.head(torch.tanh(self.mix(self.emb(idx))))


def test_to_neuron_keeps_tied_weights_and_parameter_identity():
    torch.manual_seed(0)
    model = TiedLM()
    params_before = list(model.parameters())
    ids_before = [id(p) for p in params_before]
    model.to("neuron")
    assert model.head.weight is model.emb.weight
    assert [id(p) for p in model.parameters()] == ids_before
    assert all(p.device == DEV for p in model.parameters())
    model.to("neuron:1")
    assert model.head.weight is model.emb.weight
    assert model.emb.weight.device == torch.device("neuron", 1)
    model.to("cpu")
    assert model.head.weight is model.emb.weight


@pytest.mark.parametrize("make, shape", [
    (lambda: nn.LazyLinear(4), (3, 5)),
    (lambda: nn.LazyConv2d(4, 3), (2, 3, 6, 6)),
    (lambda: nn.Sequential(nn.LazyConv1d(2, 3), nn.LazyBatchNorm1d(), nn.Flatten(), nn.LazyLinear(3)), (2, 3, 7)),
], ids=["LazyLinear", "LazyConv2d", "lazy-stack"])
def test_lazy_modules_moved_to_neuron_infer_shapes_like_cpu(make, shape):
    # Module.to keeps Parameter objects on neuron; a lazy module's must stay uninitialized, so
    # the first forward infers the input size as it does on CPU and after construction on neuron.
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
    dev_mod = make().to("neuron")
    assert all(isinstance(p, nn.parameter.UninitializedParameter) for p in dev_mod.parameters())
    assert all(p.device == DEV for p in dev_mod.parameters())
    out_dev = dev_mod(x.to("neuron"))
    assert all(type(p) is nn.Parameter and p.device == DEV for p in dev_mod.parameters())
    # The device initialises from its own generator: CPU runs with the weights neuron drew.
    cpu_mod = make()
    cpu_mod(x)
    cpu_mod.load_state_dict({k: v.cpu() for k, v in dev_mod.state_dict().items()})
    torch.testing.assert_close(out_dev.detach().cpu(), cpu_mod(x).detach(), rtol=1e-5, atol=1e-5)
    out_dev.sum().backward()
    assert all(p.grad is not None and p.grad.device == DEV for p in dev_mod.parameters())


def test_param_data_assignment_moves_between_cpu_and_neuron():
    # `p.data = t` across devices works on CUDA; code that moves weights this way
    # (older training loops, weight loaders) must not fail on neuron.
    p = nn.Parameter(torch.arange(3.0))
    p.data = p.data.to("neuron")
    assert isinstance(p, nn.Parameter) and p.device == DEV
    assert torch.equal(p.detach().cpu(), torch.arange(3.0))
    p.data = torch.zeros(3)
    assert p.device.type == "cpu"


def test_optimizer_built_before_move_trains_tied_model_like_cpu():
    # Ordinary scripts build the optimizer before (or after) .to(device); with Parameter
    # identity kept, both orders must train the same tied model the same way.
    idx = torch.randint(0, 20, (4, 6), generator=torch.Generator().manual_seed(0))
    target = torch.randint(0, 20, (4, 6), generator=torch.Generator().manual_seed(1))
    torch.manual_seed(0)
    cpu_model = TiedLM()
    dev_model = copy.deepcopy(cpu_model)
    init = cpu_model.emb.weight.detach().clone()
    cpu_opt = torch.optim.SGD(cpu_model.parameters(), lr=0.5)
    dev_opt = torch.optim.SGD(dev_model.parameters(), lr=0.5)
    dev_model.to("neuron")
    for model, opt, i, t in ((cpu_model, cpu_opt, idx, target),
                             (dev_model, dev_opt, idx.to("neuron"), target.to("neuron"))):
        for _ in range(3):
            opt.zero_grad()
            F.cross_entropy(model(i).flatten(0, 1), t.flatten()).backward()
            opt.step()
    assert dev_model.head.weight is dev_model.emb.weight
    assert not torch.equal(cpu_model.emb.weight.detach(), init)
    for (name, p_dev), p_cpu in zip(dev_model.named_parameters(), cpu_model.parameters()):
        assert p_dev.device == DEV, name
        torch.testing.assert_close(p_dev.detach().cpu(), p_cpu.detach(), rtol=1e-5, atol=1e-6, msg=name)


# ---------------------------------------------------------------- modules with device-specific kernels

def _fwd_bwd_parity(make_module, make_input, rtol=1e-5, atol=1e-5):
    torch.manual_seed(0)
    cpu_mod = make_module()
    dev_mod = copy.deepcopy(cpu_mod).to("neuron")
    x = make_input()
    x_cpu = x.clone().requires_grad_()
    x_dev = x.to("neuron").requires_grad_()
    outs = []
    for mod, inp in ((cpu_mod, x_cpu), (dev_mod, x_dev)):
        out = mod(inp)
        out = out[0] if isinstance(out, tuple) else out
        g = torch.Generator().manual_seed(7)
        grad_out = torch.randn(out.shape, generator=g).to(out.device)
        (out * grad_out).sum().backward()
        outs.append(out)
    torch.testing.assert_close(outs[1].detach().cpu(), outs[0].detach(), rtol=rtol, atol=atol)
    torch.testing.assert_close(x_dev.grad.cpu(), x_cpu.grad, rtol=rtol, atol=atol)
    for (name, p_dev), p_cpu in zip(dev_mod.named_parameters(), cpu_mod.parameters()):
        assert p_dev.grad is not None, name
        assert p_dev.grad.abs().sum().item() > 0, name
        torch.testing.assert_close(p_dev.grad.cpu(), p_cpu.grad, rtol=rtol, atol=atol, msg=name)


def test_conv2d_forward_backward_parity():
    _fwd_bwd_parity(lambda: nn.Conv2d(4, 6, 3, stride=2, padding=1), lambda: torch.randn(2, 4, 9, 9))


def test_grouped_dilated_conv2d_and_conv1d_parity():
    _fwd_bwd_parity(lambda: nn.Conv2d(4, 8, 3, padding=2, dilation=2, groups=2, bias=False),
                    lambda: torch.randn(2, 4, 7, 6))
    _fwd_bwd_parity(lambda: nn.Conv1d(3, 5, 4, stride=2), lambda: torch.randn(3, 3, 17))
    _fwd_bwd_parity(lambda: nn.ConvTranspose2d(3, 2, 3, stride=2), lambda: torch.randn(1, 3, 5, 5))


def test_lstm_forward_backward_parity():
    _fwd_bwd_parity(lambda: nn.LSTM(5, 7, num_layers=2, batch_first=True), lambda: torch.randn(3, 6, 5))


def test_gru_forward_backward_parity():
    _fwd_bwd_parity(lambda: nn.GRU(5, 7, bidirectional=True), lambda: torch.randn(6, 3, 5))


class TwoSteps(nn.Module):
    """Apply a recurrent cell twice so the hidden-to-hidden weights get gradients."""

    def __init__(self, cell):
        super().__init__()
        self.cell = cell

    def forward(self, x):
        h = self.cell(x)
        h = self.cell(x, h)
        return h[0] if isinstance(h, tuple) else h


def test_lstm_and_gru_cells_parity():
    _fwd_bwd_parity(lambda: TwoSteps(nn.LSTMCell(4, 6)), lambda: torch.randn(3, 4))
    _fwd_bwd_parity(lambda: TwoSteps(nn.GRUCell(4, 6)), lambda: torch.randn(3, 4))


# ---------------------------------------------------------------- DataLoader

@pytest.mark.parametrize("num_workers", [0, 1])
def test_dataloader_pin_memory_feeds_device(num_workers):
    x, y = _data(n=40)
    loader = DataLoader(TensorDataset(x, y), batch_size=8, shuffle=False, pin_memory=True,
                        num_workers=num_workers, timeout=30 if num_workers else 0)
    total_dev = torch.zeros((), device="neuron")
    n_batches = 0
    for xb, yb in loader:
        assert xb.is_pinned() and yb.is_pinned()
        xd, yd = xb.to("neuron", non_blocking=True), yb.to("neuron", non_blocking=True)
        total_dev += (xd.sum() - yd.sum())
        n_batches += 1
    torch.neuron.synchronize()
    assert n_batches == 5
    torch.testing.assert_close(total_dev.cpu(), x.sum() - y.sum(), rtol=1e-5, atol=1e-5)
