"""Multi-process scenarios for the c10d backend "neuron" (one process per rank, started by
launcher.py). Each scenario checks results against a reference computed on the CPU and
prints "SCENARIO OK" at the end; any mismatch raises."""
from __future__ import annotations

import datetime
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch_neuron.distributed  # noqa: F401  (registers backend "neuron")

RANK = int(os.environ["RANK"])
WORLD = int(os.environ["WORLD_SIZE"])


def dev() -> torch.device:
    return torch.device("neuron", torch.neuron.current_device())


def init(backend: str = "neuron", timeout_s: float = 60) -> None:
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s))
    assert torch.neuron.current_device() == int(os.environ["LOCAL_RANK"]) % torch.neuron.device_count()


def data(rank: int, shape, dtype, seed: int, small: bool = False) -> torch.Tensor:
    g = torch.Generator().manual_seed(7919 * seed + rank)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_floating_point:
        return ((torch.rand(shape, generator=g) + 0.5) if small else torch.randn(shape, generator=g) * 4).to(dtype)
    lo, hi = (-3, 4) if small else (-40, 40)
    if dtype == torch.uint8:
        lo, hi = (0, 4) if small else (0, 60)
    return torch.randint(lo, hi, shape, generator=g).to(dtype)


def close(actual: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    actual = actual.cpu()
    if expected.dtype in (torch.bfloat16, torch.float16):
        tol = dict(rtol=2e-2, atol=2e-2)
    elif expected.dtype == torch.float32:
        tol = dict(rtol=1e-5, atol=1e-5)
    elif expected.dtype == torch.float64:
        # neuron_ccl's ring and recursive doubling associate the reduction differently from the
        # rank-order reference (every rank still holds identical bits): allow a few ulps.
        tol = dict(rtol=1e-12, atol=1e-12)
    else:
        tol = dict(rtol=0, atol=0)
    try:
        torch.testing.assert_close(actual, expected, **tol, equal_nan=True)
    except AssertionError as e:
        raise AssertionError(f"rank {RANK}: {what}: {e}") from None


def reference_reduce(inputs, op: str, factor: float = 1.0) -> torch.Tensor:
    dtype = inputs[0].dtype
    wide = torch.float32 if dtype in (torch.bfloat16, torch.float16) else dtype
    xs = [x.to(wide) for x in inputs]
    out = xs[0].clone()
    for x in xs[1:]:
        if op in ("sum", "avg", "premul"):
            out = out + x if dtype != torch.bool else out | x
        elif op == "product":
            out = out * x if dtype != torch.bool else out & x
        elif op == "min":
            out = torch.minimum(out, x)
        elif op == "max":
            out = torch.maximum(out, x)
        elif op == "band":
            out = out & x
        elif op == "bor":
            out = out | x
        elif op == "bxor":
            out = out ^ x
    if op == "avg":
        out = out / len(xs) if wide.is_floating_point else torch.div(out, len(xs), rounding_mode="trunc")
    if op == "premul":
        out = out * factor
    return out.to(dtype)


OPS = {
    "sum": dist.ReduceOp.SUM, "product": dist.ReduceOp.PRODUCT, "min": dist.ReduceOp.MIN, "max": dist.ReduceOp.MAX,
    "avg": dist.ReduceOp.AVG, "band": dist.ReduceOp.BAND, "bor": dist.ReduceOp.BOR, "bxor": dist.ReduceOp.BXOR,
}
FLOATS = (torch.float32, torch.float64, torch.bfloat16, torch.float16)
INTS = (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64)


def ops_for(dtype):
    if dtype in FLOATS:
        return ["sum", "product", "min", "max", "avg", "premul", "premul_tensor"]
    if dtype == torch.bool:
        return ["sum", "product", "min", "max", "band", "bor", "bxor"]
    return ["sum", "product", "min", "max", "avg", "band", "bor", "bxor"]


def c10d_op(name: str, factor: float):
    if name == "premul":
        return dist._make_nccl_premul_sum(factor)
    if name == "premul_tensor":
        return dist._make_nccl_premul_sum(torch.tensor([factor], device=dev()))
    return OPS[name]


# ------------------------------------------------------------------------------ scenarios
def scenario_collectives() -> None:
    init()
    check_collectives()
    dist.barrier()  # rank 0 hosts the store: keep it until every rank has built its groups
    dist.destroy_process_group()
    print("SCENARIO OK", flush=True)


def check_collectives() -> None:
    n, d = WORLD, dev()
    seed = 0
    # all_reduce: every dtype x reduce op, sizes on both sides of the one-shot/two-shot switch.
    for dtype in FLOATS + INTS + (torch.bool,):
        for op in ops_for(dtype):
            for numel in (1, 1003, 40000):
                seed += 1
                small = op == "product"
                ins = [data(q, (numel,), dtype, seed, small) for q in range(n)]
                t = ins[RANK].to(d)
                dist.all_reduce(t, op=c10d_op(op, 0.25))
                ref = reference_reduce(ins, "premul" if op.startswith("premul") else op, 0.25)
                close(t, ref, f"all_reduce {op} {dtype} numel={numel}")
    # Non-contiguous input (a transposed view) and a strided slice.
    seed += 1
    ins = [data(q, (6, 10), torch.float32, seed) for q in range(n)]
    base = ins[RANK].to(d).t()
    assert not base.is_contiguous()
    dist.all_reduce(base)
    close(base, reference_reduce([x.t() for x in ins], "sum"), "all_reduce non-contiguous")
    big = torch.zeros(20, device=d)
    view = big[::2]
    view.copy_(ins[RANK].flatten()[:10].to(d))
    dist.all_reduce(view, op=dist.ReduceOp.MAX)
    close(big[::2], reference_reduce([x.flatten()[:10] for x in ins], "max"), "all_reduce strided view")
    close(big[1::2], torch.zeros(10), "all_reduce strided view leaves gaps alone")

    # broadcast / reduce from every root.
    for root in range(n):
        seed += 1
        ins = [data(q, (517,), torch.bfloat16, seed) for q in range(n)]
        t = ins[RANK].to(d)
        dist.broadcast(t, src=root)
        close(t, ins[root], f"broadcast root={root}")
        t = ins[RANK].to(d)
        dist.reduce(t, dst=root, op=dist.ReduceOp.SUM)
        if RANK == root:
            close(t, reference_reduce(ins, "sum"), f"reduce root={root}")

    # all_gather: list form (uneven sizes), into one tensor, and in place.
    seed += 1
    ins = [data(q, (q + 3, 2), torch.float32, seed) for q in range(n)]
    outs = [torch.empty(q + 3, 2, device=d) for q in range(n)]
    dist.all_gather(outs, ins[RANK].to(d))
    for q in range(n):
        close(outs[q], ins[q], f"all_gather list (uneven) from {q}")
    out = torch.empty(n * 5, 3, device=d)
    ins = [data(q, (5, 3), torch.float16, seed) for q in range(n)]
    out = out.half()
    dist.all_gather_into_tensor(out, ins[RANK].to(d))
    close(out, torch.cat(ins), "all_gather_into_tensor")
    inplace = torch.zeros(n * 4, device=d)
    mine = inplace[RANK * 4:(RANK + 1) * 4]
    mine.copy_(torch.full((4,), float(RANK + 1)))
    dist.all_gather_into_tensor(inplace, mine)
    close(inplace, torch.cat([torch.full((4,), float(q + 1)) for q in range(n)]), "all_gather in place")

    # reduce_scatter: one buffer and list form, SUM / AVG / PREMUL_SUM.
    for op in ("sum", "avg", "premul", "max"):
        seed += 1
        ins = [data(q, (n * 7,), torch.float32, seed) for q in range(n)]
        out = torch.empty(7, device=d)
        dist.reduce_scatter_tensor(out, ins[RANK].to(d), op=c10d_op(op, 0.5))
        full = reference_reduce(ins, op, 0.5)
        close(out, full[RANK * 7:(RANK + 1) * 7], f"reduce_scatter_tensor {op}")
        out = torch.empty(7, device=d)
        dist.reduce_scatter(out, list(ins[RANK].to(d).chunk(n)), op=c10d_op(op, 0.5))
        close(out, full[RANK * 7:(RANK + 1) * 7], f"reduce_scatter list {op}")

    # all_to_all: equal and uneven splits, list form.
    seed += 1
    ins = [data(q, (n * 3,), torch.int32, seed) for q in range(n)]
    out = torch.empty(n * 3, dtype=torch.int32, device=d)
    dist.all_to_all_single(out, ins[RANK].to(d))
    close(out, torch.cat([ins[q][RANK * 3:(RANK + 1) * 3] for q in range(n)]), "all_to_all_single equal")
    # rank q sends (q + p + 1) rows to rank p
    in_splits = [RANK + p + 1 for p in range(n)]
    out_splits = [q + RANK + 1 for q in range(n)]
    ins = [data(q, (sum(q + p + 1 for p in range(n)), 2), torch.float32, seed) for q in range(n)]
    out = torch.empty(sum(out_splits), 2, device=d)
    dist.all_to_all_single(out, ins[RANK].to(d), out_splits, in_splits)
    expected = []
    for q in range(n):
        off = sum(q + p + 1 for p in range(RANK))
        expected.append(ins[q][off:off + q + RANK + 1])
    close(out, torch.cat(expected), "all_to_all_single uneven")
    outs = [torch.empty(2, device=d) for _ in range(n)]
    dist.all_to_all(outs, [torch.full((2,), float(10 * RANK + p), device=d) for p in range(n)])
    close(torch.stack(outs), torch.stack([torch.full((2,), float(10 * q + RANK)) for q in range(n)]), "all_to_all list")

    # gather / scatter.
    root = n - 1
    g = [torch.empty(4, device=d) for _ in range(n)] if RANK == root else None
    dist.gather(torch.full((4,), float(RANK), device=d), g, dst=root)
    if RANK == root:
        close(torch.stack(g), torch.stack([torch.full((4,), float(q)) for q in range(n)]), "gather")
    out = torch.empty(3, device=d)
    sl = [torch.full((3,), float(q * q), device=d) for q in range(n)] if RANK == 0 else None
    dist.scatter(out, sl, src=0)
    close(out, torch.full((3,), float(RANK * RANK)), "scatter")

    # point to point: a ring, plus batch_isend_irecv in both directions.
    t = torch.full((5,), float(RANK), device=d)
    r = torch.empty(5, device=d)
    right, left = (RANK + 1) % n, (RANK - 1) % n
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, t, right), dist.P2POp(dist.irecv, r, left)])
    for q in reqs:
        q.wait()
    close(r, torch.full((5,), float(left)), "batch_isend_irecv ring")
    if RANK == 0:
        dist.send(torch.arange(6.0, device=d), dst=n - 1)
    elif RANK == n - 1:
        r = torch.empty(6, device=d)
        dist.recv(r, src=0)
        close(r, torch.arange(6.0), "send/recv")

    # object collectives ride on uint8 tensors of the current neuron device.
    objs = [None] * n
    dist.all_gather_object(objs, {"rank": RANK})
    assert objs == [{"rank": q} for q in range(n)], objs
    lst = [{"x": 1}] if RANK == 0 else [None]
    dist.broadcast_object_list(lst, src=0)
    assert lst == [{"x": 1}]
    dist.barrier()

    # Sub-groups (as DeviceMesh builds them): even ranks and odd ranks.
    for color in (0, 1):
        members = [q for q in range(n) if q % 2 == color]
        grp = dist.new_group(members)
        if RANK in members:
            t = torch.full((3,), float(RANK), device=d)
            dist.all_reduce(t, group=grp)
            close(t, torch.full((3,), float(sum(members))), f"new_group {members} all_reduce")
    # Work objects: complete on return, the future carries the output tensors.
    t = torch.full((8,), float(RANK), device=d)
    work = dist.all_reduce(t, async_op=True)
    assert work.is_completed() and work.is_success() and work.exception() is None
    work.wait()
    fut_value = work.get_future().wait()
    assert isinstance(fut_value, list) and fut_value[0].device.type == "neuron"
    close(fut_value[0], torch.full((8,), float(sum(range(n)))), "async all_reduce future value")
    # The collective occupies the current stream's simulated timeline for its modelled time.
    import torch_neuron
    big = torch.ones(4 << 20, device=d)
    t0 = torch_neuron._C.device_time_ns(d.index)
    dist.all_reduce(big)
    spent = torch_neuron._C.device_time_ns(d.index) - t0
    assert spent > 0, "all_reduce did not advance the device timeline"
    close(big[:4], torch.full((4,), float(n)), "16 MiB all_reduce")
    record = torch_neuron.distributed.flight_record()
    assert "all_reduce" in record and "completed" in record, record


