# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""Device-numerics mode (TORCH_NEURON_DEVICE_NUMERICS): native ops take their values from
their tile kernels run by the ISA simulator. Every op of neuron_kernels' op table is either
checked here through public torch APIs against CPU, or listed as not reaching the backend."""

import copy
import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch
import torch.nn.functional as F
import torch_neuron
from torch import nn
from torch_neuron.native import estimate
from torch_neuron.native import numerics as device_numerics
from torch_neuron.native.install import executed_as

neuron_kernels = pytest.importorskip("neuron_kernels")

pytestmark = pytest.mark.timeout(300)

DEV = torch.device("neuron", 0)
DTYPES = [torch.float32, torch.bfloat16]
# bf16 results are compared after both sides rounded to bf16 (one ulp of 2^-8 relative,
# plus differences in fp32 accumulation order ahead of the rounding).
TOL = {torch.float32: {"rtol": 2e-4, "atol": 2e-4}, torch.bfloat16: {"rtol": 3e-2, "atol": 3e-2}}
# Ragged (not a multiple of 128, spanning two partition tiles) and 128-aligned shapes.
SHAPES = [(130, 70), (2, 128)]


def _rand(shape, dtype, seed, positive=False):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g)
    if positive:
        x = x.abs() + 0.5
    return x.to(dtype)


def _row(shape):
    return (shape[-1],)


# op -> (function of CPU-or-neuron inputs, input makers (shape, dtype) -> tensors).
# Each function calls public torch APIs; the backend executes the named ATen op.
def _unary(f, positive=False):
    return (f, lambda s, d: [_rand(s, d, 1, positive)])


def _binary(f, positive_rhs=False, rhs_shape=lambda s: s):
    return (f, lambda s, d: [_rand(s, d, 1), _rand(rhs_shape(s), d, 2, positive_rhs)])


def _grad_of(f):
    """d(sum(f(x) * w))/dx through autograd: the op's backward kernel."""
    def run(x, w):
        x = x.detach().requires_grad_()
        (f(x) * w).sum().backward()
        return x.grad
    return run


def _layer_norm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5)


def _layer_norm_grads(x, w, b, g):
    x, w, b = (t.detach().requires_grad_() for t in (x, w, b))
    F.layer_norm(x, (x.shape[-1],), w, b).backward(g)
    return x.grad, w.grad, b.grad


def _ln_inputs(s, d):
    return [_rand(s, d, 1), _rand(_row(s), d, 2), _rand(_row(s), d, 3)]


def _adamw_step(p, g, m, v):
    p = p.clone()
    p.grad = g.clone()
    opt = torch.optim.AdamW([p], lr=0.05, betas=(0.8, 0.9), weight_decay=0.1, fused=True)
    opt.state[p] = {"step": torch.tensor(2.0, device=p.device), "exp_avg": m.clone(), "exp_avg_sq": v.clone()}
    opt.step()
    return p.detach(), opt.state[p]["exp_avg"], opt.state[p]["exp_avg_sq"]


