# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""Shared by the torch.compile tests: eager-vs-compiled training runs from one initial model."""
from __future__ import annotations

import copy

import torch

DEV = torch.device("neuron", 0)


def train(model, loss_fn, batches, amp=False, compile_=False, lr=1e-2):
    """Losses and final gradients of ``len(batches)`` SGD steps on ``model`` (moved to neuron)."""
    model = copy.deepcopy(model).to(DEV)
    fn = torch.compile(loss_fn, backend="neuron") if compile_ else loss_fn
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    losses = []
    for batch in batches:
        batch = [b.to(DEV) for b in batch]
        with torch.autocast("neuron", dtype=torch.bfloat16, enabled=amp):
            loss = fn(model, *batch)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach().float().cpu())
    grads = {n: p.grad.detach().float().cpu() for n, p in model.named_parameters() if p.grad is not None}
    return torch.stack(losses), grads


def assert_parity(model, loss_fn, batches, amp=False, rtol=None, atol=None):
    """Compiled training equals eager training on neuron (fp32 tolerance, or bf16's under autocast)."""
    tol = dict(rtol=2e-2, atol=2e-2) if amp else dict(rtol=1e-4, atol=1e-5)
    if rtol is not None:
        tol = dict(rtol=rtol, atol=atol)
    eager_losses, eager_grads = train(model, loss_fn, batches, amp)
    comp_losses, comp_grads = train(model, loss_fn, batches, amp, compile_=True)
    torch.testing.assert_close(comp_losses, eager_losses, **tol)
    assert comp_grads.keys() == eager_grads.keys()
    for name in eager_grads:
        torch.testing.assert_close(comp_grads[name], eager_grads[name], **tol,
                                   msg=lambda m, name=name: f"{name}: {m}")
