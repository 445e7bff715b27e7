# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""Tensors on `neuron` as a user sees them: factories, copies, views, in-place, out=,
serialization, deepcopy and bad inputs, each checked against the same code on CPU."""

import copy
import io

import pytest
import torch

pytestmark = pytest.mark.timeout(120)

DEV = torch.device("neuron", 0)
DEV1 = torch.device("neuron", 1)


def assert_same(dev_result, cpu_result, **tol):
    assert dev_result.device.type == "neuron"
    assert dev_result.dtype == cpu_result.dtype
    assert dev_result.shape == cpu_result.shape
    torch.testing.assert_close(dev_result.cpu(), cpu_result, **tol)


# ---------------------------------------------------------------- factories

FACTORIES = {
    "zeros": lambda d: torch.zeros(3, 4, device=d),
    "ones_int": lambda d: torch.ones(5, dtype=torch.int32, device=d),
    "full_bf16": lambda d: torch.full((2, 3), 1.5, dtype=torch.bfloat16, device=d),
    "arange": lambda d: torch.arange(2, 30, 3, device=d),
    "arange_float": lambda d: torch.arange(0.0, 1.0, 0.125, device=d),
    "linspace": lambda d: torch.linspace(-1, 1, 17, device=d),
    "logspace": lambda d: torch.logspace(0, 2, 5, device=d),
    "eye": lambda d: torch.eye(4, 6, device=d),
    "tensor": lambda d: torch.tensor([[1, 2], [3, 4]], dtype=torch.float64, device=d),
    "bool": lambda d: torch.tensor([True, False, True], device=d),
    "complex": lambda d: torch.tensor([1 + 2j, -3j], dtype=torch.complex64, device=d),
    "triu_indices": lambda d: torch.triu_indices(4, 4, 1, device=d),
    "zeros_like": lambda d: torch.zeros_like(torch.ones(2, 2, device=d)),
    "full_like": lambda d: torch.full_like(torch.ones(2, 2, dtype=torch.int64, device=d), 7),
    "empty_strided_filled": lambda d: torch.empty_strided((2, 3), (1, 2), device=d).fill_(2.0),
}


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_factory_matches_cpu(name):
    make = FACTORIES[name]
    assert_same(make("neuron"), make("cpu"))


def test_default_index_and_device_properties_of_factory_output():
    x = torch.empty(3, device="neuron")
    assert x.device == DEV
    assert x.is_neuron
    y = torch.empty(2, 3, device="neuron:1")
    assert y.device == DEV1
    assert y.shape == (2, 3) and y.dtype == torch.float32
    assert torch.empty_like(y).device == DEV1


def test_random_factories_give_requested_shape_dtype_and_range():
    torch.manual_seed(0)
    u = torch.rand(1000, device="neuron")
    assert u.device == DEV and u.dtype == torch.float32
    assert 0.0 <= u.min().item() and u.max().item() < 1.0
    r = torch.randint(3, 9, (1000,), device="neuron")
    assert r.dtype == torch.int64 and 3 <= r.min().item() and r.max().item() <= 8
    p = torch.randperm(50, device="neuron")
    assert torch.equal(p.sort().values.cpu(), torch.arange(50))
    n = torch.randn(20000, device="neuron", dtype=torch.float64)
    assert abs(n.mean().item()) < 0.05 and abs(n.std().item() - 1.0) < 0.05


# ---------------------------------------------------------------- copies

COPY_DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64,
               torch.int8, torch.uint8, torch.bool, torch.complex64]


def _sample(dtype, shape=(5, 7)):
    g = torch.Generator().manual_seed(3)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_complex:
        return torch.randn(shape, dtype=dtype, generator=g)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(0, 100, shape, generator=g).to(dtype)


@pytest.mark.parametrize("dtype", COPY_DTYPES, ids=str)
def test_copy_roundtrip_cpu_neuron0_neuron1(dtype):
    x = _sample(dtype)
    a = x.to("neuron:0")
    b = a.to("neuron:1")
    assert a.device == DEV and b.device == DEV1
    assert torch.equal(b.cpu(), x)
    assert torch.equal(a.to("cpu"), x)
    assert torch.equal(b.to("neuron:0").cpu(), x)


def test_copy_of_non_contiguous_sources_and_into_views():
    x = torch.arange(48.0).view(6, 8)
    d = x.t().to("neuron")  # non-contiguous CPU source
    assert torch.equal(d.cpu(), x.t())
    dn = x.to("neuron")
    assert torch.equal(dn.t().cpu(), x.t())  # non-contiguous device source
    assert torch.equal(dn[:, ::3].to("neuron:1").cpu(), x[:, ::3])
    # copy_ into a strided device view writes only that view
    dst = torch.zeros(6, 8, device="neuron")
    dst[1:4, ::2].copy_(torch.ones(3, 4))
    ref = torch.zeros(6, 8)
    ref[1:4, ::2] = 1
    assert torch.equal(dst.cpu(), ref)
    # copy_ across devices with dtype conversion
    dst1 = torch.empty(6, 8, dtype=torch.float64, device="neuron:1")
    dst1.copy_(dn)
    assert torch.equal(dst1.cpu(), x.double())


def test_non_blocking_copies_with_synchronize():
    x = torch.randn(256, 256)
    d = x.to("neuron", non_blocking=True)
    d1 = d.to("neuron:1", non_blocking=True)
    back = d1.to("cpu", non_blocking=True)
    torch.neuron.synchronize(DEV)
    torch.neuron.synchronize(DEV1)
    assert torch.equal(back, x)


def test_pinned_memory_copies():
    x = torch.randn(1000)
    assert not x.is_pinned()
    p = x.pin_memory()
    assert p.is_pinned()
    assert torch.equal(p, x)
    d = p.to("neuron", non_blocking=True)
    out = torch.empty(1000).pin_memory()
    assert out.is_pinned()
    out.copy_(d * 2, non_blocking=True)
    torch.neuron.synchronize()
    assert torch.equal(out, x * 2)
    assert torch.empty(8, pin_memory=True).is_pinned()


def test_tensor_and_module_device_methods():
    x = torch.arange(6.0)
    assert x.neuron().device == DEV
    assert x.neuron(1).device == DEV1
    m = torch.nn.Linear(3, 2).neuron()
    assert m.weight.device == DEV


# ---------------------------------------------------------------- reductions at the edges

REDUCTIONS = {
    "sum": lambda t: t.sum(),
    "sum_dim0": lambda t: t.sum(0),
    "sum_dim_last_keepdim": lambda t: t.sum(-1, keepdim=True),
    "mean": lambda t: t.mean(),
    "amax": lambda t: t.amax(),
    "prod": lambda t: t.prod(),
    "norm": lambda t: torch.linalg.vector_norm(t),
    "any": lambda t: (t > 0).any(),
    "argmax": lambda t: t.argmax(),
    "logsumexp": lambda t: t.logsumexp(0),
    "softmax": lambda t: t.softmax(0),
    "cumsum": lambda t: t.cumsum(0),
}


@pytest.mark.parametrize("shape", [(), (1,), (7,), (3, 4)], ids=["0d", "1", "7", "3x4"])
@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reductions_on_small_and_zero_dim_tensors(name, shape):
    # 0-d tensors are what losses return; `loss.sum()` and friends must work on them.
    x = torch.randn(shape, generator=torch.Generator().manual_seed(2))
    assert_same(REDUCTIONS[name](x.to("neuron")), REDUCTIONS[name](x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["sum", "sum_dim0", "mean", "prod", "any", "cumsum"])
def test_reductions_on_empty_tensors(name):
    x = torch.empty(0, 3)
    fn = REDUCTIONS[name]
    assert_same(fn(x.to("neuron")), fn(x), equal_nan=True)


MATMUL_SHAPES = [((3, 0), (0, 5)), ((0, 4), (4, 5)), ((4,), (4,)), ((3, 4), (4,)), ((4,), (4, 2)),
                 ((2, 1, 3, 4), (3, 4, 5)), ((0, 3, 4), (0, 4, 2))]


@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_matmul_edge_shapes(shapes):
    g = torch.Generator().manual_seed(4)
    a, b = (torch.randn(s, generator=g) for s in shapes)
    assert_same(torch.matmul(a.to("neuron"), b.to("neuron")), torch.matmul(a, b), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- views, in-place, out=

def _both(fn):
    """Run fn on a fresh CPU tensor and on its neuron copy; return (neuron, cpu)."""
    base = torch.arange(24.0).view(4, 6)
    d, c = base.clone().to("neuron"), base.clone()
    return fn(d), fn(c)


VIEW_OPS = {
    "transpose": lambda t: t.t(),
    "slice_step": lambda t: t[1:, ::2],
    "select": lambda t: t[2],
    "view": lambda t: t.view(3, 8),
    "unsqueeze_expand": lambda t: t[:, :1].expand(4, 5),
    "permute_reshape": lambda t: t.view(2, 2, 6).permute(2, 0, 1).reshape(6, 4),
    "diagonal": lambda t: t.diagonal(),
    "unfold": lambda t: t.unfold(1, 3, 2),
    "narrow_flip": lambda t: t.narrow(1, 2, 3).flip(0),
    "as_strided": lambda t: t.as_strided((3, 3), (5, 1), 2),
}


@pytest.mark.parametrize("name", sorted(VIEW_OPS))
def test_views_match_cpu(name):
    d, c = _both(VIEW_OPS[name])
    assert_same(d, c)
    assert d.stride() == c.stride()


def _write_through_view(t):
    v = t[:, 1::2]
    v.mul_(-2)
    t[0].add_(100)
    t.view(-1)[5] = 7.0
    return t


INPLACE_OPS = {
    "write_through_views": _write_through_view,
    "index_put": lambda t: t.index_put_((torch.tensor([0, 3], device=t.device),), torch.tensor(-1.0, device=t.device)),
    "bool_mask_assign": lambda t: t.masked_fill_(t > 10, 0.5),
    "setitem_tensor": lambda t: t.__setitem__((slice(None), 2), torch.arange(4.0, device=t.device)) or t,
    "clamp_sqrt": lambda t: t.clamp_(3, 20).sqrt_(),
    "addcmul": lambda t: t.addcmul_(t, t, value=0.5),
    "transpose_inplace": lambda t: t.t_().contiguous(),
    "scatter_add": lambda t: t.scatter_add_(1, torch.tensor([[0, 1], [2, 3], [4, 5], [0, 0]], device=t.device),
                                             torch.ones(4, 2, device=t.device)),
    "zero_on_strided": lambda t: (t[::2, ::3].zero_(), t)[1],
}


@pytest.mark.parametrize("name", sorted(INPLACE_OPS))
def test_inplace_matches_cpu(name):
    d, c = _both(INPLACE_OPS[name])
    assert_same(d, c)


def test_inplace_on_view_is_visible_in_base_and_other_views():
    base = torch.zeros(4, 4, device="neuron")
    col = base[:, 1]
    row = base[2]
    col.fill_(3.0)
    assert row[1].item() == 3.0
    assert base.sum().item() == 12.0
    assert col.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()


OUT_CASES = {
    "add": lambda a, b, out: torch.add(a, b, alpha=2, out=out),
    "mul": lambda a, b, out: torch.mul(a, b, out=out),
    "matmul": lambda a, b, out: torch.matmul(a, b.t(), out=out),
    "sum_dim": lambda a, b, out: torch.sum(a, 1, out=out),
    "cat": lambda a, b, out: torch.cat([a, b], 0, out=out),
    "where": lambda a, b, out: torch.where(a > b, a, b, out=out),
}


@pytest.mark.parametrize("name", sorted(OUT_CASES))
@pytest.mark.parametrize("out_shape", [(0,), "exact"], ids=["resize_from_empty", "exact"])
def test_out_variants_match_cpu(name, out_shape):
    fn = OUT_CASES[name]
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(5, 4, generator=g), torch.randn(5, 4, generator=g)
    ref = fn(a, b, None)
    shape = ref.shape if out_shape == "exact" else out_shape
    out = torch.empty(shape, device="neuron")
    ptr_before = out.data_ptr()
    res = fn(a.to("neuron"), b.to("neuron"), out)
    assert res is out
    assert_same(out, ref)
    if out_shape == "exact":
        assert out.data_ptr() == ptr_before  # no reallocation when the size already fits


def test_out_resize_keeps_device_and_sub_alias():
    # Resizing an out= argument must reallocate in device memory on the out's own device.
    a = torch.arange(10.0, device="neuron:1")
    out = torch.empty(0, device="neuron:1")
    torch.sub(a, 1, out=out)
    assert out.device == DEV1 and out.shape == (10,)
    assert torch.equal(out.cpu(), torch.arange(10.0) - 1)
    (out * 2).sum().item()  # the resized storage is usable by later ops


def test_untyped_storage_resize():
    t = torch.arange(4.0, device="neuron")
    s = t.untyped_storage()
    s.resize_(32)
    assert s.nbytes() == 32
    assert s.device == DEV
    assert torch.equal(t.cpu(), torch.arange(4.0))


# ---------------------------------------------------------------- serialization and deepcopy

def test_save_load_with_map_location_both_ways():
    x = torch.randn(4, 5)
    base = x.to("neuron:1")
    payload = {"base": base, "view": base[1:3], "ints": torch.arange(5, device="neuron")}
    buf = io.BytesIO()
    torch.save(payload, buf)

    buf.seek(0)
    same = torch.load(buf)
    assert same["base"].device == DEV1 and same["ints"].device == DEV
    assert torch.equal(same["base"].cpu(), x)
    # storage sharing between a tensor and its view survives the round trip
    same["base"][1, 0] = 123.0
    assert same["view"][0, 0].item() == 123.0

    buf.seek(0)
    on_cpu = torch.load(buf, map_location="cpu")
    assert on_cpu["base"].device.type == "cpu" and torch.equal(on_cpu["base"], x)
    assert torch.equal(on_cpu["view"], x[1:3])

    buf.seek(0)
    on_n2 = torch.load(buf, map_location="neuron:2")
    assert on_n2["base"].device == torch.device("neuron", 2)
    assert torch.equal(on_n2["view"].cpu(), x[1:3])

    cpu_buf = io.BytesIO()
    torch.save({"w": x}, cpu_buf)
    cpu_buf.seek(0)
    to_dev = torch.load(cpu_buf, map_location="neuron")
    assert to_dev["w"].device == DEV and torch.equal(to_dev["w"].cpu(), x)
    cpu_buf.seek(0)
    remapped = torch.load(cpu_buf, map_location={"cpu": "neuron:3"})
    assert remapped["w"].device == torch.device("neuron", 3)


def test_module_state_dict_roundtrip_through_neuron():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 2))
    ref_sd = {k: v.clone() for k, v in m.state_dict().items()}
    m.to("neuron")
    buf = io.BytesIO()
    torch.save(m.state_dict(), buf)
    buf.seek(0)
    sd = torch.load(buf, map_location="cpu")
    m2 = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 2))
    m2.load_state_dict(sd)
    for k, v in m2.state_dict().items():
        assert torch.equal(v, ref_sd[k]), k


def test_deepcopy_tensor_and_module():
    x = torch.randn(3, 3).to("neuron:1")
    y = copy.deepcopy(x)
    assert y.device == DEV1 and torch.equal(y.cpu(), x.cpu())
    assert y.data_ptr() != x.data_ptr()
    y.add_(1)
    assert not torch.equal(y.cpu(), x.cpu())

    emb = torch.nn.Embedding(10, 4)
    head = torch.nn.Linear(4, 10, bias=False)
    head.weight = emb.weight
    m = torch.nn.ModuleDict({"emb": emb, "head": head}).to("neuron")
    m2 = copy.deepcopy(m)
    assert m2["head"].weight is m2["emb"].weight
    assert m2["emb"].weight is not m["emb"].weight
    assert m2["emb"].weight.device == DEV
    assert torch.equal(m2["emb"].weight.cpu(), m["emb"].weight.cpu())


# ---------------------------------------------------------------- bad inputs

def test_out_of_range_device_index_raises_clear_error():
    # as CUDA: torch.AcceleratorError ("invalid device ordinal"), a RuntimeError
    with pytest.raises(torch.AcceleratorError) as e:
        torch.empty(3, device="neuron:99")
    msg = str(e.value)
    assert "99" in msg and "neuron" in msg.lower()
    with pytest.raises(Exception) as e2:
        torch.ones(2).to("neuron:99")
    assert "99" in str(e2.value)


def test_mixing_devices_in_one_op_raises():
    a = torch.ones(3, device="neuron:0")
    b = torch.ones(3, device="neuron:1")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        a + b
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.mm(a.view(3, 1), b.view(1, 3))
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        a + torch.ones(3)  # a CPU tensor that is not a 0-dim scalar
    # a 0-dim CPU tensor is a scalar, as on CUDA
    assert torch.equal((a + torch.tensor(2.0)).cpu(), torch.full((3,), 3.0))


# ---------------------------------------------------------------- ops CPU lacks

@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8], ids=str)
def test_integer_histc(dtype):
    # CUDA supports integer histc (transformers' MoE routing uses it); CPU does not.
    vals = torch.tensor([0, 1, 1, 2, 3, 3, 3, 7, 9, 2], dtype=dtype)
    ref = torch.histc(vals.float(), bins=5, min=0, max=9)
    out = torch.histc(vals.to("neuron"), bins=5, min=0, max=9)
    assert out.device == DEV
    assert out.dtype == dtype
    assert torch.equal(out.cpu(), ref.to(dtype))


def test_parameter_data_moves_between_host_and_device_in_place():
    """`p.data = t` across CPU and neuron and Module.to() keep each parameter object (the same
    _cdata), as between CPU and CUDA; gradients then accumulate on the new device."""
    p = torch.nn.Parameter(torch.randn(3, 4))
    cdata = p._cdata
    p.data = p.data.to("neuron")
    assert p._cdata == cdata and p.device.type == "neuron" and isinstance(p, torch.nn.Parameter)
    (p * 2).sum().backward()
    assert p.grad.device.type == "neuron" and torch.equal(p.grad.cpu(), torch.full((3, 4), 2.0))
    m = torch.nn.Linear(4, 2)
    before = [q._cdata for q in m.parameters()]
    m.to("neuron")
    assert [q._cdata for q in m.parameters()] == before and m.weight.device.type == "neuron"
    m.cpu()
    assert [q._cdata for q in m.parameters()] == before and m.weight.device.type == "cpu"
    assert torch._has_compatible_shallow_copy_type(torch.zeros(1), torch.zeros(1, device="neuron"))