def _attention(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def _attention_grads(q, k, v, g):
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(g)
    return q.grad, k.grad, v.grad


def _qkv(s, d):
    # (batch, heads, sequence, head dim): the sequence takes the case's first size.
    return [_rand((1, 2, s[0], 16), d, seed) for seed in (1, 2, 3)]


CASES = {
    "aten::mm": (lambda a, b: a @ b, lambda s, d: [_rand(s, d, 1), _rand((s[1], 40), d, 2)]),
    "aten::bmm": (torch.bmm, lambda s, d: [_rand((3, *s), d, 1), _rand((3, s[1], 20), d, 2)]),
    "aten::addmm": (F.linear, lambda s, d: [_rand(s, d, 1), _rand((33, s[1]), d, 2), _rand((33,), d, 3)]),
    "aten::add.Tensor": _binary(torch.add, rhs_shape=_row),           # broadcast row
    "aten::sub.Tensor": _binary(torch.sub),
    "aten::mul.Tensor": _binary(lambda a, b: a * b),
    "aten::div.Tensor": _binary(torch.div, positive_rhs=True),
    "aten::maximum": _binary(torch.maximum),
    "aten::minimum": _binary(torch.minimum),
    # Numbers reach the backend as aten::add.Tensor / aten::mul.Tensor with a wrapped
    # number; those calls run the table's scalar kernels.
    "aten::add.Scalar": _unary(lambda a: a + 2.5),
    "aten::mul.Scalar": _unary(lambda a: -0.75 * a),
    "aten::exp": _unary(torch.exp),
    "aten::log": _unary(torch.log, positive=True),
    "aten::tanh": _unary(torch.tanh),
    "aten::sigmoid": _unary(torch.sigmoid),
    "aten::relu": _unary(torch.relu),
    "aten::gelu": _unary(lambda a: F.gelu(a, approximate="tanh")),
    "aten::silu": _unary(F.silu),
    "aten::sqrt": _unary(torch.sqrt, positive=True),
    "aten::rsqrt": _unary(torch.rsqrt, positive=True),
    "aten::neg": _unary(torch.neg),
    "aten::abs": _unary(torch.abs),
    "aten::reciprocal": _unary(torch.reciprocal, positive=True),
    "aten::gelu_backward": _binary(_grad_of(F.gelu)),
    "aten::silu_backward": _binary(_grad_of(F.silu)),
    "aten::sum.dim_IntList": _unary(lambda a: a.sum(0)),
    "aten::mean.dim": _unary(lambda a: a.mean(-1, keepdim=True)),
    "aten::amax": _unary(lambda a: a.amax(1)),
    "aten::amin": _unary(lambda a: a.amin(0, keepdim=True)),
    "aten::_softmax": _unary(lambda a: a.softmax(0)),
    "aten::_log_softmax": _unary(lambda a: a.log_softmax(-1)),
    "aten::native_layer_norm": (_layer_norm, _ln_inputs),
    "aten::native_layer_norm_backward": (_layer_norm_grads, lambda s, d: _ln_inputs(s, d) + [_rand(s, d, 4)]),
    # SDPA's fused path on neuron (the PrivateUse1 entry point) runs the flash kernels.
    "aten::_scaled_dot_product_flash_attention": (_attention, _qkv),
    "aten::_scaled_dot_product_flash_attention_backward": (
        _attention_grads, lambda s, d: _qkv(s, d) + [_rand((1, 2, s[0], 16), d, 4)]),
    "aten::_fused_adamw_": (_adamw_step, lambda s, d: [_rand(s, d, 1), _rand(s, d, 2), _rand(s, d, 3) * 0.1,
                                                       _rand(s, d, 4, positive=True) * 0.01]),
}

# Table ops the backend never executes under their own name: PyTorch decomposes them (or
# has no host kernel for them) before PrivateUse1 sees the call.
# Calls of the rows torch never hands to the backend (op table column ``dispatched`` says why).
NOT_REACHED = {
    "aten::matmul": lambda: torch.matmul(torch.randn(4, 8, device=DEV), torch.randn(8, 3, device=DEV)),
    "aten::linear": lambda: F.linear(torch.randn(4, 8, device=DEV), torch.randn(3, 8, device=DEV)),
    "aten::embedding": lambda: F.embedding(torch.tensor([1, 2], device=DEV), torch.randn(5, 8, device=DEV)),
    "aten::cross_entropy_loss": lambda: F.cross_entropy(torch.randn(4, 5, device=DEV),
                                                        torch.tensor([0, 1, 2, 3], device=DEV)),
    "aten::_fused_rms_norm": lambda: F.rms_norm(torch.randn(4, 8, device=DEV), (8,), eps=1e-6),
}


def _executed_names(op):
    return executed_as(neuron_kernels.table()[op])


def test_every_table_op_is_checked_or_listed_as_not_reached():
    table = neuron_kernels.table()
    # rows bound by the generated families' binders are checked in test_native_families.py
    from torch_neuron.native.families import FAMILY_BINDERS
    families = {op for op, e in table.items() if e.columns["binder"] in FAMILY_BINDERS
                or op in ("aten::max", "aten::min", "aten::any", "aten::any.dim", "aten::any.dims", "aten::all",
                          "aten::all.dim", "aten::all.dims")}
    dispatched = {op for op, e in table.items() if e.columns["dispatched"] is True}
    assert set(CASES) | (families & dispatched) == dispatched
    assert set(NOT_REACHED) == {op for op, e in table.items() if e.columns["dispatched"] is not True} - families


@pytest.mark.parametrize("op", sorted(NOT_REACHED))
def test_not_reached_ops_really_do_not_reach_the_backend(op, numerics):
    NOT_REACHED[op]()
    assert op not in torch_neuron.get_executed_ops()


# Bindings of the ops above that PyTorch does not hand to the backend, run on host tensors
# through the executor (what host execution would call): (args, results to fill, reference).
def _unreached_calls(dtype):
    """(args in ``dtype``, results as (fp32 reference on the same values, result dtype))."""
    x, w, b = _rand((130, 70), dtype, 1), _rand((33, 70), dtype, 2), _rand((33,), dtype, 3)
    idx = torch.randint(0, 33, (4, 9), generator=torch.Generator().manual_seed(0))
    tgt = torch.randint(0, 70, (130,), generator=torch.Generator().manual_seed(1))
    xf, wf, bf = (t.float() for t in (x, w, b))
    rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)
    f32 = torch.float32
    return {
        "aten::matmul": ([x, w.t().contiguous()], [(xf @ wf.t(), dtype)]),
        "aten::linear": ([x, w, b], [(F.linear(xf, wf, bf), dtype)]),
        "aten::embedding": ([w, idx, -1, False, False], [(F.embedding(idx, wf), dtype)]),
        "aten::cross_entropy_loss": ([x, tgt, None, 1, -100, 0.0], [(F.cross_entropy(xf, tgt), dtype)]),
        "aten::_fused_rms_norm": ([x, [70], b.new_ones(70) * 0.5, 1e-6], [(xf * rstd * 0.5, dtype), (rstd, f32)]),
    }


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", sorted(NOT_REACHED))
def test_bindings_of_ops_the_backend_does_not_receive(op, dtype):
    """What host execution would hand the executor, on host tensors, against fp32 references."""
    args, expect = _unreached_calls(dtype)[op]
    results = [torch.full(e[0].shape, float("nan"), dtype=e[1]) if isinstance(e, tuple) else e for e in expect]
    device_numerics.clear_device_numerics_stats()
    device_numerics.execute(op, op, {torch.float32: "Float", torch.bfloat16: "BFloat16"}[dtype], args, args, results)
    for r, e in zip(results, expect):
        if isinstance(e, tuple):
            torch.testing.assert_close(r.float(), e[0].to(e[1]).float(), **TOL[dtype])
    assert device_numerics.device_numerics_stats() == {(op, str(dtype)[6:]): 1}


