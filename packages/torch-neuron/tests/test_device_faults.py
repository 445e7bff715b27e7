"""Device faults injected by neuron-sim (NEURON_SIM_FAULT_ALLOC, NEURON_SIM_FAULT_KERNEL,
NEURON_SIM_FAULT_DEVICE_LOST; ``neuron-ls --env`` lists them) reach torch users as CUDA's
errors: a failed allocation is ``torch.OutOfMemoryError`` and the next allocation succeeds; a
failed kernel launch is ``torch.AcceleratorError`` naming the op and the device, and the process
goes on; a lost device fails every later call on it with an error saying so, while the other
devices keep computing correct results. Each case runs in a subprocess, since the faults are
armed when the runtime initialises."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.timeout(180)


def _run(body: str, **env: str) -> subprocess.CompletedProcess:
    child_env = {k: v for k, v in os.environ.items() if not k.startswith("NEURON_SIM_FAULT_")}
    child_env.update(env)
    child_env.setdefault("TORCH_NEURON_FALLBACK_WARN", "0")
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(body)], check=False, env=child_env,
                          capture_output=True, text=True, timeout=150)
    assert proc.returncode == 0, f"child failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc


def test_failed_allocation_is_out_of_memory_and_the_next_one_succeeds():
    # The allocator retries a failed segment allocation once after releasing its cache, as
    # CUDA's does, so two consecutive device allocations must fail for the user to see it.
    # The first device allocation of a process is import's one-element probe (a small-pool
    # segment that stays cached); the 4 MiB tensor needs the second.
    proc = _run("""
        import torch
        try:
            torch.full((1 << 20,), 3.0, device="neuron")
        except torch.OutOfMemoryError as e:
            msg = str(e)
        else:
            raise SystemExit("no error")
        assert "injected allocation failure" in msg and "NEURON_SIM_HBM_CAPACITY" in msg, msg
        assert "neuron:0" in msg and "4.00 MiB" in msg, msg
        x = torch.full((1 << 20,), 3.0, device="neuron")
        assert torch.equal(x.cpu(), torch.full((1 << 20,), 3.0))
        s = torch.neuron.memory_stats()
        assert s["num_ooms"] == 1 and s["num_alloc_retries"] == 1, s
        print("ok")
    """, NEURON_SIM_FAULT_ALLOC="2:2")
    assert proc.stdout.strip() == "ok"


def test_without_the_variable_the_same_allocation_succeeds():
    proc = _run("""
        import torch
        x = torch.full((1 << 20,), 3.0, device="neuron")
        print(torch.neuron.memory_stats()["num_ooms"])
    """)
    assert proc.stdout.strip() == "0"


def test_failed_kernel_launch_names_op_and_device_and_the_process_goes_on():
    proc = _run("""
        import torch
        a = torch.arange(8.0, device="neuron:1")
        b = torch.ones(8, device="neuron:1")
        try:
            a + b
        except torch.AcceleratorError as e:
            msg = str(e)
        else:
            raise SystemExit("no error")
        assert "aten::add.Tensor" in msg and "neuron device 1" in msg, msg
        assert "NSIM_ERROR_LAUNCH_FAILED" in msg and "NEURON_SIM_FAULT_KERNEL" in msg, msg
        # count 1: only the first launch fails
        assert torch.equal((a + b).cpu(), torch.arange(8.0) + 1)
        assert torch.equal((a * b).cpu(), torch.arange(8.0))
        print("ok")
    """, NEURON_SIM_FAULT_KERNEL="aten::add.Tensor=1")
    assert proc.stdout.strip() == "ok"


def test_every_launch_of_a_kernel_fails_with_count_minus_one():
    proc = _run("""
        import torch
        a = torch.arange(4.0, device="neuron")
        fails = 0
        for _ in range(3):
            try:
                a.mul(2.0)
            except torch.AcceleratorError as e:
                assert "aten::mul" in str(e), e
                fails += 1
        assert torch.equal((a + a).cpu(), torch.arange(4.0) * 2)
        print(fails)
    """, NEURON_SIM_FAULT_KERNEL="aten::mul.Tensor=-1,aten::mul.Scalar=-1")
    assert proc.stdout.strip() == "3"


def test_failed_in_place_launch_leaves_its_tensors_unchanged():
    # The host kernel of an in-place op (or an out= op, or a random fill) writes device memory
    # before its launch is accounted: the injected failure must come first.
    proc = _run("""
        import torch
        a = torch.arange(6.0, device="neuron")
        b = torch.ones(6, device="neuron")
        out = torch.full((6,), -1.0, device="neuron")
        r = torch.zeros(6, device="neuron")
        for name, call in (("aten::add_.Tensor", lambda: a.add_(b)),
                           ("aten::mul_.Tensor", lambda: a.mul_(3.0)),
                           ("aten::sub.out", lambda: torch.sub(a, b, out=out)),
                           ("aten::uniform_", lambda: r.uniform_()),
                           ("aten::addcmul_", lambda: a.addcmul_(b, b))):
            try:
                call()
            except torch.AcceleratorError as e:
                assert name in str(e), (name, str(e))
            else:
                raise SystemExit(f"{name}: no error")
        assert torch.equal(a.cpu(), torch.arange(6.0)), a
        assert torch.equal(out.cpu(), torch.full((6,), -1.0)), out
        assert torch.equal(r.cpu(), torch.zeros(6)), r
        # Each fault had count 1: the same calls now run and write.
        a.add_(b)
        a.mul_(3.0)
        assert torch.equal(a.cpu(), (torch.arange(6.0) + 1) * 3)
        print("ok")
    """, NEURON_SIM_FAULT_KERNEL="aten::add_.Tensor=1,aten::mul_.Tensor=1,aten::sub.out=1,aten::uniform_=1,"
                                 "aten::addcmul_=1")
    assert proc.stdout.strip() == "ok"


def test_lost_device_fails_every_later_call_while_others_keep_working():
    proc = _run("""
        import torch
        x = torch.arange(16.0, device="neuron:1")
        lost_at = None
        for i in range(20):
            try:
                x = x + 1
            except torch.AcceleratorError as e:
                lost_at, msg = i, str(e)
                break
        assert lost_at is not None, "the device was never lost"
        assert "neuron device 1 is lost" in msg and "NSIM_ERROR_DEVICE_LOST" in msg, msg
        assert "NEURON_SIM_FAULT_DEVICE_LOST" in msg, msg
        later = {
            "op": lambda: x * 2,
            "copy to host": lambda: x.cpu(),
            "copy to device": lambda: torch.ones(4).to("neuron:1"),
            "synchronize": lambda: torch.neuron.synchronize(1),
            "new stream work": lambda: torch.neuron.Stream(device=1).synchronize(),
        }
        for name, call in later.items():
            try:
                call()
            except torch.AcceleratorError as e:
                assert "is lost" in str(e), (name, str(e))
            else:
                raise SystemExit(f"{name} succeeded on a lost device")
        y = torch.arange(16.0, device="neuron:0")
        for _ in range(10):
            y = y * 2 + 1
        ref = torch.arange(16.0)
        for _ in range(10):
            ref = ref * 2 + 1
        assert torch.equal(y.cpu(), ref)
        assert torch.equal(torch.ones(3, device="neuron:2").add(1).cpu(), torch.full((3,), 2.0))
        print(lost_at)
    """, NEURON_SIM_FAULT_DEVICE_LOST="1@4")
    assert int(proc.stdout.strip()) >= 0


@pytest.mark.parametrize("name,value", [
    ("NEURON_SIM_FAULT_ALLOC", "x"),
    ("NEURON_SIM_FAULT_ALLOC", "0"),
    ("NEURON_SIM_FAULT_KERNEL", "aten::add.Tensor=0"),
    ("NEURON_SIM_FAULT_DEVICE_LOST", "99"),
])
def test_malformed_fault_variable_is_named_in_the_error(name, value):
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEURON_SIM_FAULT_")}
    env[name] = value
    proc = subprocess.run([sys.executable, "-c", "import torch; torch.ones(1, device='neuron')"],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode != 0
    assert name in proc.stderr and repr(value) in proc.stderr or value in proc.stderr, proc.stderr
