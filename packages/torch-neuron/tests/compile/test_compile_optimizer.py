# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""A compiled optimizer step (``torch.compile`` of a function calling ``opt.step()``): its
``_foreach_*`` ops are split per parameter, each parameter's update is one fused kernel that
stores the new parameter and moments into their own buffers, and the values equal the eager
optimizer's."""
from __future__ import annotations

import statistics

import pytest
import torch
import torch_neuron
from compile_helpers import DEV
from torch import nn

pytestmark = pytest.mark.timeout(300)

OPTIMIZERS = {
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-2, betas=(0.9, 0.95), weight_decay=0.1),
    "adam": lambda ps: torch.optim.Adam(ps, lr=1e-2),
    "sgd_momentum": lambda ps: torch.optim.SGD(ps, lr=1e-2, momentum=0.9, weight_decay=1e-4),
}


def _model():
    torch.manual_seed(0)
    # A 1-element bias among the parameters: its list element is split too but is no chain.
    return nn.Sequential(nn.Linear(24, 64), nn.Tanh(), nn.Linear(64, 1)).to(DEV)


def _grads(model, seed):
    g = torch.Generator().manual_seed(seed)
    for p in model.parameters():
        p.grad = torch.randn(p.shape, generator=g).to(DEV)


def _run(name, compiled, steps=4):
    model = _model()
    opt = OPTIMIZERS[name](model.parameters())
    step = torch.compile(lambda: opt.step(), backend="neuron") if compiled else opt.step
    times = []
    for s in range(steps):
        _grads(model, s)
        torch.neuron.synchronize()
        t0 = torch_neuron.device_time_ns(DEV)
        step()
        torch.neuron.synchronize()
        times.append(torch_neuron.device_time_ns(DEV) - t0)
    return {n: p.detach().cpu() for n, p in model.named_parameters()}, opt, times


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_compiled_optimizer_step_matches_eager(name):
    eager, eager_opt, eager_ns = _run(name, compiled=False)
    torch_neuron.clear_compile_stats()
    comp, comp_opt, comp_ns = _run(name, compiled=True)
    for n in eager:
        torch.testing.assert_close(comp[n], eager[n], rtol=1e-5, atol=1e-6, msg=lambda m, n=n: f"{n}: {m}")
    for pe, pc in zip(eager_opt.state.values(), comp_opt.state.values()):
        for k in pe:
            torch.testing.assert_close(pc[k].cpu(), pe[k].cpu(), rtol=1e-5, atol=1e-6)
    s = torch_neuron.compile_stats()
    assert s["foreach_split"] > 0
    # Every parameter of more than one element has its update fused, writing the parameter (and
    # its momentum buffers) in place: 3 results for Adam(W), 2 for SGD with momentum, in the
    # graph of the steps after the first
    per_param = 2 if name == "sgd_momentum" else 3
    # (the first step's graph, which creates the optimizer state, is compiled too).
    assert s["inplace_results"] >= per_param * 3, s["fused_kernels"]
    # The per-parameter updates share one reference: their host references run as one batch.
    assert s["batched_kernels"] >= 2, s
    if name != "sgd_momentum":
        # Adam's step counters are updated in place; its bias corrections are vector ops.
        assert s["foreach_inplace"] >= 1 and s["foreach_stacked"] >= 4, s
    # After the first step (which compiles), the fused update moves each tensor once where the
    # eager foreach ops pass over it once per op.
    assert statistics.median(comp_ns[1:]) < 0.75 * statistics.median(eager_ns[1:]), (comp_ns, eager_ns)


def test_a_lone_list_op_stays_one_launch():
    """clip_grad_norm_'s scaling, compiled alone: one _foreach_mul_ over the gradients has no list
    op to fuse with, so it is not split into one launch per tensor."""
    model = _model()
    _grads(model, 0)
    grads = [p.grad for p in model.parameters()]
    ref = [g.cpu() * 0.5 for g in grads]
    torch.compile(lambda gs: torch._foreach_mul_(gs, 0.5), backend="neuron")(grads)
    for g, r in zip(grads, ref):
        torch.testing.assert_close(g.cpu(), r)
    assert torch_neuron.compile_stats()["foreach_split"] == 0


