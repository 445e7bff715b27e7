# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""User tile kernels as torch ops (torch_neuron.nki_op): values against CPU float64 references,
autograd, FakeTensor / torch.compile, the device timeline, in-place kernels and errors."""

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

import neuron_kernels.kernels
import neuron_kernels.language as nl
import neuron_sim
import torch_neuron
from neuron_sim.isa import PartitionError
from torch_neuron import nki_op, wrap_nki

pytestmark = pytest.mark.timeout(120)

DEV = torch.device("neuron", 0)
HAS_BACKEND_HOOK = hasattr(torch_neuron._C, "launch_native_kernel")


# --------------------------------------------------------------------------- user kernels
@nl.jit
def scaled_add_kernel(a: Tensor, b: Tensor, alpha: float) -> Tensor:
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range((a.shape[0] + 127) // 128):
        rows = slice(i * 128, (i + 1) * 128)
        nl.store(out[rows], nl.add(nl.load(a[rows]), nl.multiply(nl.load(b[rows]), alpha)))
    return out


scaled_add = nki_op("test_nki_op::scaled_add")(scaled_add_kernel)


def _row_blocks(n):
    return [slice(r, min(r + 128, n)) for r in range(0, n, 128)]


@nl.jit
def bias_gelu_kernel(x, bias):
    """gelu(x + bias) for x [N, D] and bias [1, D] (bias broadcast over the partitions)."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    for rows in _row_blocks(x.shape[0]):
        b = nl.load(bias.broadcast_partitions(rows.stop - rows.start))
        nl.store(out[rows], nl.gelu(nl.add(nl.load(x[rows]), b)))
    return out