def _compare(got, exp, dtype):
    got = got if isinstance(got, tuple) else (got,)
    exp = exp if isinstance(exp, tuple) else (exp,)
    assert len(got) == len(exp)
    for g, e in zip(got, exp):
        assert g.device.type == "neuron" and g.dtype == e.dtype and g.shape == e.shape
        torch.testing.assert_close(g.cpu().float(), e.float(), **TOL[dtype])


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", sorted(CASES))
def test_op_values_come_from_the_tile_kernel(op, dtype, shape, numerics):
    fn, make = CASES[op]
    if neuron_kernels.lookup(op, dtype) is None:
        pytest.skip(f"{op} has no {dtype} kernel in the op table")
    inputs = make(shape, dtype)
    expect = fn(*inputs)
    if dtype == torch.bfloat16:
        # CPU's bf16 kernels accumulate some reductions in bf16 (layer-norm weight grads are
        # off by ~0.3 at 130 rows); the reference is the fp32 computation on the same values.
        ref = fn(*[t.float() for t in inputs])
        expect = tuple(r.to(e.dtype) for r, e in zip(ref, expect)) if isinstance(ref, tuple) else ref.to(expect.dtype)
    torch_neuron.clear_device_numerics_stats()
    torch_neuron.clear_op_tracking()
    got = fn(*[t.to(DEV) for t in inputs])
    _compare(got, expect, dtype)
    dt = str(dtype).removeprefix("torch.")
    assert torch_neuron.device_numerics_stats().get((op, dt), 0) >= 1, torch_neuron.device_numerics_stats()
    # Counted native under one of its executed forms (abs runs as aten::abs.out, x + 2.5 as add.Tensor).
    counts = torch_neuron.get_executed_ops()
    assert any(c["native"] for c in counts.values()) and not any(c["fallback"] for o, c in counts.items()
                                                                    if o in _executed_names(op)), counts