def test_device_numerics_compute_the_fused_update():
    """With device numerics on, the generated update kernels (lerp, addcmul, addcdiv expanded into
    engine steps) compute the new parameters and moments."""
    eager, eager_opt, _ = _run("adamw", compiled=False, steps=2)
    torch_neuron.clear_compile_stats()
    torch_neuron.set_device_numerics(True)
    try:
        comp, comp_opt, _ = _run("adamw", compiled=True, steps=2)
    finally:
        torch_neuron.set_device_numerics(False)
    for n in eager:
        torch.testing.assert_close(comp[n], eager[n], rtol=1e-5, atol=1e-5, msg=lambda m, n=n: f"{n}: {m}")
    for pe, pc in zip(eager_opt.state.values(), comp_opt.state.values()):
        for k in pe:
            torch.testing.assert_close(pc[k].cpu(), pe[k].cpu(), rtol=1e-5, atol=1e-6)
    s = torch_neuron.compile_stats()
    assert s["numerics_launches"] == s["fused_launches"] > 0


def _eager_and_compiled(f, shape, numerics=False):
    """((result, x after), on CPU eager; (result, x after), compiled on neuron) of ``f(x, y)``,
    which updates ``x`` in place."""
    torch.manual_seed(0)
    x0, y = torch.randn(shape), torch.randn(shape)
    xe = x0.clone()
    re = f(xe, y)
    xc = x0.to(DEV)
    torch_neuron.set_device_numerics(numerics)
    try:
        rc = torch.compile(f, backend="neuron")(xc, y.to(DEV))
    finally:
        torch_neuron.set_device_numerics(False)
    return (re, xe), (rc.cpu(), xc.cpu())