@nl.jit
def bias_gelu_backward_kernel(grad, x, bias):
    """grad * gelu'(x + bias)."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    for rows in _row_blocks(x.shape[0]):
        b = nl.load(bias.broadcast_partitions(rows.stop - rows.start))
        d = nl.gelu_dx(nl.add(nl.load(x[rows]), b))
        nl.store(out[rows], nl.multiply(nl.load(grad[rows]), d))
    return out


_bias_gelu_fwd = wrap_nki(bias_gelu_kernel)
_bias_gelu_bwd = wrap_nki(bias_gelu_backward_kernel)


@nki_op("test_nki_op::bias_gelu")
def bias_gelu(x: Tensor, bias: Tensor) -> Tensor:
    return _bias_gelu_fwd(x, bias.reshape(1, -1))


@nki_op("test_nki_op::bias_gelu_backward")
def bias_gelu_backward(grad: Tensor, x: Tensor, bias: Tensor) -> Tensor:
    return _bias_gelu_bwd(grad, x, bias.reshape(1, -1))


def _setup_context(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _backward(ctx, grad):
    x, bias = ctx.saved_tensors
    gx = bias_gelu_backward(grad, x, bias)
    return gx, gx.sum(0)


bias_gelu.register_autograd(_backward, setup_context=_setup_context)


@nl.jit
def scale_inplace_kernel(x: Tensor, alpha: float) -> None:
    for rows in _row_blocks(x.shape[0]):
        nl.store(x[rows], nl.multiply(nl.load(x[rows]), alpha))
    return x


scale_ = nki_op("test_nki_op::scale_", mutates_args=("x",))(scale_inplace_kernel)

_softmax = wrap_nki(neuron_kernels.kernels.softmax)


@nki_op("test_nki_op::softmax")
def softmax(x: Tensor) -> Tensor:
    return _softmax(x)


def _inputs(n=200, d=48, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, generator=g).to(dtype), torch.randn(d, generator=g).to(dtype)


def _ref_bias_gelu(x, b):
    return F.gelu(x.double() + b.double())


# --------------------------------------------------------------------------- values
@pytest.mark.parametrize("device", ["neuron", "cpu"])
@pytest.mark.parametrize("shape", [(128, 16), (300, 64), (5, 7)])
def test_scaled_add_matches_reference(device, shape):
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(shape, generator=g), torch.randn(shape, generator=g)
    out = scaled_add(a.to(device), b.to(device), -1.5)
    assert out.device.type == device and out.shape == a.shape and out.dtype == torch.float32
    torch.testing.assert_close(out.cpu().double(), a.double() - 1.5 * b.double(), rtol=1e-6, atol=1e-6)


def test_scaled_add_bfloat16():
    a, b = _inputs(256, 32, seed=2, dtype=torch.bfloat16)
    b = b.expand(256, 32).contiguous()
    out = scaled_add(a.to(DEV), b.to(DEV), 0.25)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.cpu().double(), a.double() + 0.25 * b.double(), rtol=2e-2, atol=2e-2)


def test_bias_gelu_forward_and_backward_match_float64_reference():
    x, b = _inputs(200, 48)
    xn, bn = x.to(DEV).requires_grad_(), b.to(DEV).requires_grad_()
    out = bias_gelu(xn, bn)
    w = torch.randn(out.shape, generator=torch.Generator().manual_seed(3))
    (out * w.to(DEV)).sum().backward()

    xr, br = x.double().requires_grad_(), b.double().requires_grad_()
    ref = _ref_bias_gelu(xr, br)
    (ref * w.double()).sum().backward()
    torch.testing.assert_close(out.detach().cpu().double(), ref.detach(), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(xn.grad.cpu().double(), xr.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(bn.grad.cpu().double(), br.grad, rtol=1e-4, atol=1e-4)


def test_wrap_nki_library_kernel_in_an_op():
    x = torch.randn(130, 40, generator=torch.Generator().manual_seed(4)) * 4
    out = softmax(x.to(DEV))
    torch.testing.assert_close(out.cpu().double(), torch.softmax(x.double(), -1), rtol=1e-5, atol=1e-6)


def test_wrap_nki_called_directly_in_eager():
    a, b = _inputs(64, 16, seed=5)
    b = b.expand(64, 16).contiguous()
    out = wrap_nki(scaled_add_kernel)(a.to(DEV), b.to(DEV), 3.0)
    torch.testing.assert_close(out.cpu().double(), a.double() + 3 * b.double(), rtol=1e-6, atol=1e-6)


@nl.jit
def double_kernel(x):
    """2 * x, rows split evenly over the launch's cores."""
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    per = (x.shape[0] + nl.num_programs() - 1) // nl.num_programs()
    lo = nl.program_id() * per
    for r in range(lo, min(lo + per, x.shape[0]), 128):
        rows = slice(r, min(r + 128, lo + per, x.shape[0]))
        nl.store(out[rows], nl.multiply(nl.load(x[rows]), 2.0))
    return out


def test_multi_core_launch():
    x = torch.randn(512, 32, generator=torch.Generator().manual_seed(11))
    xn = x.to(DEV)
    one, two = wrap_nki(double_kernel), wrap_nki(double_kernel, grid=2)
    torch.testing.assert_close(two(xn).cpu(), 2 * x, rtol=0, atol=0)
    torch.testing.assert_close(one[2](xn).cpu(), 2 * x, rtol=0, atol=0)
    # Two cores share the rows: the launch ends when the slower core does, before one core would.
    assert two.schedule(xn).latency_ns < one.schedule(xn).latency_ns


def test_explicit_schema_for_an_unannotated_kernel():
    double = nki_op("test_nki_op::double", schema="(Tensor x) -> Tensor")(double_kernel)
    x = torch.randn(20, 6, generator=torch.Generator().manual_seed(12))
    torch.testing.assert_close(double(x.to(DEV)).cpu(), 2 * x, rtol=0, atol=0)
    assert str(torch.ops.test_nki_op.double.default._schema) == "test_nki_op::double(Tensor x) -> Tensor"


