"""The neuron generator is counter-based with CUDA's state layout: get_state() is 16 bytes,
seed (uint64) then offset (int64); every random op computes element i from (seed, offset + i)
and advances the offset by its element count rounded up to 4. These tests check the layout,
the offset arithmetic, the tail property DTensor relies on, independence from the thread
count, the distributions themselves, and that no random op escapes to a CPU generator."""
from __future__ import annotations

import io
import math

import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.timeout(120)

DEV = "neuron"


def _state(seed: int, offset: int) -> torch.Tensor:
    return torch.cat([torch.tensor([seed], dtype=torch.int64).view(torch.uint8),
                      torch.tensor([offset], dtype=torch.int64).view(torch.uint8)])


def _offset() -> int:
    return int(torch.neuron.get_rng_state()[8:].view(torch.int64))


# Each draw: a function of n (the element count) returning a neuron tensor of n elements.
DRAWS = {
    "rand": lambda n: torch.rand(n, device=DEV),
    "rand_f64": lambda n: torch.rand(n, device=DEV, dtype=torch.float64),
    "rand_bf16": lambda n: torch.rand(n, device=DEV, dtype=torch.bfloat16),
    "randn": lambda n: torch.randn(n, device=DEV),
    "randint": lambda n: torch.randint(-5, 1000, (n,), device=DEV),
    "randint_int32": lambda n: torch.randint(0, 7, (n,), device=DEV, dtype=torch.int32),
    "random_": lambda n: torch.empty(n, device=DEV, dtype=torch.int64).random_(),
    "normal_": lambda n: torch.empty(n, device=DEV).normal_(2.0, 3.0),
    "normal_tensors": lambda n: torch.normal(torch.zeros(n, device=DEV), torch.ones(n, device=DEV)),
    "bernoulli_": lambda n: torch.empty(n, device=DEV).bernoulli_(0.3),
    "bernoulli_p": lambda n: torch.bernoulli(torch.full((n,), 0.7, device=DEV)),
    "exponential_": lambda n: torch.empty(n, device=DEV).exponential_(2.0),
    "geometric_": lambda n: torch.empty(n, device=DEV).geometric_(0.2),
    "log_normal_": lambda n: torch.empty(n, device=DEV).log_normal_(0.0, 0.5),
    "cauchy_": lambda n: torch.empty(n, device=DEV).cauchy_(),
    "uniform_": lambda n: torch.empty(n, device=DEV).uniform_(-2, 3),
    "dropout": lambda n: F.dropout(torch.ones(n, device=DEV), p=0.4),
    "native_dropout": lambda n: torch.native_dropout(torch.ones(n, device=DEV), 0.4, True)[1],
    "rrelu": lambda n: F.rrelu(-torch.ones(n, device=DEV), training=True),
    "poisson": lambda n: torch.poisson(torch.full((n,), 30.0, device=DEV)),
    "gamma": lambda n: torch._standard_gamma(torch.full((n,), 0.7, device=DEV)),
    "binomial": lambda n: torch.binomial(torch.full((n,), 50.0, device=DEV), torch.full((n,), 0.3, device=DEV)),
}


def test_state_is_cudas_philox_layout():
    torch.neuron.manual_seed(0x1234_5678_9ABC)
    state = torch.neuron.get_rng_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu" and state.numel() == 16
    assert int(state[:8].view(torch.int64)) == 0x1234_5678_9ABC
    assert int(state[8:].view(torch.int64)) == 0
    g = torch.Generator(DEV).manual_seed(5)
    assert g.get_state().numel() == 16 and g.initial_seed() == 5


@pytest.mark.parametrize("name", sorted(DRAWS))
def test_offset_advances_by_element_count_rounded_to_4(name):
    torch.neuron.manual_seed(1)
    for n in (1, 4, 7, 64):
        before = _offset()
        DRAWS[name](n)
        assert _offset() - before == (n + 3) // 4 * 4, (name, n)