def _mlp(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def _batches(steps: int, per_rank: int):
    g = torch.Generator().manual_seed(123)
    return [(torch.randn(WORLD * per_rank, 8, generator=g), torch.randn(WORLD * per_rank, 4, generator=g))
            for _ in range(steps)]


def _reference_training(steps: int, per_rank: int, grad_scale: float = 1.0):
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in _batches(steps, per_rank):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        for p in model.parameters():
            p.grad.mul_(grad_scale)
        opt.step()
    return [p.detach() for p in model.parameters()]


def scenario_training() -> None:
    """DDP, then FSDP2, against single-process training (one launch)."""
    init()
    check_ddp()
    check_fsdp()
    dist.destroy_process_group()
    print("SCENARIO OK", flush=True)


def check_ddp() -> None:
    d = dev()
    model = _mlp().to(d)
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.0001)  # several buckets
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    per = 4
    for x, y in _batches(3, per):
        opt.zero_grad()
        xs, ys = x[RANK * per:(RANK + 1) * per], y[RANK * per:(RANK + 1) * per]
        torch.nn.functional.mse_loss(ddp(xs.to(d)), ys.to(d)).backward()
        opt.step()
    for p, ref in zip(model.parameters(), _reference_training(3, per)):
        close(p.detach(), ref, "DDP parameters vs single-process training")
    # A communication hook sees a future completed with the bucket tensors.
    seen = []

    def hook(state, bucket):
        fut = dist.all_reduce(bucket.buffer(), async_op=True).get_future()

        def done(f):
            seen.append(f.value()[0].device.type)
            return f.value()[0] / WORLD
        return fut.then(done)

    ddp2 = torch.nn.parallel.DistributedDataParallel(_mlp().to(d))
    ddp2.register_comm_hook(None, hook)
    ddp2(torch.randn(2, 8, device=d)).sum().backward()
    assert seen and all(s == "neuron" for s in seen), seen


