"""torch.distributed with backend "neuron": multi-process tests (127.0.0.1, bounded in time)."""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dist_launcher import check_all_ok, launch, launch_torchrun  # noqa: E402


def test_collectives_against_reference():
    check_all_ok(launch("collectives", 2, timeout=150))


def test_tensor_parallel_dtensor_and_functional_collectives():
    check_all_ok(launch("tensor_parallel", 2, timeout=150))


def test_four_ranks_collectives_tensor_parallel_and_2d_mesh():
    check_all_ok(launch("world4", 4, timeout=240))


def test_ddp_and_fsdp2_parity_with_single_process_under_torchrun():
    # FSDP2 includes set_gradient_divide_factor, whose reduce-scatter uses PREMUL_SUM.
    returncode, output = launch_torchrun("training", 2, timeout=180)
    assert returncode == 0 and output.count("SCENARIO OK") == 2, output[-6000:]


def test_distributed_checkpoint_round_trip(tmp_path):
    # Also exercises init_process_group("cpu:gloo,neuron:neuron").
    check_all_ok(launch("checkpoint", 2, env={"DCP_DIR": str(tmp_path / "ckpt")}))


def test_mismatched_collectives_fail_on_every_rank():
    results = launch("mismatch", 2, timeout=60)
    check_all_ok(results)
    for r in results:
        assert r.output.count("FAILED AS EXPECTED") == 2
        assert "flight recorder" in r.output  # dumped on error


def test_timeout_fails_on_every_rank():
    check_all_ok(launch("timeout", 2, timeout=60))


def test_killed_rank_fails_the_survivors():
    results = launch("killed_rank", 3, timeout=60)
    assert results[1].returncode == 3, results[1].output[-2000:]
    check_all_ok([results[0], results[2]])


def _killed_rank_fsdp(world: int, victim: int, timeout: float) -> None:
    results = launch("killed_rank_fsdp", world, timeout=timeout, env={"KILLED_RANK": str(victim)})
    assert results[victim].returncode == 3, results[victim].output[-2000:]
    check_all_ok([r for r in results if r.rank != victim])


def test_killed_rank_in_an_fsdp2_step_fails_the_survivors_4_ranks():
    _killed_rank_fsdp(4, victim=2, timeout=120)


def test_killed_rank_in_an_fsdp2_step_fails_the_survivors_8_ranks():
    # two ranks per visible device (LOCAL_RANK % device_count); about 50 s on two cores
    _killed_rank_fsdp(8, victim=5, timeout=180)