def test_non_contiguous_and_out_forms(numerics):
    a = _rand((70, 130), torch.float32, 1).t()           # transposed view
    b = _rand((130, 70), torch.float32, 2)[:, ::1]
    out = torch.empty(130, 70, device=DEV)
    torch.add(a.to(DEV).t().contiguous().t(), b.to(DEV), out=out)
    torch.testing.assert_close(out.cpu(), a + b)
    x = a.to(DEV).t().contiguous().t()
    assert not x.is_contiguous()
    torch.testing.assert_close(torch.exp(x).cpu(), torch.exp(a))
    y = b.to(DEV)
    y.mul_(x)                                          # in place, reading a strided operand
    torch.testing.assert_close(y.cpu(), b * a)
    assert torch_neuron.device_numerics_stats() == {("aten::add.Tensor", "float32"): 1,
                                                    ("aten::exp", "float32"): 1,
                                                    ("aten::mul.Tensor", "float32"): 1}
    counts = torch_neuron.get_executed_ops()
    assert counts["aten::add.out"]["native"] == counts["aten::mul_.Tensor"]["native"] == 1


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_three_d_ragged_shapes_and_absent_optionals(dtype, numerics):
    x = _rand((3, 5, 33), dtype, 1)
    cases = {
        "aten::_softmax": lambda t: t.softmax(1),
        "aten::sum.dim_IntList": lambda t: t.sum(1, keepdim=True),
        "aten::amax": lambda t: t.amax(0),
        "aten::native_layer_norm": lambda t: F.layer_norm(t, (33,)),          # no weight, no bias
        "aten::native_layer_norm_backward": lambda t: _layer_norm_grads_no_affine(t),
        "aten::mul.Tensor": lambda t: t * t[:, :1, :],                        # broadcast middle dim
    }
    for op, fn in cases.items():
        torch_neuron.clear_device_numerics_stats()
        expect = fn(x.float()).to(dtype)
        torch.testing.assert_close(fn(x.to(DEV)).cpu().float(), expect.float(), **TOL[dtype])
        assert torch_neuron.device_numerics_stats().get((op, str(dtype)[6:]), 0) >= 1, (op, torch_neuron.device_numerics_stats())


def _layer_norm_grads_no_affine(x):
    x = x.detach().requires_grad_()
    F.layer_norm(x, (x.shape[-1],)).backward(_rand(x.shape, x.dtype, 9).to(x.device))
    return x.grad


@pytest.fixture
def exp_is_neg(monkeypatch):
    """The exp entry launches the neg kernel: only values computed by the kernel change."""
    from neuron_kernels import adapters
    monkeypatch.setattr(adapters, "exp", adapters.neg)


def test_wrong_kernel_gives_wrong_values_only_in_numerics_mode(exp_is_neg, numerics):
    x = _rand((130, 70), torch.float32, 1)
    torch.testing.assert_close(torch.exp(x.to(DEV)).cpu(), -x)
    torch_neuron.set_device_numerics(False)
    before = torch_neuron.device_numerics_stats()
    torch.testing.assert_close(torch.exp(x.to(DEV)).cpu(), torch.exp(x))
    assert torch_neuron.device_numerics_stats() == before   # mode off: host values, no kernel run


def test_mode_off_keeps_host_values_and_counts_native():
    assert not torch_neuron.device_numerics_enabled()
    torch_neuron.clear_device_numerics_stats()
    torch_neuron.clear_op_tracking()
    x = _rand((130, 70), torch.bfloat16, 1)
    assert torch.equal(torch.softmax(x.to(DEV), -1).cpu(), torch.softmax(x, -1))
    assert torch_neuron.get_executed_ops()["aten::_softmax"] == {"native": 1, "fallback": 0}
    assert torch_neuron.device_numerics_stats() == {}