@pytest.mark.parametrize("numerics", [False, True], ids=["host_reference", "device_numerics"])
def test_result_stored_into_an_input_read_later_in_the_chain(numerics):
    """The chain writes ``x``'s new value into ``x`` and also reads the old ``x`` after computing
    it: the store must not reach the later read."""
    def f(x, y):
        new = x * y + 1.0
        r = (new * x).exp()     # reads the old x after new is computed
        x.copy_(new)
        return r

    (re, xe), (rc, xc) = _eager_and_compiled(f, (256, 48), numerics)
    torch.testing.assert_close(rc, re, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(xc, xe, rtol=1e-6, atol=1e-6)
    s = torch_neuron.compile_stats()
    assert s["inplace_results"] == 1 and len(s["fused_kernels"]) == 1, s
    if numerics:
        assert s["numerics_launches"] == 1


def test_in_place_update_starts_only_after_the_inputs_last_read():
    """The host reference updates ``x`` in place from the op that starts the new value (``x * 0.9``
    becomes ``mul_``) only when nothing reads ``x`` after that op: here ``sigmoid`` reads the old
    ``x`` in between, so the update stays out of place; in ``g`` it is in place."""
    def f(x, y):
        a = x * 0.9
        b = (x * y).sigmoid()      # reads the old x after x * 0.9
        x.copy_(a + b)
        return b

    def g(x, y):
        b = (y * 2.0).sigmoid()
        x.copy_(x * 0.9 + b)
        return b

    for fn in (f, g):
        torch_neuron.clear_compile_stats()
        (re, xe), (rc, xc) = _eager_and_compiled(fn, (128, 40))
        torch.testing.assert_close(rc, re, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(xc, xe, rtol=1e-6, atol=1e-6)
        assert torch_neuron.compile_stats()["inplace_results"] == 1


def test_input_read_outside_the_chain_is_not_overwritten():
    """An input another node reads outside the fused chain keeps its copy_: no in-place store."""
    def f(x, y):
        new = (x * y + 1.0).sigmoid()
        s = x.sum()          # a reduction over every dim: not part of the chain
        x.copy_(new)
        return s

    (se, xe), (sc, xc) = _eager_and_compiled(f, (64, 32))
    torch.testing.assert_close(sc, se, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(xc, xe)
    assert torch_neuron.compile_stats()["inplace_results"] == 0



def test_independent_chains_of_one_structure_run_as_a_batch():
    """Chains with the same ops over tensors of different shapes, none reading another's result,
    run as one batch on the host (``_foreach_*`` forms, and per member for ``relu``, which has
    none); a chain of the same ops that reads a batched result is not part of that batch. Values
    and results written to fresh tensors equal eager's."""
    def f(xs, ys):
        outs = [torch.relu(torch.sigmoid(x * 2.0 + y) - 0.6) for x, y in zip(xs, ys)]
        # The same ops again over (a function of) the first result: it depends on the batch.
        c = outs[0].cumsum(0)     # not a chain op: the chain after it is a chain of its own
        outs.append(torch.relu(torch.sigmoid(c * 2.0 + ys[0]) - 0.6))
        return outs

    torch.manual_seed(0)
    shapes = [(64, 48), (33, 7), (200,), (5, 3, 16)]
    xs, ys = [torch.randn(s) for s in shapes], [torch.randn(s) for s in shapes]
    expect = f(xs, ys)
    torch_neuron.clear_compile_stats()
    got = torch.compile(f, backend="neuron")([x.to(DEV) for x in xs], [y.to(DEV) for y in ys])
    for g, e in zip(got, expect):
        assert g.device.type == "neuron" and g.shape == e.shape
        torch.testing.assert_close(g.cpu(), e, rtol=0, atol=0)
    s = torch_neuron.compile_stats()
    assert len(s["fused_kernels"]) == len(shapes) + 1, s["fused_kernels"]
    assert s["batched_kernels"] == len(shapes), s


@pytest.mark.parametrize("device", ["neuron", "cpu"])
def test_list_ops_over_scalars_run_over_the_stacked_values(device):
    """List ops over 0-d tensors (an optimizer's bias corrections) become one op each over the
    stacked values, elements read back as 0-d views; the values equal the list ops' own, for
    step counters on the device and on the host, and the counters are updated in place."""
    def f(steps, ps):
        torch._foreach_add_(steps, 1)
        bc1 = torch._foreach_pow(0.9, steps)
        torch._foreach_sub_(bc1, 1)
        torch._foreach_neg_(bc1)
        bc2 = torch._foreach_sqrt(torch._foreach_neg(torch._foreach_sub(torch._foreach_pow(0.999, steps), 1.0)))
        rev = torch._foreach_mul(bc1[::-1], 2.0)     # a list of the elements in another order
        return [p * b + c for p, b, c in zip(ps, bc1, bc2)], list(bc2) + list(rev)

    shapes = [(8, 16), (33,), (4, 4, 4)]
    steps = [torch.tensor(float(k + 1)) for k in range(len(shapes))]
    torch.manual_seed(0)
    ps = [torch.randn(s) for s in shapes]
    expect_steps = [t.clone() for t in steps]
    want, want_bc2 = f(expect_steps, ps)
    dsteps = [t.to(device) for t in steps]
    torch_neuron.clear_compile_stats()
    got, got_bc2 = torch.compile(f, backend="neuron")(dsteps, [p.to(DEV) for p in ps])
    for g, w in zip(list(got) + list(got_bc2), list(want) + list(want_bc2)):
        torch.testing.assert_close(g.cpu(), w, rtol=1e-6, atol=1e-6)
    for t, e in zip(dsteps, expect_steps):
        assert t.device.type == device and t.item() == e.item() == 2.0 + (t is dsteps[1]) + 2 * (t is dsteps[2])
    s = torch_neuron.compile_stats()
    assert s["foreach_stacked"] == 8 and s["foreach_inplace"] == 1, s
