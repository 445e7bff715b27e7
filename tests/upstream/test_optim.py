"""Optimizers suite, modelled on upstream test/test_optim.py ``TestOptimRenewed``: every
OptimizerInfo of the wheel's ``optim_db`` steps parameters on ``neuron`` exactly as on CPU, in
its single-tensor, foreach and fused variants where torch offers them on this device; its
state_dict survives a save/load round trip; its LR schedulers give the same schedule."""

import io

import torch  # registers the neuron backend (autoload) before the testing modules load
from torch.optim.lr_scheduler import ReduceLROnPlateau
from torch.testing._internal.common_device_type import instantiate_device_type_tests
from torch.testing._internal.common_optimizers import optim_db, optims
from torch.testing._internal.common_utils import TestCase
from torch.utils._foreach_utils import _get_foreach_kernels_supported_devices, _get_fused_kernels_supported_devices

import upstream_common as common
from upstream_common import tensors_in, to_cpu

SUITE = "optim"
EXPECT = common.load_expectations(SUITE)
OPTIM_DB = common.select(SUITE, optim_db, lambda o: o.name)
SUBJECTS = {o.name: o.name for o in optim_db}
BASES = (
    "test_forloop_matches_cpu",
    "test_foreach_matches_cpu",
    "test_fused_matches_cpu",
    "test_state_dict_round_trip",
    "test_lr_scheduler_matches_cpu",
)
SEED = 1234
STEPS = 3
# Keys that select an implementation or a CUDA-graph mode; the CPU reference always runs
# the single-tensor implementation.
IMPL_KEYS = ("foreach", "fused", "capturable", "differentiable")


def describe(test_name):
    return common.describe(test_name, BASES, SUBJECTS)


def make_params(device, dtype):
    gen = torch.Generator().manual_seed(SEED)
    # 2-D parameters only: Muon accepts nothing else.
    shapes = [(4, 3), (2, 4)]
    return [torch.nn.Parameter(torch.randn(s, generator=gen, dtype=dtype).to(device)) for s in shapes]


def loss_of(params, step, sparse=False):
    gen = torch.Generator().manual_seed(SEED + step)
    if sparse:
        # Optimizers that step only sparse gradients (SparseAdam) get them from embedding lookups.
        rows = torch.randint(0, min(p.shape[0] for p in params), (6,), generator=gen).to(params[0].device)
        return sum(torch.nn.functional.embedding(rows, p, sparse=True).tanh().pow(2).sum() for p in params)
    x = torch.randn(5, 3, generator=gen, dtype=params[0].dtype).to(params[0].device)
    return ((x @ params[0].T) @ params[1].T).tanh().pow(2).sum()


def run_steps(optim_info, kwargs, device, dtype, steps=STEPS, scheduler=None, optimizer=None, params=None):
    params = params if params is not None else make_params(device, dtype)
    opt = optimizer or optim_info.optim_cls(params, **kwargs)
    sched = scheduler(opt) if scheduler else None
    lrs = []
    for step in range(steps):
        def closure(step=step):
            opt.zero_grad()
            loss = loss_of(params, step, sparse=optim_info.only_supports_sparse_grads)
            loss.backward()
            return loss

        loss = opt.step(closure) if optim_info.step_requires_closure else (closure(), opt.step())[0]
        if sched is not None:
            sched.step(loss.item()) if isinstance(sched, ReduceLROnPlateau) else sched.step()
            lrs.append([g["lr"] for g in opt.param_groups])
    return params, opt, lrs


def kwarg_sets(optim_info, device, dtype):
    inputs = optim_info.optim_inputs_func(device=device, dtype=dtype)
    return [(i.desc, {k: v for k, v in i.kwargs.items() if k not in IMPL_KEYS}) for i in inputs
            if i.params is None]


def impl_flags(optim_info, impl):
    """Constructor flags selecting an implementation; optimizers without a foreach variant
    take no flag at all."""
    if "foreach" not in optim_info.supported_impls:
        return {}
    if impl in (None, "single"):
        return {"foreach": False}
    return {impl: True}