@pytest.mark.parametrize("name", sorted(DRAWS))
def test_a_draw_started_at_offset_plus_k_is_the_tail_of_the_full_draw(name):
    n, k = 103, 12
    torch.neuron.set_rng_state(_state(99, 40))
    full = DRAWS[name](n).cpu()
    torch.neuron.set_rng_state(_state(99, 40 + k))
    tail = DRAWS[name](n - k).cpu()
    assert torch.equal(tail, full[k:]), name
    torch.neuron.set_rng_state(_state(98, 40))
    assert name in ("bernoulli_p", "rrelu") or not torch.equal(DRAWS[name](n).cpu(), full), "seed unused"


@pytest.mark.parametrize("name", ["rand", "randn", "randint", "dropout", "poisson", "gamma"])
def test_values_do_not_depend_on_the_thread_count(name):
    threads = torch.get_num_threads()
    try:
        draws = []
        for t in (1, 2):
            torch.set_num_threads(t)
            torch.neuron.manual_seed(7)
            draws.append(DRAWS[name](50_000).cpu())
        assert torch.equal(draws[0], draws[1])
    finally:
        torch.set_num_threads(threads)


def test_non_contiguous_outputs_take_values_in_row_major_order():
    torch.neuron.manual_seed(3)
    ref = torch.rand(6, 5, device=DEV).cpu()
    torch.neuron.manual_seed(3)
    t = torch.empty(5, 6, device=DEV).t()
    t.uniform_()
    assert torch.equal(t.cpu(), ref)


def _ks_statistic(samples: torch.Tensor, cdf) -> float:
    x, _ = samples.double().sort()
    n = x.numel()
    f = cdf(x)
    i = torch.arange(1, n + 1, dtype=torch.float64)
    return float(torch.maximum(i / n - f, f - (i - 1) / n).max())


def test_uniform_and_normal_pass_a_kolmogorov_smirnov_test():
    torch.neuron.manual_seed(11)
    n = 100_000
    critical = 1.95 / math.sqrt(n)  # alpha = 0.001
    u = torch.rand(n, device=DEV).cpu()
    assert 0 <= float(u.min()) and float(u.max()) < 1
    assert _ks_statistic(u, lambda x: x) < critical
    z = torch.randn(n, device=DEV).cpu()
    assert _ks_statistic(z, lambda x: 0.5 * (1 + torch.erf(x / math.sqrt(2)))) < critical
    e = torch.empty(n, device=DEV).exponential_(3.0).cpu()
    assert float(e.min()) > 0
    assert _ks_statistic(e, lambda x: 1 - torch.exp(-3.0 * x)) < critical
    w = torch.empty(n, device=DEV, dtype=torch.float64).uniform_(-1, 4).cpu()
    assert _ks_statistic(w, lambda x: (x + 1) / 5) < critical


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_uniform_in_narrow_types_stays_below_the_upper_bound(dtype):
    torch.neuron.manual_seed(2)
    u = torch.empty(200_000, device=DEV, dtype=dtype).uniform_(1.0, 1.125).cpu().float()
    assert float(u.min()) >= 1.0 and float(u.max()) < 1.125


def _mean_close(t, expected, std, n, what):
    got = float(t.double().mean())
    assert abs(got - expected) < 5 * std / math.sqrt(n), f"{what}: mean {got}, expected {expected}"


