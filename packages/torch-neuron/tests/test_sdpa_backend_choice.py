# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""scaled_dot_product_attention on `neuron` takes the backend CPU takes for the same arguments
(CPU's fused flash kernel runs on neuron as _scaled_dot_product_fused_attention_overrideable;
everything else takes the math decomposition), and its values and gradients match CPU's.

The choice is observed three ways on neuron: torch._fused_sdp_choice, the aten ops that ran
(torch_neuron.get_executed_ops) and the autograd node of the result; on CPU through
torch._fused_sdp_choice and the autograd node."""

import contextlib
import dataclasses

import pytest
import torch
import torch.nn.functional as F
import torch_neuron
from torch.nn.attention import SDPBackend, sdpa_kernel

pytestmark = pytest.mark.timeout(180)

DEV = torch.device("neuron", 0)
FUSED_OP = "aten::_scaled_dot_product_fused_attention_overrideable"
CPU_FUSED_NODE = "ScaledDotProductFlashAttentionForCpuBackward0"
NEURON_FUSED_NODE = "ScaledDotProductFusedAttentionOverrideableBackward0"
# What each device's torch._fused_sdp_choice answers for its fused kernel and for math.
CPU_CHOICE = {int(SDPBackend.FLASH_ATTENTION): "fused", int(SDPBackend.MATH): "math"}
NEURON_CHOICE = {int(SDPBackend.OVERRIDEABLE): "fused", int(SDPBackend.MATH): "math"}


@dataclasses.dataclass
class Case:
    name: str
    q: tuple
    k: tuple = None            # defaults to q's shape
    v: tuple = None            # defaults to k's shape
    mask: tuple = None
    mask_dtype: torch.dtype = None
    dtype: torch.dtype = torch.float32
    k_dtype: torch.dtype = None    # defaults to dtype
    qkv_grad: bool = False
    mask_grad: bool = False
    grad_mode: bool = True
    dropout_p: float = 0.0
    is_causal: bool = False
    scale: float = None
    enable_gqa: bool = False
    # Builds a tensor of the given shape whose last dim is not contiguous.
    transpose_last: tuple = ()     # names among "q", "k", "v", "mask"
    backends: list = None          # sdpa_kernel(backends) around the call
    expect: str = None             # the backend CPU takes, stated so the sweep covers both


B, H, L, S, E = 2, 3, 5, 7, 8

CASES = [
    Case("plain", (B, H, L, E), expect="fused"),
    Case("cross_attention", (B, H, L, E), (B, H, S, E), expect="fused"),
    Case("scale", (B, H, L, E), scale=0.3, expect="fused"),
    Case("qkv_require_grad", (B, H, L, E), qkv_grad=True, expect="fused"),
    Case("qkv_require_grad_no_grad_mode", (B, H, L, E), qkv_grad=True, grad_mode=False, expect="fused"),
    Case("mask_2d", (B, H, L, E), (B, H, S, E), mask=(L, S), expect="fused"),
    Case("mask_4d", (B, H, L, E), (B, H, S, E), mask=(B, H, L, S), qkv_grad=True, expect="fused"),
    Case("mask_4d_broadcast", (B, H, L, E), (B, H, S, E), mask=(1, H, 1, S), qkv_grad=True, expect="fused"),
    Case("mask_2d_query_broadcast", (B, H, L, E), (B, H, S, E), mask=(1, S), qkv_grad=True, expect="fused"),
    Case("mask_4d_batch_broadcast", (B, H, L, E), (B, H, S, E), mask=(B, 1, L, S), qkv_grad=True,
         expect="fused"),
    Case("mask_3d", (B, H, L, E), (B, H, S, E), mask=(1, L, S), qkv_grad=True, expect="math"),
    Case("mask_bool", (B, H, L, E), (B, H, S, E), mask=(L, S), mask_dtype=torch.bool, qkv_grad=True,
         expect="fused"),
    Case("mask_requires_grad", (B, H, L, E), (B, H, S, E), mask=(1, H, L, S), mask_grad=True,
         qkv_grad=True, expect="math"),
    Case("mask_requires_grad_alone", (B, H, L, E), (B, H, S, E), mask=(L, S), mask_grad=True,
         expect="math"),
    Case("mask_requires_grad_no_grad_mode", (B, H, L, E), (B, H, S, E), mask=(L, S), mask_grad=True,
         grad_mode=False, expect="math"),
    Case("mask_last_dim_not_contiguous", (B, H, L, E), (B, H, S, E), mask=(B, H, L, S),
         transpose_last=("mask",), qkv_grad=True, expect="fused"),
    Case("dropout", (B, H, L, E), dropout_p=0.25, expect="math"),
    Case("dropout_require_grad", (B, H, L, E), dropout_p=0.25, qkv_grad=True, expect="math"),
    Case("float64", (B, H, L, E), dtype=torch.float64, qkv_grad=True, expect="fused"),
    Case("bfloat16", (B, H, L, E), dtype=torch.bfloat16, qkv_grad=True, expect="fused"),
    Case("float16", (B, H, L, E), dtype=torch.float16, qkv_grad=True, expect="fused"),
    Case("float_mask_float64_inputs", (B, H, L, E), mask=(L, L), mask_dtype=torch.float32,
         dtype=torch.float64, qkv_grad=True, expect="fused"),
    Case("float16_mask_float32_inputs", (B, H, L, E), mask=(L, L), mask_dtype=torch.float16,
         expect="fused"),
    Case("dtypes_differ", (B, H, L, E), qkv_grad=True, k_dtype=torch.float64, expect="math"),
    Case("integer_inputs", (B, H, L, E), dtype=torch.int64, expect="math"),
    Case("value_head_dim_differs", (B, H, L, E), (B, H, S, E), (B, H, S, 6), qkv_grad=True, expect="math"),
    Case("gqa", (B, 6, L, E), (B, 2, S, E), qkv_grad=True, enable_gqa=True, expect="fused"),
    Case("gqa_mask", (B, 6, L, E), (B, 2, S, E), mask=(L, S), qkv_grad=True, enable_gqa=True,
         expect="fused"),
    Case("heads_differ_without_gqa", (B, 6, L, E), (B, 2, S, E), qkv_grad=True, expect="math"),
    Case("is_causal", (B, H, L, E), qkv_grad=True, is_causal=True, expect="fused"),
    Case("is_causal_cross", (B, H, L, E), (B, H, S, E), qkv_grad=True, is_causal=True, expect="fused"),
    Case("is_causal_with_mask", (B, H, L, E), mask=(L, L), qkv_grad=True, is_causal=True,
         expect="fused"),
    Case("rank_2", (L, E), (S, E), qkv_grad=True, expect="math"),
    Case("rank_3", (H, L, E), (H, S, E), qkv_grad=True, expect="math"),
    Case("rank_5", (2, B, H, L, E), (2, B, H, S, E), qkv_grad=True, expect="math"),
    Case("ranks_differ", (B, H, L, E), (H, S, E), qkv_grad=True, expect="math"),
    Case("batch_broadcast", (B, H, L, E), (1, H, S, E), qkv_grad=True, expect="math"),
    Case("zero_query_length", (B, H, 0, E), (B, H, S, E), qkv_grad=True, expect="math"),
    Case("zero_key_length", (B, H, L, E), (B, H, 0, E), expect="math"),
    Case("query_last_dim_not_contiguous", (B, H, L, E), transpose_last=("q",), qkv_grad=True,
         expect="math"),
    Case("value_last_dim_not_contiguous", (B, H, L, E), (B, H, S, E), transpose_last=("v",),
         qkv_grad=True, expect="math"),
    Case("head_major_layout", (B, H, L, E), transpose_last=("bhle",), qkv_grad=True, expect="fused"),
    Case("sdpa_kernel_math", (B, H, L, E), qkv_grad=True, backends=[SDPBackend.MATH], expect="math"),
    Case("sdpa_kernel_flash", (B, H, L, E), qkv_grad=True, backends=[SDPBackend.FLASH_ATTENTION],
         expect="fused"),
    Case("sdpa_kernel_flash_with_dropout", (B, H, L, E), dropout_p=0.25,
         backends=[SDPBackend.FLASH_ATTENTION]),
    Case("sdpa_kernel_overrideable_only", (B, H, L, E), backends=[SDPBackend.OVERRIDEABLE]),
    Case("sdpa_kernel_efficient_only", (B, H, L, E), backends=[SDPBackend.EFFICIENT_ATTENTION]),
]


def _tensor(shape, dtype, gen, not_contiguous_last):
    if not_contiguous_last:
        # Same sizes, last dim of stride != 1: a transposed view of the last two dims.
        t = torch.randn(*shape[:-2], shape[-1], shape[-2], generator=gen).transpose(-1, -2)
    else:
        t = torch.randn(*shape, generator=gen)
    return t.to(dtype) if dtype.is_floating_point else t.mul(4).to(dtype)


def _head_major(shape, gen, dtype):
    # [B, L, H, E] memory seen as [B, H, L, E]: not contiguous, but the last dim has stride 1.
    b, h, l, e = shape
    return torch.randn(b, l, h, e, generator=gen).to(dtype).transpose(1, 2)


def _inputs(case):
    gen = torch.Generator().manual_seed(0)
    kshape = case.k or case.q
    vshape = case.v or kshape
    tensors = {}
    for name, shape in (("q", case.q), ("k", kshape), ("v", vshape)):
        if "bhle" in case.transpose_last:
            tensors[name] = _head_major(shape, gen, case.dtype)
        else:
            dtype = case.k_dtype if name == "k" and case.k_dtype else case.dtype
            tensors[name] = _tensor(shape, dtype, gen, name in case.transpose_last)
    if case.mask is not None:
        mdtype = case.mask_dtype or case.dtype
        if mdtype == torch.bool:
            m = torch.rand(*case.mask, generator=gen) > 0.3
            m[..., 0] = True  # every row attends somewhere
        else:
            m = _tensor(case.mask, mdtype, gen, "mask" in case.transpose_last)
        tensors["mask"] = m
    return tensors


def _to(tensors, device, case):
    out = {}
    for name, t in tensors.items():
        d = t.to(device, copy=True)  # a leaf of its own, with the view's strides where it can
        if d.stride() != t.stride():
            d = torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=device).copy_(t)
        wants_grad = case.mask_grad if name == "mask" else case.qkv_grad
        out[name] = d.requires_grad_(wants_grad and t.dtype.is_floating_point)
    return out


def _ctx(case):
    stack = contextlib.ExitStack()
    if case.backends is not None:
        stack.enter_context(sdpa_kernel(case.backends))
    if not case.grad_mode:
        stack.enter_context(torch.no_grad())
    return stack


def _choice_args(t, case):
    return ((t["q"], t["k"], t["v"], t.get("mask"), case.dropout_p, case.is_causal),
            {"scale": case.scale, "enable_gqa": case.enable_gqa})


def _run(t, case):
    return F.scaled_dot_product_attention(t["q"], t["k"], t["v"], attn_mask=t.get("mask"),
                                          dropout_p=case.dropout_p, is_causal=case.is_causal,
                                          scale=case.scale, enable_gqa=case.enable_gqa)


def _attempt(fn):
    try:
        return fn(), None
    except (RuntimeError, ValueError, IndexError, NotImplementedError) as e:
        # the same mistake must fail the same way on both devices
        return None, e


def _tolerances(dtype):
    if dtype in (torch.float32, torch.float64):
        return {"rtol": 1e-5, "atol": 1e-5}
    return {}  # assert_close's defaults for the 16-bit types


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_backend_choice_values_and_gradients_match_cpu(case):
    host = _inputs(case)
    c, d = _to(host, "cpu", case), _to(host, DEV, case)
    for name in d:
        assert d[name].stride() == c[name].stride(), name

    with _ctx(case):
        args, kwargs = _choice_args(c, case)
        cpu_choice, cpu_choice_err = _attempt(lambda: torch._fused_sdp_choice(*args, **kwargs))
        args, kwargs = _choice_args(d, case)
        dev_choice, dev_choice_err = _attempt(lambda: torch._fused_sdp_choice(*args, **kwargs))
        cpu_out, cpu_err = _attempt(lambda: _run(c, case))
        torch_neuron.clear_op_tracking()
        dev_out, dev_err = _attempt(lambda: _run(d, case))
        ran_fused = FUSED_OP in torch_neuron.get_executed_ops()

    assert type(dev_choice_err) is type(cpu_choice_err), (cpu_choice_err, dev_choice_err)
    if cpu_choice_err is None:
        want = CPU_CHOICE[cpu_choice]
        assert NEURON_CHOICE.get(dev_choice) == want, (cpu_choice, dev_choice)
        if case.expect is not None:
            assert want == case.expect, "CPU's rule changed: the sweep no longer covers this condition"
    else:
        assert case.expect is None, cpu_choice_err
    assert type(dev_err) is type(cpu_err), (cpu_err, dev_err)
    if cpu_err is not None:
        return
    assert ran_fused == (want == "fused"), sorted(torch_neuron.get_executed_ops())
    if cpu_out.requires_grad:
        assert (cpu_out.grad_fn.name() == CPU_FUSED_NODE) == (want == "fused"), cpu_out.grad_fn.name()
        assert (dev_out.grad_fn.name() == NEURON_FUSED_NODE) == (want == "fused"), dev_out.grad_fn.name()

    assert dev_out.device == DEV and dev_out.shape == cpu_out.shape and dev_out.dtype == cpu_out.dtype
    if case.dropout_p > 0:
        return  # the dropout masks come from each device's own generator
    tol = _tolerances(case.dtype)
    torch.testing.assert_close(dev_out.detach().cpu(), cpu_out.detach(), **tol)
    if not cpu_out.requires_grad:
        return
    grad = torch.randn(cpu_out.shape, generator=torch.Generator().manual_seed(1)).to(cpu_out.dtype)
    wrt = [n for n in ("q", "k", "v", "mask") if n in c and c[n].requires_grad]
    cpu_grads = torch.autograd.grad(cpu_out, [c[n] for n in wrt], grad)
    dev_grads = torch.autograd.grad(dev_out, [d[n] for n in wrt], grad.to(DEV))
    for n, gc, gd in zip(wrt, cpu_grads, dev_grads):
        assert gd.device == DEV, n
        torch.testing.assert_close(gd.cpu(), gc, msg=f"grad of {n}", **tol)


def test_mask_that_requires_grad_gets_its_gradient():
    # T5-style: a learned bias added to the scores through attn_mask.
    gen = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(2, 2, 4, 8, generator=gen) for _ in range(3))
    bias = torch.randn(1, 2, 4, 4, generator=gen)
    grads = {}
    for dev in ("cpu", DEV):
        qd, kd, vd, bd = (t.to(dev, copy=True).requires_grad_() for t in (q, k, v, bias))
        out = F.scaled_dot_product_attention(qd, kd, vd, attn_mask=bd * 2.0)
        out.square().sum().backward()
        grads[str(dev)] = [t.grad.cpu() for t in (qd, kd, vd, bd)]
    for gc, gd in zip(grads["cpu"], grads[str(DEV)]):
        assert gc.abs().sum() > 0
        torch.testing.assert_close(gd, gc, rtol=1e-5, atol=1e-5)


def test_fused_kernel_called_directly_with_a_mask_gradient_names_the_math_backend():
    q = torch.randn(1, 2, 3, 4, device=DEV, requires_grad=True)
    bias = torch.randn(3, 3, device=DEV, requires_grad=True)
    out = torch.ops.aten._scaled_dot_product_fused_attention_overrideable(q, q, q, bias)[0]
    with pytest.raises(RuntimeError, match="SDPBackend.MATH"):
        out.sum().backward()


NESTED_REFUSED = r"does not support nested tensors .*to_padded_tensor"


@pytest.mark.parametrize("which", ["query", "all"])
def test_strided_nested_tensors_are_refused_with_what_to_do_instead(which):
    parts = [torch.randn(2, 3, 8), torch.randn(2, 5, 8)]
    nt = torch.nested.nested_tensor(parts, device=DEV)
    dense = torch.randn(2, 2, 4, 8, device=DEV)
    q, kv = (nt, nt) if which == "all" else (nt, dense)
    with pytest.raises(NotImplementedError, match=NESTED_REFUSED):
        F.scaled_dot_product_attention(q, kv, kv)


def test_jagged_nested_tensors_with_a_ragged_sequence_are_refused():
    # [B, H, j, E]: the common layout, which CPU runs through strided nested tensors.
    parts = [torch.randn(3, 2, 8), torch.randn(4, 2, 8)]
    cpu = torch.nested.nested_tensor(parts, layout=torch.jagged).transpose(1, 2)
    assert F.scaled_dot_product_attention(cpu, cpu, cpu).is_nested
    nt = torch.nested.nested_tensor([p.to(DEV) for p in parts], layout=torch.jagged).transpose(1, 2)
    with pytest.raises(NotImplementedError, match=r"nested tensors \(query: nested \(torch\.jagged\).*to_padded_tensor"):
        F.scaled_dot_product_attention(nt, nt, nt)


def test_jagged_nested_tensors_with_a_dense_sequence_match_cpu():
    # Ragged in an outer dim, dense sequence: SDPA runs over the dense buffer on either device.
    g = torch.Generator().manual_seed(3)
    parts = [torch.randn(n, 2, 3, 8, generator=g) for n in (2, 3)]
    outs = {}
    for dev in ("cpu", DEV):
        nt = torch.nested.nested_tensor([p.to(dev) for p in parts], layout=torch.jagged)
        outs[str(dev)] = [t.cpu() for t in F.scaled_dot_product_attention(nt, nt, nt).unbind()]
    for gc, gd in zip(outs["cpu"], outs[str(DEV)]):
        torch.testing.assert_close(gd, gc, rtol=1e-5, atol=1e-5)