class TestOptimRenewed(TestCase):
    def _compare(self, test, optim_info, dtype, actual, expected, what):
        tol = common.tolerance_kwargs(EXPECT, test, optim_info.name, dtype)
        # Scalar state such as ``step`` stays on CPU unless capturable or fused, as for CUDA.
        common.assert_on_device(self, [t for t in tensors_in(actual) if t.dim() > 0])
        common.assert_close(self, to_cpu(actual), expected, **tol, msg=f"{optim_info.name}: {what}")

    def _parity(self, test, device, dtype, optim_info, impl):
        sets = kwarg_sets(optim_info, device, dtype)
        if not sets:
            self.skipTest("no optimizer inputs")
        for desc, kwargs in sets:
            ref_params, ref_opt, _ = run_steps(optim_info, dict(kwargs, **impl_flags(optim_info, None)), "cpu", dtype)
            params, opt, _ = run_steps(optim_info, dict(kwargs, **impl_flags(optim_info, impl)), device, dtype)
            self._compare(test, optim_info, dtype, params, ref_params, f"params after {STEPS} steps ({desc})")
            self._compare(test, optim_info, dtype, list(opt.state.values()), list(ref_opt.state.values()),
                          f"optimizer state after {STEPS} steps ({desc})")

    def _offered(self, optim_info, impl, device):
        device_type = torch.device(device).type
        if impl not in optim_info.supported_impls:
            self.skipTest(f"{optim_info.name} has no {impl} implementation")
        supported = _get_foreach_kernels_supported_devices() if impl == "foreach" else _get_fused_kernels_supported_devices()
        if device_type not in supported:
            self.skipTest(f"torch does not offer {impl} on {device_type}")

    @optims(OPTIM_DB, dtypes=[torch.float32])
    def test_forloop_matches_cpu(self, device, dtype, optim_info):
        self._parity("test_forloop_matches_cpu", device, dtype, optim_info, "single")

    @optims(OPTIM_DB, dtypes=[torch.float32])
    def test_foreach_matches_cpu(self, device, dtype, optim_info):
        self._offered(optim_info, "foreach", device)
        self._parity("test_foreach_matches_cpu", device, dtype, optim_info, "foreach")

    @optims(OPTIM_DB, dtypes=[torch.float32])
    def test_fused_matches_cpu(self, device, dtype, optim_info):
        self._offered(optim_info, "fused", device)
        self._parity("test_fused_matches_cpu", device, dtype, optim_info, "fused")

    @optims(OPTIM_DB, dtypes=[torch.float32])
    def test_state_dict_round_trip(self, device, dtype, optim_info):
        for desc, kwargs in kwarg_sets(optim_info, device, dtype)[:3]:
            params, opt, _ = run_steps(optim_info, kwargs, device, dtype, steps=2)
            buf = io.BytesIO()
            torch.save(opt.state_dict(), buf)
            buf.seek(0)
            state = torch.load(buf)
            twin_params = [torch.nn.Parameter(p.detach().clone()) for p in params]
            twin = optim_info.optim_cls(twin_params, **kwargs)
            twin.load_state_dict(state)
            for t in tensors_in(list(twin.state.values())):
                # Optimizer.load_state_dict moves state to the parameters' device (step may stay on CPU).
                if t.dim() > 0:
                    self.assertEqual(t.device.type, "neuron")
            run_steps(optim_info, kwargs, device, dtype, steps=2, optimizer=opt, params=params)
            run_steps(optim_info, kwargs, device, dtype, steps=2, optimizer=twin, params=twin_params)
            common.assert_close(self, to_cpu(twin_params), to_cpu(params), msg=f"{optim_info.name}: resumed ({desc})")

    @optims(OPTIM_DB, dtypes=[torch.float32])
    def test_lr_scheduler_matches_cpu(self, device, dtype, optim_info):
        desc, kwargs = kwarg_sets(optim_info, device, dtype)[0]
        for schedulers in optim_info.scheduler_inputs:
            for make in schedulers:
                ref_params, _, ref_lrs = run_steps(optim_info, dict(kwargs, **impl_flags(optim_info, None)), "cpu", dtype,
                                                   steps=12, scheduler=make)
                params, _, lrs = run_steps(optim_info, kwargs, device, dtype, steps=12, scheduler=make)
                self.assertEqual(lrs, ref_lrs, msg=f"{optim_info.name}: learning rates ({desc})")
                self._compare("test_lr_scheduler_matches_cpu", optim_info, dtype, params, ref_params,
                              f"params after 12 scheduled steps ({desc})")


instantiate_device_type_tests(TestOptimRenewed, globals(), only_for="neuron")