def test_moments_of_the_other_distributions():
    torch.neuron.manual_seed(5)
    n = 100_000
    _mean_close(torch.empty(n, device=DEV).normal_(2, 3).cpu(), 2, 3, n, "normal_")
    x = torch.empty(n, device=DEV).normal_(2, 3).cpu()
    assert abs(float(x.std()) - 3) < 0.05
    _mean_close(torch.empty(n, device=DEV).geometric_(0.25).cpu(), 4, math.sqrt(0.75) / 0.25, n, "geometric_")
    ln = torch.empty(n, device=DEV).log_normal_(0.0, 0.5).cpu()
    _mean_close(ln, math.exp(0.125), math.sqrt((math.exp(0.25) - 1) * math.exp(0.25)), n, "log_normal_")
    c = torch.empty(n, device=DEV).cauchy_(1.0, 2.0).cpu()
    assert abs(float(c.median()) - 1.0) < 0.05
    r = torch.randint(0, 10, (n,), device=DEV).cpu()
    counts = torch.bincount(r, minlength=10).double()
    chi2 = float(((counts - n / 10) ** 2 / (n / 10)).sum())
    assert chi2 < 27.9  # chi-square, 9 degrees of freedom, alpha = 0.001
    for lam in (0.5, 4.0, 30.0, 300.0):
        _mean_close(torch.poisson(torch.full((n,), lam, device=DEV)).cpu(), lam, math.sqrt(lam), n, f"poisson {lam}")
    for alpha in (0.3, 1.0, 5.0):
        _mean_close(torch._standard_gamma(torch.full((n,), alpha, device=DEV)).cpu(), alpha, math.sqrt(alpha), n,
                    f"gamma {alpha}")
    for count, p in ((10.0, 0.3), (200.0, 0.4), (1000.0, 0.9)):
        b = torch.binomial(torch.full((n,), count, device=DEV), torch.full((n,), p, device=DEV)).cpu()
        assert float(b.min()) >= 0 and float(b.max()) <= count
        _mean_close(b, count * p, math.sqrt(count * p * (1 - p)), n, f"binomial {count} {p}")
    d = torch._sample_dirichlet(torch.tensor([[1.0, 2.0, 3.0]], device=DEV).expand(n, 3).contiguous()).cpu()
    assert torch.allclose(d.sum(1), torch.ones(n, dtype=d.dtype), atol=1e-5)
    assert torch.allclose(d.mean(0), torch.tensor([1 / 6, 2 / 6, 3 / 6]), atol=0.01)


@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 0.9])
def test_dropout_rate_and_scale(p):
    torch.neuron.manual_seed(8)
    n = 200_000
    y = F.dropout(torch.ones(n, device=DEV), p=p).cpu()
    kept = float((y != 0).double().mean())
    assert abs(kept - (1 - p)) < 5 * math.sqrt(p * (1 - p) / n) + 1e-9
    assert set(y.unique().tolist()) <= {0.0, float(torch.tensor(1.0 / (1 - p), dtype=torch.float32))}
    b = torch.bernoulli(torch.full((n,), p, device=DEV)).cpu()
    assert abs(float(b.mean()) - p) < 5 * math.sqrt(p * (1 - p) / n) + 1e-9


def test_multinomial_and_randperm():
    torch.neuron.manual_seed(9)
    probs = torch.tensor([[0.1, 0.0, 0.2, 0.7], [0.25, 0.25, 0.25, 0.25]], device=DEV)
    n = 40_000
    s = torch.multinomial(probs, n, replacement=True).cpu()
    assert s.shape == (2, n) and s.dtype == torch.int64
    assert not (s[0] == 1).any(), "a zero-probability category was drawn"
    freq = torch.stack([torch.bincount(row, minlength=4).double() / n for row in s])
    assert torch.allclose(freq, probs.cpu().double(), atol=0.015)
    w = torch.multinomial(probs, 3, replacement=False).cpu()
    assert all(len(set(row.tolist())) == 3 for row in w) and not (w[0] == 1).any()
    first = torch.stack([torch.multinomial(probs[0], 1) for _ in range(3000)]).cpu().flatten()
    assert abs(float((first == 3).double().mean()) - 0.7) < 0.04
    with pytest.raises(RuntimeError, match="invalid multinomial distribution"):
        torch.multinomial(torch.zeros(3, device=DEV), 1)
    with pytest.raises(RuntimeError, match="cannot sample n_sample > prob_dist.size"):
        torch.multinomial(probs, 5)
    for length in (0, 1, 17, 5000):
        p = torch.randperm(length, device=DEV).cpu()
        assert torch.equal(p.sort().values, torch.arange(length))
    assert not torch.equal(torch.randperm(5000, device=DEV).cpu(), torch.arange(5000))