@pytest.mark.parametrize("enabled", [False, True], ids=["mode-off", "mode-on"])
@pytest.mark.parametrize("case", ["fp64-alpha", "dtype-arg", "mixed-int64"])
def test_attributes_outside_the_kernel_fall_back_with_a_reason(case, enabled):
    torch_neuron.set_device_numerics(enabled)
    try:
        x = _rand((3, 5, 33), torch.float32, 1)
        y = _rand((3, 5, 33), torch.float32, 2)
        op, fn, reason = {
            "fp64-alpha": ("aten::add.Tensor", lambda a, b: torch.add(a, b.double(), alpha=2),
                           "kept on the host by the dtype policy"),
            "dtype-arg": ("aten::sum.dim_IntList", lambda a, b: a.bfloat16().sum(1, dtype=torch.float32),
                          "dtype=torch.float32"),
            "mixed-int64": ("aten::mul.Tensor", lambda a, b: a * b.long(), "kept on the host by the dtype policy"),
        }[case]
        torch_neuron.clear_op_tracking()
        torch_neuron.clear_device_numerics_stats()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")                 # the fallback's warn-once message
            got = fn(x.to(DEV), y.to(DEV))
        torch.testing.assert_close(got.cpu(), fn(x, y))
        assert torch_neuron.get_executed_ops()[op]["fallback"] == 1
        assert torch_neuron.get_executed_ops()[op]["native"] == 0
        reasons = [r for (o, _d, _s), r in torch_neuron.native_rejections().items() if o == op]
        assert any(reason in r for r in reasons), reasons
        assert not any(k[0] == op for k in torch_neuron.device_numerics_stats())
    finally:
        torch_neuron.set_device_numerics(False)


def test_decisions_are_cached_across_changing_learning_rates():
    from torch_neuron import _C
    calls = []

    def counting(op, entry, dtype, args):
        calls.append(op)
        return estimate.estimate(op, entry, dtype, args)
    _C.set_native_estimator(counting)                     # also empties the decision cache
    try:
        p = torch.nn.Parameter(torch.randn(130, 70, device=DEV))
        opt = torch.optim.AdamW([p], lr=1e-3, fused=True)
        for lr in (1e-3, 2e-3, 3e-3):                    # a schedule: a new lr every step
            opt.param_groups[0]["lr"] = lr
            p.grad = torch.randn_like(p)
            opt.step()
        assert calls.count("aten::_fused_adamw_") == 1, calls
    finally:
        _C.set_native_estimator(estimate.estimate)


def test_kernel_failures_surface_with_op_shapes_and_switch(monkeypatch, numerics):
    from neuron_kernels import adapters
    real = adapters.exp

    def failing(a):
        if isinstance(a, neuron_kernels.TensorSpec):
            return real(a)                              # the timing-only schedule still passes
        return adapters.layer_norm(a.reshape(1, -1))     # a 9100-element row: beyond the row tile
    monkeypatch.setattr(adapters, "exp", failing)
    x = torch.randn(130, 70, device=DEV)
    with pytest.raises(RuntimeError) as info:
        torch.exp(x)
    msg = str(info.value)
    assert "aten::exp" in msg and "(130, 70)" in msg and "TORCH_NEURON_DEVICE_NUMERICS" in msg
    assert "exceeds" in msg                           # the simulator's own reason


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_kernels_read_operands_in_device_memory_without_copies(monkeypatch, numerics, dtype):
    from neuron_kernels import adapters
    from torch_neuron.native import bridge
    real, seen = adapters.exp, []

    def recording(a):
        if not isinstance(a, neuron_kernels.TensorSpec):
            seen.append(a)
        return real(a)
    monkeypatch.setattr(adapters, "exp", recording)
    x = torch.randn(130, 70, device=DEV).to(dtype)
    y = torch.exp(x)
    assert len(seen) == 1
    # The operand the kernel read is the device tensor's bytes (its host alias), not a copy.
    assert seen[0].ctypes.data == bridge.host_view(x).ctypes.data
    torch.testing.assert_close(y.cpu().float(), torch.exp(x.cpu().float()).to(dtype).float(), **TOL[dtype])


