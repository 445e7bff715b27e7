"""Processes forked after the backend initialised (``import torch`` loads it) share the parent's
device memory mapping and a copy of its allocator. As with CUDA, such a child may not use the
device: it gets a RuntimeError naming the 'spawn' start method, and nothing it does (allocating,
freeing inherited tensors, emptying the cache) changes the parent's device memory. Children that
never touch the device (DataLoader workers over host data) keep working with fork, and children
started with 'spawn' get a device of their own."""
from __future__ import annotations

import gc
import multiprocessing as mp
import os
import subprocess
import sys
import textwrap

import pytest
import torch

pytestmark = pytest.mark.timeout(120)


def _in_fork(body) -> int:
    """Runs body() in a forked child; returns its exit code (body returns it, exceptions give 99)."""
    pid = os.fork()
    if pid == 0:
        code = 99
        try:
            code = int(body())
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _raises_spawn_error(fn) -> bool:
    try:
        fn()
    except RuntimeError as e:
        return "forked subprocess" in str(e) and "'spawn'" in str(e)
    return False


def test_allocations_after_fork_do_not_alias_the_parent():
    # The measured corruption: the parent allocates right after fork, the child allocates its
    # own tensor; the parent must still read its own values afterwards.
    torch.ones(1, device="neuron")
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = 0 if _raises_spawn_error(lambda: torch.full((1024,), 7.0, device="neuron")) else 2
        finally:
            os._exit(code)
    c = torch.full((1024,), 5.0, device="neuron")
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert torch.equal(c.cpu(), torch.full((1024,), 5.0))


def test_every_device_use_in_a_forked_child_raises():
    x = torch.arange(16, dtype=torch.float32, device="neuron")

    def child():
        checks = [
            torch.neuron._is_in_bad_fork(),
            not torch.neuron.is_initialized(),
            _raises_spawn_error(lambda: torch.empty(4, device="neuron")),
            _raises_spawn_error(lambda: x.cpu()),
            _raises_spawn_error(lambda: x + 1),
            _raises_spawn_error(lambda: torch.zeros(3).to("neuron")),
            _raises_spawn_error(torch.neuron.init),
            _raises_spawn_error(lambda: torch.neuron.manual_seed(1)),
        ]
        torch.manual_seed(0)  # seeds CPU only, skipping the device as torch.cuda's bad fork does
        return sum(1 << i for i, ok in enumerate(checks) if not ok)

    assert _in_fork(child) == 0
    assert not torch.neuron._is_in_bad_fork()
    assert torch.equal(x.cpu(), torch.arange(16, dtype=torch.float32))


def test_a_child_freeing_inherited_tensors_leaves_the_parent_intact():
    # Large blocks release their pages when the runtime frees them: a child doing so would zero
    # the parent's data.
    big = torch.full((4 << 20,), 3.0, device="neuron")  # 16 MiB
    small = torch.full((100,), 4.0, device="neuron")
    holder = [big, small]

    def child():
        holder.clear()
        gc.collect()
        torch.neuron.empty_cache()
        return 0

    assert _in_fork(child) == 0
    del holder
    assert torch.equal(big.cpu(), torch.full((4 << 20,), 3.0))
    assert torch.equal(small.cpu(), torch.full((100,), 4.0))
    # The parent's allocator is consistent: a new allocation does not overlap the live ones.
    fresh = torch.full((4 << 20,), 9.0, device="neuron")
    assert torch.equal(big.cpu(), torch.full((4 << 20,), 3.0))
    assert fresh.data_ptr() != big.data_ptr()


class _Squares(torch.utils.data.Dataset):
    def __len__(self):
        return 32

    def __getitem__(self, i):
        return torch.tensor([float(i), float(i * i)])


def test_fork_dataloader_workers_that_stay_on_the_host_work():
    torch.ones(1, device="neuron")
    loader = torch.utils.data.DataLoader(_Squares(), batch_size=8, num_workers=2,
                                         multiprocessing_context="fork", pin_memory=True)
    total = torch.zeros(2, device="neuron")
    for batch in loader:
        total += batch.to("neuron", non_blocking=True).sum(0)
    expected = torch.stack([_Squares()[i] for i in range(32)]).sum(0)
    assert torch.equal(total.cpu(), expected)


def _spawned_child(queue):
    t = torch.full((1024,), 7.0, device="neuron")
    queue.put(float((t * 2).sum().cpu()))


def test_spawned_children_use_a_device_of_their_own():
    c = torch.full((1024,), 5.0, device="neuron")
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    p = ctx.Process(target=_spawned_child, args=(queue,))
    p.start()
    try:
        assert queue.get(timeout=90) == 14336.0
    finally:
        p.join(timeout=30)
        if p.is_alive():
            p.kill()
    assert p.exitcode == 0
    assert torch.equal(c.cpu(), torch.full((1024,), 5.0))


def test_forked_child_error_reaches_multiprocessing_users():
    # A script that forks a worker using the device sees the error text in the worker's
    # traceback, as with CUDA.
    script = textwrap.dedent("""
        import multiprocessing as mp, torch
        def work():
            torch.ones(2, device="neuron")
        if __name__ == "__main__":
            torch.ones(1, device="neuron")
            p = mp.get_context("fork").Process(target=work)
            p.start(); p.join(60)
            print("exitcode", p.exitcode)
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=90)
    assert "exitcode 1" in r.stdout, r.stdout + r.stderr
    assert "Cannot re-initialize neuron in forked subprocess" in r.stderr
    assert "'spawn' start method" in r.stderr
