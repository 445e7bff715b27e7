"""0011 (F14): dist.new_subgroups() sizes subgroups by the neuron devices of the host."""

import os
import subprocess
import sys
import textwrap

import pytest
import torch

pytestmark = pytest.mark.torch_patch("0011")

_RANK = textwrap.dedent(
    """
    import sys
    import torch, torch.distributed as dist
    rank, world, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    dist.init_process_group("gloo", store=dist.FileStore(path, world), rank=rank, world_size=world)
    try:
        sub, subs = dist.new_subgroups()
        print(f"SUBGROUP {dist.get_world_size(sub)} {len(subs)}")
    finally:
        dist.destroy_process_group()
    """
)


def test_default_subgroup_spans_all_devices_of_the_host(neuron, tmp_path):
    world = torch.accelerator.device_count()
    store = str(tmp_path / "store")
    env = dict(os.environ)
    ranks = [
        subprocess.Popen(
            [sys.executable, "-c", _RANK, str(rank), str(world), store],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )
        for rank in range(world)
    ]
    outputs = [p.communicate(timeout=120) for p in ranks]
    failed = {
        rank: (err.strip().splitlines() or ["no output"])[-1]
        for rank, (p, (_, err)) in enumerate(zip(ranks, outputs))
        if p.returncode != 0
    }
    assert not failed, f"ranks failed: {failed}"
    for out, _ in outputs:
        assert f"SUBGROUP {world} 1" in out, out
