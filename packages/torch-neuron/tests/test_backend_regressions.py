"""Backend behaviours found by PyTorch's device-generic suites, checked against CPU/CUDA semantics."""
import os
import subprocess
import sys
import textwrap

import pytest
import torch


def test_efficient_zero_tensor_has_no_memory_and_reads_as_zeros():
    z = torch._efficientzerotensor(3, device="neuron")
    assert z._is_zerotensor() and z.device.type == "neuron"
    assert torch.equal(z.cpu(), torch.zeros(3))


def test_sgn_gradient_is_an_efficient_zero_tensor_on_neuron_as_on_cpu():
    x_cpu = torch.randn(3, requires_grad=True)
    x = x_cpu.detach().to("neuron").requires_grad_()
    (g_cpu,) = torch.autograd.grad(torch.sgn(x_cpu), x_cpu, torch.ones(3))
    (g,) = torch.autograd.grad(torch.sgn(x), x, torch.ones(3, device="neuron"))
    assert torch.equal(g.cpu(), g_cpu)


def test_cpu_out_tensor_for_neuron_inputs_is_rejected_like_cuda():
    with pytest.raises(RuntimeError, match="Expected out tensor to have device neuron:0, but got cpu"):
        torch.amax(torch.randn(2, device="neuron"), out=torch.empty(()))


def test_mode_out_runs_on_neuron_like_cpu():
    # mode.values has only a composite kernel, which refuses devices other than CPU/CUDA/XPU.
    x = torch.randn(4, 5)
    x[:, 1] = x[:, 0]
    values, indices = torch.mode(x, 1)
    out = (torch.empty(0, device="neuron"), torch.empty(0, dtype=torch.long, device="neuron"))
    got = torch.mode(x.to("neuron"), 1, out=out)
    assert got[0] is out[0] and got[1] is out[1]
    assert torch.equal(out[0].cpu(), values) and torch.equal(out[1].cpu(), indices)
    with pytest.raises(RuntimeError):
        torch.mode(x.to("neuron"), 1, out=(torch.empty(0, dtype=torch.long, device="neuron"), out[1]))


def test_conj_physical_in_place_on_neuron_like_cpu():
    # Its composite kernel calls a DispatchStub that has no neuron entry.
    x = torch.randn(3, 4, dtype=torch.complex64)
    d = x.to("neuron")
    assert d.conj_physical_() is d
    assert torch.equal(d.cpu(), x.conj_physical())
    strided = x.to("neuron")[:, ::2]
    strided.conj_physical_()
    assert torch.equal(strided.cpu(), x[:, ::2].conj_physical())


@pytest.mark.parametrize("on_caller", ["1", "0"])
def test_process_exits_cleanly_right_after_backward(on_caller):
    # With TORCH_NEURON_BACKWARD_ON_CALLER=0 backward runs on autograd's device worker,
    # which must have released its last graph task before the interpreter finalizes.
    code = ("import torch; m = torch.nn.Linear(8, 1).to('neuron'); "
            "m(torch.randn(4, 8, device='neuron')).sum().backward()")
    env = dict(os.environ, TORCH_NEURON_BACKWARD_ON_CALLER=on_caller)
    for _ in range(5):
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
        assert r.returncode == 0, r.stderr[-2000:]


@pytest.mark.parametrize("on_caller", ["1", "0"])
def test_backward_runs_on_the_calling_thread_unless_disabled(on_caller):
    code = textwrap.dedent("""
        import threading, torch
        x = torch.ones(3, device="neuron", requires_grad=True)
        seen = []
        x.register_hook(lambda g: seen.append(threading.get_ident()))
        (x * 2).sum().backward()
        assert torch.equal(x.grad.cpu(), torch.full((3,), 2.0))
        print(seen[0] == threading.get_ident())
    """)
    env = dict(os.environ, TORCH_NEURON_BACKWARD_ON_CALLER=on_caller)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == ("True" if on_caller == "1" else "False")


def _allocated() -> int:
    return torch.neuron.memory_stats()["allocated_bytes.all.current"]


@pytest.mark.parametrize("case", [
    "add", "add_on_temporary", "mul_by_0d_temporary", "addmm", "sum_dim", "index", "boxed_cat",
    "boxed_out", "training_step",
])
def test_repeated_ops_release_their_memory(case):
    # Every operand a kernel borrows must be released exactly once: a kept reference
    # leaks the tensor's device memory (and its Python object) on every call.
    a = torch.randn(32, 32, device="neuron")
    b = torch.randn(32, 32, device="neuron")
    idx = torch.tensor([0, 3, 5], device="neuron")
    x = torch.randn(8, 32, device="neuron", requires_grad=True)
    w = torch.randn(32, 32, device="neuron", requires_grad=True)
    out = torch.empty(64, 32, device="neuron")

    def training_step():
        torch.nn.functional.gelu(x @ w).sum().backward()
        x.grad = None
        w.grad = None

    run = {
        "add": lambda: a + b,
        "add_on_temporary": lambda: a.clone().add_(b),
        "mul_by_0d_temporary": lambda: a * torch.tensor(2.0, device="neuron"),
        "addmm": lambda: torch.addmm(a[0], a, b),
        "sum_dim": lambda: a.sum(0),
        "index": lambda: a[idx],
        "boxed_cat": lambda: torch.cat([a.clone(), b.clone()]),
        "boxed_out": lambda: torch.cat([a, b], out=out),
        "training_step": training_step,
    }[case]
    run()
    run()
    before = _allocated()
    for _ in range(20):
        run()
    assert _allocated() == before


@pytest.mark.timeout(60)
def test_native_op_on_operands_beyond_hbm_is_out_of_memory_without_simulating_its_schedule():
    # An expanded (stride-0) input is small in memory but its result cannot fit: the native
    # estimate used to simulate the kernel's schedule tile by tile for the whole logical shape
    # (hours); found by the op fuzzer (tests/fuzz, family "huge").
    import torch_neuron

    hbm = torch.neuron.get_device_properties(0).total_memory
    rows = hbm // 4 // 2 ** 16 + 1
    a = torch.ones(rows, 1, device="neuron").expand(-1, 2 ** 16)
    b = torch.ones(2 ** 16, device="neuron")
    with pytest.raises(torch.OutOfMemoryError):
        a + b
    reasons = [r for (op, _dt, _shapes), r in torch_neuron.native_rejections().items() if op == "aten::add.Tensor"]
    assert any("exceed the device's" in r and "HBM" in r for r in reasons), reasons
    # The device goes on: the same op at a size that fits runs natively and is right.
    torch_neuron.clear_op_tracking()
    torch.testing.assert_close((a[:4] + b).cpu(), torch.full((4, 2 ** 16), 2.0))
    assert torch_neuron.get_executed_ops()["aten::add.Tensor"]["native"] == 1