def check_fsdp() -> None:
    from torch.distributed.fsdp import FSDPModule, fully_shard
    d = dev()
    per = 4
    for factor in (None, 4.0 * WORLD):
        model = _mlp().to(d)
        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer)
        fully_shard(model)
        if factor is not None:  # every FSDP module reduce-scatters with PREMUL_SUM(1/factor)
            for m in model.modules():
                if isinstance(m, FSDPModule):
                    m.set_gradient_divide_factor(factor)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in _batches(2, per):
            opt.zero_grad()
            xs, ys = x[RANK * per:(RANK + 1) * per], y[RANK * per:(RANK + 1) * per]
            torch.nn.functional.mse_loss(model(xs.to(d)), ys.to(d)).backward()
            opt.step()
        scale = 1.0 if factor is None else WORLD / factor
        ref = _reference_training(2, per, grad_scale=scale)
        for p, r in zip(model.parameters(), ref):
            close(p.full_tensor().detach(), r, f"FSDP2 parameters (divide factor {factor})")


def scenario_tensor_parallel() -> None:
    init()
    check_tensor_parallel()
    check_dtensor_rng()
    dist.destroy_process_group()
    print("SCENARIO OK", flush=True)


def scenario_world4() -> None:
    """Four ranks in one launch (process start-up dominates): collectives, then TP/DTensor."""
    init()
    check_collectives()
    check_tensor_parallel()
    check_dtensor_rng()
    dist.barrier()
    dist.destroy_process_group()
    print("SCENARIO OK", flush=True)


