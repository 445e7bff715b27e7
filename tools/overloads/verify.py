"""Replaying a recorded native call on neuron under device numerics against the same call on CPU.

A replay passes when (1) the overload executed natively on neuron (the backend's counters: native
executions of that overload, none on the host), (2) a tile kernel produced its values (device
numerics' launch counter moved), and (3) every result and every argument the call writes
(in-place self, out=) matches CPU: floating point within the tolerance of its dtype (or of the
call's floating inputs, when looser), integers and bool exactly.
"""
from __future__ import annotations

import torch

# (rtol, atol): fp32 tight; bf16 and fp16 allow a rounding step of their own after fp32 math.
TOLERANCES = {
    torch.float32: (2e-4, 2e-4),
    torch.float64: (1e-7, 1e-7),
    torch.bfloat16: (3e-2, 3e-2),
    torch.float16: (3e-3, 3e-3),
}


def _sdpa_forward(q, k, v, bias=None, dropout_p=0.0, is_causal=False, return_debug_mask=False, *, scale=None):
    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        q, k, v, dropout_p, is_causal, attn_mask=bias, scale=scale)


def _sdpa_backward(grad_out, q, k, v, bias, grad_input_mask, out, lse, cum_q, cum_k, max_q, max_k, dropout_p,
                   is_causal, seed, offset, *, scale=None):
    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
        grad_out, q, k, v, out, lse, dropout_p, is_causal, attn_mask=bias, scale=scale)


def _convolution(x, w, b, stride, padding, dilation, transposed, output_padding, groups):
    return torch.ops.aten.convolution(x, w, b, stride, padding, dilation, transposed, output_padding, groups)


def _convolution_backward(g, x, w, stride, padding, dilation, transposed, output_padding, groups, output_mask):
    bias_sizes = [w.shape[1] * groups if transposed else w.shape[0]] if output_mask[2] else None
    return torch.ops.aten.convolution_backward(g, x, w, bias_sizes, stride, padding, dilation, transposed,
                                               output_padding, groups, output_mask)


# Overloads with no CPU kernel (torch's entry points for PrivateUse1 backends): the CPU reference
# is the CPU op of the same math; its results are compared with the overload's first results.
CPU_REFERENCES = {
    "aten::_scaled_dot_product_fused_attention_overrideable": _sdpa_forward,
    "aten::_scaled_dot_product_fused_attention_overrideable_backward": _sdpa_backward,
    "aten::convolution_overrideable": _convolution,
    "aten::convolution_backward_overrideable": _convolution_backward,
}

# torch documents no order among equal values for topk (CPU's follows libstdc++'s nth_element),
# nor any order with sorted=False: its indices are checked through the values they select, and
# unsorted results after sorting both sides.
UNORDERED_TIES = {"aten::topk", "aten::topk.values"}


def _tie_free_indices(call, cargs, got, want):
    """(got, want) with topk's index results replaced by the input values they select."""
    x, dim = cargs[0], cargs[2] if len(cargs) > 2 else -1
    ordered = cargs[4] if len(cargs) > 4 else True

    def canonical(values, indices):
        picked = torch.gather(x, dim, indices.cpu())
        if not ordered:
            values, picked = values.sort(dim).values, picked.sort(dim).values
        return values, picked
    return canonical(*got), canonical(*want)


def _flat(v, out):
    if isinstance(v, torch.Tensor):
        out.append(v)
    elif isinstance(v, (list, tuple)):
        for x in v:
            _flat(x, out)
    return out


def _written(call, args, kwargs) -> list:
    """The tensors the call writes to: arguments whose schema marks them written (in-place, out=)."""
    from torch_neuron.native.recording import aten_overload

    schema = aten_overload(call.overload)._schema
    values = list(args) + [kwargs[a.name] for a in schema.arguments if a.kwarg_only and a.name in kwargs]
    names = [a for a in schema.arguments if not a.kwarg_only] + [a for a in schema.arguments if a.kwarg_only and a.name in kwargs]
    return [_flat(v, []) for a, v in zip(names, values) if a.alias_info is not None and a.alias_info.is_write]