def test_wrapped_kernel_called_in_a_compiled_region_runs_eagerly():
    from torch._dynamo.testing import CompileCounter
    torch._dynamo.reset()
    counter = CompileCounter()
    k = wrap_nki(scaled_add_kernel)
    f = torch.compile(lambda a, b: k(a * 1.0, b, 2.0) + 1.0, backend=counter)
    a, b = torch.randn(64, 8), torch.randn(64, 8)
    torch.testing.assert_close(f(a.to(DEV), b.to(DEV)).cpu(), a + 2 * b + 1, rtol=1e-6, atol=1e-6)
    assert counter.frame_count == 2  # a graph break around the kernel call, not a traced simulator


def test_inplace_kernel_updates_its_argument():
    x = torch.randn(150, 24, generator=torch.Generator().manual_seed(6))
    xn = x.to(DEV)
    ptr = xn.data_ptr()
    assert scale_(xn, -2.0) is None
    assert xn.data_ptr() == ptr
    torch.testing.assert_close(xn.cpu().double(), -2.0 * x.double(), rtol=1e-6, atol=1e-6)


def test_non_contiguous_input_is_read_correctly():
    x, b = _inputs(48, 96, seed=7)
    xt = x.to(DEV).t()  # [96, 48], not contiguous
    bt = torch.randn(48, generator=torch.Generator().manual_seed(8))
    out = bias_gelu(xt, bt.to(DEV))
    torch.testing.assert_close(out.cpu().double(), _ref_bias_gelu(x.t(), bt), rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------- device timeline
def test_timeline_advances_by_the_kernels_simulated_latency():
    x, b = (t.to(DEV) for t in _inputs(300, 64, seed=9))
    overhead = torch.neuron.get_device_properties(0).launch_overhead_ns  # as for native ATen kernels
    latency = _bias_gelu_fwd.schedule(x, b.reshape(1, -1)).latency_ns
    assert latency > 0
    for _ in range(2):  # the second call reuses the cached schedule: same duration
        torch.neuron.synchronize()
        t0 = torch_neuron.device_time_ns(0)
        bias_gelu(x, b)
        t1 = torch_neuron.device_time_ns(0)
        assert t1 - t0 == pytest.approx(overhead + latency, rel=1e-9)
        rec = neuron_sim.timeline(0)[-1]
        assert rec.name == "test_nki_op::bias_gelu" and rec.kind == neuron_sim.LaunchKind.KERNEL
        assert rec.duration_ns == pytest.approx(overhead + latency, rel=1e-9)
    # A kernel with more work takes longer on the simulated engines.
    x2, b2 = (t.to(DEV) for t in _inputs(1024, 64, seed=9))
    assert _bias_gelu_fwd.schedule(x2, b2.reshape(1, -1)).latency_ns > latency


def test_cpu_tensors_leave_the_device_timeline_alone():
    x, b = _inputs(64, 16)
    torch.neuron.synchronize()
    t0 = torch_neuron.device_time_ns(0)
    bias_gelu(x, b)
    assert torch_neuron.device_time_ns(0) == t0


@pytest.mark.skipif(not HAS_BACKEND_HOOK, reason="needs torch_neuron._C.launch_native_kernel (native accounting)")
def test_counted_as_native_op():
    x, b = (t.to(DEV) for t in _inputs(64, 16))
    torch_neuron.clear_op_tracking()
    bias_gelu(x, b)
    bias_gelu(x, b)
    assert torch_neuron.get_executed_ops()["test_nki_op::bias_gelu"] == {"native": 2, "fallback": 0}
    assert "test_nki_op::bias_gelu" not in torch_neuron.get_fallback_ops()


@pytest.mark.skipif(not HAS_BACKEND_HOOK, reason="needs torch_neuron._C.launch_native_kernel (current stream)")
def test_launch_lands_on_the_current_stream():
    x, b = (t.to(DEV) for t in _inputs(64, 16))
    s = torch.neuron.Stream()
    torch.neuron.synchronize()
    with torch.neuron.stream(s):
        bias_gelu(x, b)
    rec = neuron_sim.timeline(0)[-1]
    assert rec.name == "test_nki_op::bias_gelu"
    assert rec.queue_id != neuron_sim.Queue.default(0).id


# --------------------------------------------------------------------------- tracing and compile
def test_fake_tensor_outputs_follow_the_traced_kernel():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        x = torch.empty(300, 64, device=DEV)
        b = torch.empty(64, device=DEV)
        out = bias_gelu(x, b)
        assert out.shape == (300, 64) and out.device == DEV and out.dtype == torch.float32
    with torch.device("meta"):
        out = scaled_add(torch.empty(7, 3, dtype=torch.bfloat16), torch.empty(7, 3, dtype=torch.bfloat16), 1.0)
    assert out.shape == (7, 3) and out.dtype == torch.bfloat16 and out.device.type == "meta"


def test_opcheck():
    # schema, fake implementation, autograd registration and AOT dispatch (static and dynamic shapes)
    x, b = (t.to(DEV) for t in _inputs(40, 24))
    torch.library.opcheck(bias_gelu, (x, b))
    torch.library.opcheck(scaled_add, (x, x, 0.5))
    torch.library.opcheck(scale_, (x.clone(), 3.0))


def test_torch_compile_dynamic_shapes():
    torch._dynamo.reset()
    f = torch.compile(lambda x, b: bias_gelu(x, b) * 2, backend="aot_eager", dynamic=True, fullgraph=True)
    for n in (64, 130):
        x, b = _inputs(n, 16, seed=n)
        torch.testing.assert_close(f(x.to(DEV), b.to(DEV)).cpu().double(), 2 * _ref_bias_gelu(x, b),
                                   rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_torch_compile_forward_and_backward(backend):
    from torch._dynamo.testing import CompileCounterWithBackend
    torch._dynamo.reset()
    counter = CompileCounterWithBackend(backend)

    def f(x, b, w):
        return (bias_gelu(x @ w, b) * 0.5).sum()

    g = torch.Generator().manual_seed(10)
    x, w, b = torch.randn(96, 32, generator=g), torch.randn(32, 40, generator=g), torch.randn(40, generator=g)
    xn, wn, bn = x.to(DEV), w.to(DEV).requires_grad_(), b.to(DEV).requires_grad_()
    loss = torch.compile(f, backend=counter, fullgraph=True)(xn, bn, wn)
    loss.backward()
    assert counter.frame_count == 1

    wr, br = w.double().requires_grad_(), b.double().requires_grad_()
    ref = (_ref_bias_gelu(x.double() @ wr, br) * 0.5).sum()
    ref.backward()
    torch.testing.assert_close(loss.detach().cpu().double(), ref.detach(), rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(wn.grad.cpu().double(), wr.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(bn.grad.cpu().double(), br.grad, rtol=1e-4, atol=1e-4)


# --------------------------------------------------------------------------- errors
def test_unsupported_dtype_is_reported():
    with pytest.raises(TypeError, match=r"torch.float64 has no tile-language element type.*\.float\(\)"):
        scaled_add(torch.ones(4, 4, dtype=torch.float64, device=DEV),
                   torch.ones(4, 4, dtype=torch.float64, device=DEV), 1.0)


def test_mixed_devices_are_reported():
    with pytest.raises(RuntimeError, match="must be on one device"):
        bias_gelu(torch.ones(4, 4, device=DEV), torch.ones(4))


def test_wrapped_kernel_without_autograd_refuses_grad_inputs():
    x = torch.ones(8, 4, device=DEV, requires_grad=True)
    with pytest.raises(RuntimeError, match="no autograd formula.*register_autograd"):
        wrap_nki(scaled_add_kernel)(x, x, 1.0)
    with torch.no_grad():
        out = wrap_nki(scaled_add_kernel)(x, x, 1.0)
    torch.testing.assert_close(out.cpu(), torch.full((8, 4), 2.0))


def test_hardware_constraint_violation_names_the_instruction():
    @nl.jit
    def whole_tile(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.exp(nl.load(x)))  # one tile of 256 partitions: more than SBUF has
        return out

    with pytest.raises(PartitionError, match="256"):
        wrap_nki(whole_tile)(torch.ones(256, 4, device=DEV))