def check_tensor_parallel() -> None:
    from torch.distributed._functional_collectives import (
        all_gather_tensor, all_reduce, all_to_all_single, reduce_scatter_tensor)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Shard, Replicate, distribute_tensor
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
    d = dev()
    mesh = init_device_mesh("neuron", (WORLD,))
    ref_model = _mlp()
    model = _mlp().to(d)
    parallelize_module(model, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    x = torch.randn(5, 8, generator=torch.Generator().manual_seed(5))
    out = model(x.to(d))
    ref_out = ref_model(x)
    close(out.detach(), ref_out.detach(), "TP forward")
    out.sum().backward()
    ref_out.sum().backward()
    for (name, p), rp in zip(model.named_parameters(), ref_model.parameters()):
        g = p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad
        close(g, rp.grad, f"TP grad {name}")
    # DTensor redistribution: Shard -> Replicate (all-gather), Partial -> Replicate (all-reduce).
    full = torch.arange(4.0 * WORLD * 3).reshape(4 * WORLD, 3)
    dt = distribute_tensor(full.to(d), mesh, [Shard(0)])
    close(dt.redistribute(mesh, [Replicate()]).to_local(), full, "DTensor Shard(0)->Replicate")
    close(dt.redistribute(mesh, [Shard(1)]).full_tensor(), full, "DTensor Shard(0)->Shard(1)")
    # Functional collectives.
    t = torch.full((4,), float(RANK + 1), device=d)
    close(all_reduce(t, "sum", mesh), torch.full((4,), float(sum(range(1, WORLD + 1)))), "funcol all_reduce")
    close(all_reduce(t, "avg", mesh), torch.full((4,), sum(range(1, WORLD + 1)) / WORLD), "funcol all_reduce avg")
    close(all_gather_tensor(t, 0, mesh), torch.cat([torch.full((4,), float(q + 1)) for q in range(WORLD)]),
          "funcol all_gather_tensor")
    rs = reduce_scatter_tensor(torch.arange(4.0 * WORLD, device=d), "sum", 0, mesh)
    close(rs, torch.arange(4.0 * WORLD)[RANK * 4:(RANK + 1) * 4] * WORLD, "funcol reduce_scatter_tensor")
    a2a = all_to_all_single(torch.arange(2.0 * WORLD, device=d) + 100 * RANK, None, None, mesh)
    close(a2a, torch.tensor([100.0 * q + 2 * RANK + i for q in range(WORLD) for i in range(2)]),
          "funcol all_to_all_single")
    if WORLD == 4:
        mesh2 = init_device_mesh("neuron", (2, 2), mesh_dim_names=("dp", "tp"))
        t = torch.full((2,), float(RANK), device=d)
        got = all_reduce(t, "sum", (mesh2, 1))
        row = [q for q in range(4) if q // 2 == RANK // 2]
        close(got, torch.full((2,), float(sum(row))), "2-D mesh tp-dim all_reduce")


def check_dtensor_rng() -> None:
    """Random init of FSDP2-sharded parameters (DTensor's default OffsetBasedRNGTracker over the
    neuron generator's (seed, offset) state) equals the matching slice of the same init done
    unsharded, and leaves the generator where the unsharded init leaves it."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import DTensor, Shard
    d = dev()
    mesh = init_device_mesh("neuron", (WORLD,))

    def build():
        return torch.nn.Sequential(torch.nn.Linear(16, 8 * WORLD), torch.nn.Linear(8 * WORLD, 4 * WORLD))

    def init_params(model):
        for p in model.parameters():
            torch.nn.init.trunc_normal_(p, std=0.02)
        torch.nn.init.normal_(model[0].weight)

    torch.manual_seed(1234)
    ref = build().to(d)
    init_params(ref)
    full = [p.detach().cpu() for p in ref.parameters()]
    state_after = torch.neuron.get_rng_state()
    with torch.device("meta"):
        model = build()
    fully_shard(model, mesh=mesh)
    model.to_empty(device=d)
    torch.manual_seed(1234)
    init_params(model)
    for (name, p), f in zip(model.named_parameters(), full):
        assert isinstance(p, DTensor) and p.placements == (Shard(0),), (name, type(p))
        local = p.to_local().detach().cpu()
        rows = local.shape[0]
        close(local, f[RANK * rows:(RANK + 1) * rows], f"FSDP2 random init of {name} vs unsharded slice")
    assert torch.equal(torch.neuron.get_rng_state(), state_after), "sharded init left the generator elsewhere"
    assert not torch.equal(full[0][:8], full[0][8:16]), "shards drew the same values"


def scenario_checkpoint() -> None:
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict
    from torch.distributed.fsdp import fully_shard
    init("cpu:gloo,neuron:neuron")
    d = dev()
    model = _mlp().to(d)
    fully_shard(model)
    model(torch.randn(2, 8, device=d)).sum().backward()
    expected = {k: v.full_tensor().cpu().clone() for k, v in get_model_state_dict(model).items()}
    path = os.environ["DCP_DIR"]
    dcp.save(get_model_state_dict(model), checkpoint_id=path)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
    sd = get_model_state_dict(model)
    dcp.load(sd, checkpoint_id=path)
    set_model_state_dict(model, sd)
    for k, v in get_model_state_dict(model).items():
        close(v.full_tensor(), expected[k], f"DCP round trip {k}")
    dist.destroy_process_group()
    print("SCENARIO OK", flush=True)


def _expect_failure(fn, words) -> None:
    t0 = time.monotonic()
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the error text is what is checked
        msg = str(e)
        missing = [w for w in words if w not in msg]
        print(f"FAILED AS EXPECTED after {time.monotonic() - t0:.2f}s: {msg.splitlines()[0][:400]}", flush=True)
        if missing:
            raise AssertionError(f"rank {RANK}: error lacks {missing}: {msg}") from None
        return
    raise AssertionError(f"rank {RANK}: the collective succeeded but should have failed")


def scenario_mismatch() -> None:
    init(timeout_s=30)
    d = dev()
    # Different sizes, on a sub-group (it is unusable afterwards)...
    sub = dist.new_group(list(range(WORLD)))
    t = torch.ones(1000 if RANK == 0 else 999, device=d)
    dist.all_reduce(torch.ones(4, device=d), group=sub)  # a healthy op first
    _expect_failure(lambda: dist.all_reduce(t, group=sub),
                    ["mismatched", "rank 0", "rank 1", "count=1000", "count=999"])
    # ...then different operations on the world group.
    t = torch.ones(16, device=d)
    if RANK == 0:
        _expect_failure(lambda: dist.broadcast(t, src=0), ["mismatched", "broadcast", "all_reduce"])
    else:
        _expect_failure(lambda: dist.all_reduce(t), ["mismatched", "broadcast", "all_reduce"])
    print("SCENARIO OK", flush=True)
    os._exit(0)  # skip destroy_process_group on broken groups


def scenario_timeout() -> None:
    timeout = 3.0
    init(timeout_s=timeout)
    d = dev()
    dist.all_reduce(torch.ones(4, device=d))
    if RANK == WORLD - 1:
        time.sleep(timeout + 1.5)  # late: the others time out first and mark the group failed
        _expect_failure(lambda: dist.all_reduce(torch.ones(4, device=d)), ["aborted", "timed out"])
    else:
        t0 = time.monotonic()
        _expect_failure(lambda: dist.all_reduce(torch.ones(4, device=d)), ["timed out", f"[{WORLD - 1}]"])
        assert time.monotonic() - t0 < timeout + 2.0
    print("SCENARIO OK", flush=True)
    os._exit(0)


def scenario_killed_rank() -> None:
    init(timeout_s=60)
    d = dev()
    dist.all_reduce(torch.ones(4, device=d))
    if RANK == 1:
        os._exit(3)  # dies without a word
    t0 = time.monotonic()
    _expect_failure(lambda: [dist.all_reduce(torch.ones(1 << 16, device=d)) for _ in range(3)], ["rank 1", "exited"])
    assert time.monotonic() - t0 < 10, "a dead peer must be noticed well inside the 60 s timeout"
    print("SCENARIO OK", flush=True)
    os._exit(0)


def scenario_killed_rank_fsdp() -> None:
    """One rank dies inside the forward pass of an FSDP2 step; every survivor's step raises
    (all-gather or reduce-scatter naming the dead rank) well inside the group timeout."""
    from torch.distributed.fsdp import fully_shard

    init(timeout_s=60)
    d = dev()
    victim = int(os.environ.get("KILLED_RANK", "1"))
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(32, 32) for _ in range(4)]).to(d)
    for layer in model:
        fully_shard(layer)
    fully_shard(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(8, 32, device=d)

    def step():
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()
        torch.neuron.synchronize()

    step()  # a healthy step first
    if RANK == victim:
        # dies after the first layers' all-gathers of the second step, without a word
        model[2].register_forward_pre_hook(lambda *_: os._exit(3))
        step()
        raise AssertionError("the victim survived its own exit")
    t0 = time.monotonic()
    _expect_failure(lambda: [step() for _ in range(3)], [f"rank {victim}", "exited"])
    took = time.monotonic() - t0
    print(f"survivor noticed the dead rank after {took:.2f}s", flush=True)
    assert took < 20, "a dead peer must be noticed well inside the 60 s timeout"
    print("SCENARIO OK", flush=True)
    os._exit(0)


if __name__ == "__main__":
    globals()["scenario_" + sys.argv[1]]()