def test_explicit_generators_are_independent_and_restorable():
    g = torch.Generator(DEV).manual_seed(42)
    torch.neuron.manual_seed(1)
    default_before = torch.neuron.get_rng_state()
    a = torch.rand(10, device=DEV, generator=g)
    b = torch.randn(10, device=DEV, generator=g)
    c = torch.randint(0, 9, (10,), device=DEV, generator=g)
    assert torch.equal(torch.neuron.get_rng_state(), default_before), "an explicit generator moved the default"
    assert int(g.get_state()[8:].view(torch.int64)) == 36
    g2 = torch.Generator(DEV).manual_seed(42)
    assert torch.equal(torch.rand(10, device=DEV, generator=g2).cpu(), a.cpu())
    saved = g.get_state()
    d = torch.rand(10, device=DEV, generator=g)
    g.set_state(saved)
    assert torch.equal(torch.rand(10, device=DEV, generator=g).cpu(), d.cpu())
    assert b.device.type == c.device.type == DEV
    with pytest.raises(RuntimeError, match="Expected a 'neuron' device type for generator"):
        torch.rand(3, device=DEV, generator=torch.Generator().manual_seed(1))
    with pytest.raises(RuntimeError, match="Expected a 'cpu' device type for generator"):
        torch.rand(3, generator=g)


def test_generator_state_round_trips_through_a_checkpoint():
    g = torch.Generator(DEV).manual_seed(3)
    torch.rand(20, device=DEV, generator=g)
    torch.neuron.manual_seed(17)
    torch.randn(9, device=DEV)
    buf = io.BytesIO()
    torch.save({"device": torch.neuron.get_rng_state(), "gen": g.get_state()}, buf)
    expect_default, expect_gen = torch.rand(8, device=DEV).cpu(), torch.rand(8, device=DEV, generator=g).cpu()
    buf.seek(0)
    ckpt = torch.load(buf, weights_only=True)
    torch.neuron.set_rng_state(ckpt["device"])
    g.set_state(ckpt["gen"])
    assert torch.equal(torch.rand(8, device=DEV).cpu(), expect_default)
    assert torch.equal(torch.rand(8, device=DEV, generator=g).cpu(), expect_gen)


def test_rng_state_all_and_fork_rng():
    torch.manual_seed(21)
    states = torch.neuron.get_rng_state_all()
    x = [torch.rand(5, device=f"neuron:{i}").cpu() for i in range(torch.neuron.device_count())]
    torch.neuron.set_rng_state_all(states)
    y = [torch.rand(5, device=f"neuron:{i}").cpu() for i in range(torch.neuron.device_count())]
    assert all(torch.equal(a, b) for a, b in zip(x, y))
    before = torch.neuron.get_rng_state()
    with torch.random.fork_rng(device_type="neuron"):
        torch.rand(100, device=DEV)
    assert torch.equal(torch.neuron.get_rng_state(), before)


def test_bad_states_are_refused_with_the_layout():
    with pytest.raises(RuntimeError, match=r"16 bytes \(seed: uint64, offset: int64.*5056 bytes \(a CPU mt19937"):
        torch.neuron.set_rng_state(torch.get_rng_state())
    with pytest.raises(RuntimeError, match="multiple of 4"):
        torch.neuron.set_rng_state(_state(1, 6))
    with pytest.raises(RuntimeError, match="multiple of 4"):
        torch.Generator(DEV).set_offset(3)


def _is_dispatcher_op(name: str) -> bool:
    op, _, overload = name.partition(".")
    try:
        torch._C._dispatch_find_schema_or_throw(op, overload)
        return True
    except RuntimeError:
        return False


def test_every_op_that_takes_a_generator_has_a_neuron_kernel_or_decomposes():
    # An op reaching host execution with a generator would draw from a CPU generator; host
    # execution refuses it, so every such op must be served by a random kernel or decompose.
    missing = []
    for schema in torch._C._jit_get_all_schemas():
        if not schema.name.startswith("aten::") or not any("Generator" in str(a.type) for a in schema.arguments):
            continue
        name = schema.name + ("." + schema.overload_name if schema.overload_name else "")
        if not _is_dispatcher_op(name):
            continue  # a TorchScript-only builtin (aten::manual_seed.generator, ...)
        has = lambda key: torch._C._dispatch_has_kernel_for_dispatch_key(name, key)  # noqa: E731
        if not has("CPU") or has("CompositeImplicitAutograd") or has("CompositeExplicitAutograd"):
            continue  # no CPU kernel to escape to (CUDA-only), or it decomposes into ops below
        if not has("PrivateUse1"):
            missing.append(name)
    assert not missing, f"random ops with a CPU kernel but no neuron kernel: {missing}"