def _mlp_gpt(vocab=40, d=32, heads=2):
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            B, T, C = x.shape
            q, k, v = (t.view(B, T, heads, C // heads).transpose(1, 2) for t in self.qkv(self.ln1(x)).split(C, -1))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, C)
            x = x + self.proj(y)
            return x + self.fc2(F.gelu(self.fc(self.ln2(x))))

    torch.manual_seed(0)
    return nn.Sequential(nn.Embedding(vocab, d), Block(), nn.LayerNorm(d), nn.Linear(d, vocab))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gpt_training_steps_match_cpu(dtype, numerics):
    vocab = 40
    cpu = _mlp_gpt(vocab).to(dtype)
    dev = copy.deepcopy(cpu).to(DEV)
    g = torch.Generator().manual_seed(1)
    idx, tgt = torch.randint(0, vocab, (2, 24), generator=g), torch.randint(0, vocab, (2, 24), generator=g)
    opts = [torch.optim.AdamW(m.parameters(), lr=1e-2, fused=dtype == torch.float32) for m in (cpu, dev)]
    losses = {"cpu": [], "neuron": []}
    for _ in range(3):
        for name, model, opt, device in (("cpu", cpu, opts[0], "cpu"), ("neuron", dev, opts[1], DEV)):
            loss = F.cross_entropy(model(idx.to(device)).view(-1, vocab).float(), tgt.to(device).view(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses[name].append(loss.item())
    tol = 1e-4 if dtype == torch.float32 else 3e-2
    assert losses["neuron"] == pytest.approx(losses["cpu"], rel=tol), losses
    assert losses["neuron"][-1] < losses["neuron"][0]
    ran = {op for op, _ in torch_neuron.device_numerics_stats()}
    want = {"aten::addmm", "aten::_scaled_dot_product_flash_attention",
            "aten::_scaled_dot_product_flash_attention_backward", "aten::native_layer_norm",
            "aten::native_layer_norm_backward", "aten::gelu", "aten::gelu_backward", "aten::mm"}
    if dtype == torch.float32:
        want.add("aten::_fused_adamw_")
    assert want <= ran, want - ran


def test_environment_variable_turns_the_mode_on_at_import():
    code = textwrap.dedent("""
        import torch, torch_neuron
        x = torch.randn(130, 70)
        y = torch.tanh(x.to("neuron")).cpu()
        torch.testing.assert_close(y, torch.tanh(x))
        print(torch_neuron.device_numerics_enabled(), torch_neuron.device_numerics_stats())
    """)
    env = dict(os.environ, TORCH_NEURON_DEVICE_NUMERICS="1", TORCH_NEURON_FALLBACK_WARN="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
                         check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True {('aten::tanh', 'float32'): 1}"


# Additive masks of the shapes models pass (padding rows (B, 1, 1, Sk), per-query (B, 1, Sq, Sk),
# per-head, 2-D), with -inf entries and a fully masked query row (torch's safe softmax gives 0).
# 600 keys take the kernel's online softmax over key blocks; 200 and 120 its one-pass softmax
# with heads side by side (2 and 4 of the 6 batch-heads per group, the last group short). The
# "short" cases have 100 queries and 90 keys: one block each, the backward's interleaved path.
MASKS = {"padding": (2, 1, 1, 600), "per_query": (2, 1, 130, 600), "per_head": (1, 3, 130, 600),
         "two_d": (130, 600), "padding_one_pass": (2, 1, 1, 200), "per_query_one_pass": (2, 1, 130, 200),
         "per_head_one_pass": (1, 3, 130, 120), "per_query_short": (2, 1, 100, 90), "per_head_short": (1, 3, 100, 90)}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("mask", sorted(MASKS))
def test_masked_attention_forward_and_backward_come_from_the_tile_kernel(mask, dtype, numerics):
    shape = MASKS[mask]
    sq, sk = (100 if mask.endswith("short") else 130), shape[-1]
    q, k, v = _rand((2, 3, sq, 32), dtype, 1), _rand((2, 3, sk, 32), dtype, 2), _rand((2, 3, sk, 32), dtype, 3)
    m = _rand(shape, dtype, 4)
    m.masked_fill_(_rand(shape, torch.float32, 5) > 0.5, float("-inf"))
    if len(shape) == 4 and shape[2] > 1:
        m[..., 7, :] = float("-inf")
    g = _rand((2, 3, sq, 32), dtype, 6)

    def run(*ts):
        q, k, v = (t.detach().requires_grad_() for t in ts[:3])
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=ts[3])
        out.backward(ts[4])
        return out, q.grad, k.grad, v.grad

    expect = run(*(t.float() for t in (q, k, v, m, g)))
    torch_neuron.clear_device_numerics_stats()
    before = torch_neuron.get_fallback_ops()
    got = run(*(t.to(DEV) for t in (q, k, v, m, g)))
    assert torch_neuron.get_fallback_ops() == before
    for a, b in zip(got, expect):
        torch.testing.assert_close(a.cpu().float(), b, **TOL[dtype])
    stats = torch_neuron.device_numerics_stats()
    dt = str(dtype)[6:]
    assert stats.get(("aten::_scaled_dot_product_flash_attention", dt), 0) == 1, stats
    assert stats.get(("aten::_scaled_dot_product_flash_attention_backward", dt), 0) == 1, stats


@pytest.mark.parametrize("operands", ["tensor_number", "number_tensor", "numbers"])
def test_where_with_number_operands(operands, numerics):
    """A bool mask turned additive (where(mask, 0, -inf)) and the other mixed forms stay native."""
    cond = _rand((2, 1, 20, 20), torch.float32, 1) > 0
    x = _rand((2, 1, 20, 20), torch.float32, 2)
    zero, ninf = torch.tensor(0.0), torch.tensor(float("-inf"))
    a, b = {"tensor_number": (x, ninf), "number_tensor": (zero, x), "numbers": (zero, ninf)}[operands]
    before = torch_neuron.get_fallback_ops()
    got = torch.where(cond.to(DEV), a.to(DEV), b.to(DEV))
    assert torch_neuron.get_fallback_ops() == before
    torch.testing.assert_close(got.cpu(), torch.where(cond, a, b))


@pytest.mark.parametrize("value", [1, -100, 2**33 + 5, -(2**40)])
def test_int64_fills_write_both_words_on_the_device(value, numerics):
    """Label paddings (-100), position offsets, large ids: the fill kernel writes (low, high) int32
    word pairs; words beyond 2**24 (not exact through the fp32 memset) stay on the host."""
    before = torch_neuron.get_fallback_ops()
    for shape in [(5, 7), (129, 3), (256,)]:
        got = torch.full(shape, value, dtype=torch.int64, device=DEV)
        torch.testing.assert_close(got.cpu(), torch.full(shape, value, dtype=torch.int64), rtol=0, atol=0)
        got.fill_(value + 1)
        torch.testing.assert_close(got.cpu(), torch.full(shape, value + 1, dtype=torch.int64), rtol=0, atol=0)
    assert torch_neuron.get_fallback_ops() == before
    torch.full((4,), 2**31 - 1, dtype=torch.int64, device=DEV)
    assert torch_neuron.get_fallback_ops().get("aten::fill_.Scalar", 0) == before.get("aten::fill_.Scalar", 0) + 1


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_log_softmax_of_a_fully_masked_row_is_uniform(dtype, numerics):
    # Attention masks fill with finfo.min: a row masked everywhere is log(1/C) on CPU, not 0.
    x = _rand((2, 18, 18), dtype, 3)
    x[0, 17] = torch.finfo(dtype).min
    got = torch.log_softmax(x.to(DEV), dim=2).cpu()
    torch.testing.assert_close(got, torch.log_softmax(x, dim=2), **TOL[dtype])
    assert ("aten::_log_softmax", str(dtype).removeprefix("torch.")) in torch_neuron.device_numerics_stats()