def _loosest(dtypes) -> tuple | None:
    tols = [TOLERANCES[d] for d in dtypes if d in TOLERANCES]
    return max(tols) if tols else None


def compare(what: str, got: torch.Tensor, want: torch.Tensor, inputs=()) -> str | None:
    """None when ``got`` (neuron) matches ``want`` (CPU), else what differs. A floating result is
    held to the tolerance of its dtype or of the call's floating inputs, whichever is looser (the
    fp32 logsumexp of bf16 attention carries bf16 rounding)."""
    if got.dtype != want.dtype or tuple(got.shape) != tuple(want.shape):
        return f"{what}: neuron {got.dtype} {tuple(got.shape)}, CPU {want.dtype} {tuple(want.shape)}"
    got = got.detach().cpu()
    if want.dtype in TOLERANCES:
        rtol, atol = _loosest([want.dtype, *inputs])
        try:
            torch.testing.assert_close(got, want, rtol=rtol, atol=atol, equal_nan=True)
        except AssertionError as e:
            lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
            return f"{what} ({want.dtype}, rtol {rtol}, atol {atol}): " + "; ".join(lines[1:4])
        return None
    if not torch.equal(got, want):
        bad = (got != want).sum().item()
        return f"{what} ({want.dtype}): {bad} of {want.numel()} elements differ (exact comparison)"
    return None


def verify(call) -> dict:
    """Replays ``call`` (a RecordedCall) on CPU and on neuron under device numerics.

    Returns {"result": "pass"} or {"result": "fail", "reason": ...}."""
    import torch_neuron

    reference = CPU_REFERENCES.get(call.overload)
    try:
        if reference is None:
            want, (cargs, ckw) = call.replay("cpu")
        else:
            cargs, ckw = call.arguments_on("cpu")
            want = reference(*cargs, **ckw)
    except Exception as e:  # noqa: BLE001 - reported as the replay's outcome
        return {"result": "fail", "reason": f"CPU replay raised {type(e).__name__}: {_line(e)}"}
    was = torch_neuron.device_numerics_enabled()
    torch_neuron.set_device_numerics(True)
    torch_neuron.clear_op_tracking()
    torch_neuron.clear_device_numerics_stats()
    try:
        got, (dargs, dkw) = call.replay("neuron")
        torch.neuron.synchronize()
    except Exception as e:  # noqa: BLE001
        return {"result": "fail", "reason": f"neuron replay raised {type(e).__name__}: {_line(e)}"}
    finally:
        torch_neuron.set_device_numerics(was)
    rows = [r for r in torch_neuron.get_op_stats() if r["op"] == call.overload]
    native, host = sum(r["native"] for r in rows), sum(r["fallback"] for r in rows)
    if not native or host:
        return {"result": "fail", "reason": f"not native on replay: {native} native, {host} host executions "
                                            f"of {call.overload}"}
    if not torch_neuron.device_numerics_stats():
        return {"result": "fail", "reason": "no tile kernel ran under device numerics"}
    if call.overload in UNORDERED_TIES:
        got, want = _tie_free_indices(call, cargs, got, want)
    got_t, want_t = _flat(got, []), _flat(want, [])
    if len(got_t) != len(want_t) and reference is None:
        return {"result": "fail", "reason": "neuron and CPU returned different numbers of tensors"}
    pairs = [(f"result {i}", g, w) for i, (g, w) in enumerate(zip(got_t, want_t))]
    for i, (g, w) in enumerate(zip(_written(call, dargs, dkw), _written(call, cargs, ckw))):
        pairs += [(f"written argument {i}", a, b) for a, b in zip(g, w)]
    inputs = {t.dtype for t in _flat(cargs, []) + _flat(list(ckw.values()), [])}
    for what, g, w in pairs:
        problem = compare(what, g, w, inputs)
        if problem:
            return {"result": "fail", "reason": problem}
    return {"result": "pass"}


def _line(e) -> str:
    text = str(e).strip().splitlines()
    return (text[0] if text else "")[:300]
