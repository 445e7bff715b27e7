"""0015 (F05): DTensor random ops on a mesh whose device generator is not CUDA's philox.

Vanilla DTensor always uses OffsetBasedRNGTracker, which reads the device generator's state
as CUDA's 16-byte (seed, offset) pair: on a backend whose generator keeps any other state
(a Mersenne Twister like the CPU's, say) every random op on a DTensor fails
(``_PhiloxState.offset`` raises a bare AssertionError). With the patch the tracker fits the
generator.

The neuron generator itself keeps CUDA's layout, so DTensor works on it with vanilla torch
(tests/distributed covers that). These proofs present neuron's state to torch in another
layout -- a versioned 24-byte record, as a backend with a richer generator state would --
through the device module's get/set_rng_state, which is what vanilla DTensor reads.
"""

import os
import sys

import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.torch_patch("0015")

_HEADER = torch.tensor([0x4E, 0x52, 0x4E, 0x47, 1, 0, 0, 0], dtype=torch.uint8)  # "NRNG", version 1


def present_state_in_another_layout():
    """Makes torch.neuron's RNG state a 24-byte record (header + seed + offset); returns an undo."""
    neuron_mod = torch.neuron
    get_one, set_one = neuron_mod.get_rng_state, neuron_mod.set_rng_state

    def get_rng_state(device="neuron"):
        return torch.cat([_HEADER, get_one(device)])

    def set_rng_state(new_state, device="neuron"):
        # A record from get_rng_state above, or the state of a torch.Generator of the device
        # (which the patched tracker seeds per region and installs as the device's state).
        new_state = new_state.cpu()
        if new_state.numel() == 24 and torch.equal(new_state[:8], _HEADER):
            new_state = new_state[8:]
        elif new_state.numel() != torch.Generator("neuron").get_state().numel():
            raise ValueError(f"expected a 24-byte NRNG state record or a generator's state, got "
                             f"{new_state.numel()} bytes")
        set_one(new_state, device)

    neuron_mod.get_rng_state, neuron_mod.set_rng_state = get_rng_state, set_rng_state

    def undo():
        neuron_mod.get_rng_state, neuron_mod.set_rng_state = get_one, set_one

    return undo


def _fresh_tracker():
    import torch.distributed.tensor._random as dtensor_random

    dtensor_random._rng_tracker = None


def _dropout_local(mesh, placements, shape, seed):
    from torch.distributed.tensor import distribute_tensor

    torch.manual_seed(seed)
    x = distribute_tensor(torch.ones(shape, device=mesh.device_type), mesh, placements)
    return F.dropout(x, p=0.5, training=True)


def test_dropout_and_rand_on_single_rank_neuron_mesh(neuron, process_group):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    undo = present_state_in_another_layout()
    with process_group("neuron"):
        _fresh_tracker()
        try:
            mesh = init_device_mesh("neuron", (1,))
            y = _dropout_local(mesh, [Shard(0)], (64, 32), seed=7).to_local().cpu()
            assert set(y.unique().tolist()) <= {0.0, 2.0}, "dropout of ones must give 0 or 1/(1-p)"
            kept = (y != 0).float().mean().item()
            assert 0.35 < kept < 0.65, f"kept fraction {kept} for p=0.5"
            # Reproducible from the seed, and each op advances the device generator.
            torch.manual_seed(7)
            dx = distribute_tensor(torch.ones(64, 32, device=neuron), mesh, [Shard(0)])
            first = F.dropout(dx, p=0.5, training=True).to_local().cpu()
            second = F.dropout(dx, p=0.5, training=True).to_local().cpu()
            assert torch.equal(first, y), "same seed, different dropout mask"
            assert not torch.equal(first, second), "consecutive dropouts drew the same mask"
            # DTensor factory with the device RNG (torch.distributed.tensor.rand).
            torch.manual_seed(3)
            r = torch.distributed.tensor.rand(16, 16, device_mesh=mesh).to_local().cpu()
            assert r.min() >= 0 and r.max() < 1 and r.unique().numel() > 200
            # The device generator's state is left valid.
            torch.neuron.set_rng_state(torch.neuron.get_rng_state())
            assert torch.rand(4, device=neuron).cpu().unique().numel() == 4
        finally:
            _fresh_tracker()
            undo()


def test_dropout_streams_across_two_ranks(neuron):
    from _ranks import run_ranks

    run_ranks(os.path.abspath(__file__), "two_ranks", world=2)


def _two_ranks():
    import datetime

    import torch.distributed as dist
    import torch_neuron.distributed  # noqa: F401  (registers c10d backend "neuron")
    from _ranks import OK_LINE, rank_env
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard

    rank, world = rank_env()
    present_state_in_another_layout()
    torch.neuron.set_device(rank % torch.neuron.device_count())
    dist.init_process_group("neuron", timeout=datetime.timedelta(seconds=60))
    try:
        mesh = init_device_mesh("neuron", (world,))

        def gather(t):
            out = [torch.zeros_like(t) for _ in range(world)]
            dist.all_gather(out, t.contiguous())
            return [o.cpu() for o in out]

        # Shard(0): each rank holds a different shard, which must get its own random mask.
        sharded = _dropout_local(mesh, [Shard(0)], (8 * world, 64), seed=11)
        masks = [m != 0 for m in gather(sharded.to_local())]
        assert not torch.equal(masks[0], masks[1]), "both shards got the same dropout mask"
        # Replicate: every rank holds the whole tensor, which must get the same mask.
        replicated = _dropout_local(mesh, [Replicate()], (8, 64), seed=11).to_local()
        copies = gather(replicated)
        assert all(torch.equal(copies[0], c) for c in copies), "replicas got different masks"
        # The device generators stay in sync across ranks.
        states = gather(torch.neuron.get_rng_state().to(replicated.device))
        assert all(torch.equal(states[0], s) for s in states), "device RNG states diverged"
        print(OK_LINE, flush=True)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    {"two_ranks": _two_ranks}[sys.argv[1]]()
