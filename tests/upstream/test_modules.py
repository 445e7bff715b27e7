"""Modules suite, modelled on upstream test/test_modules.py ``TestModule``: every ModuleInfo of
the wheel's ``module_db`` on ``neuron`` against the same module on CPU, in train and eval mode:
forward and backward parity, ``to()``, ``state_dict`` save/load, non-contiguous inputs."""

import copy
import io

import torch  # registers the neuron backend (autoload) before the testing modules load
from torch.testing._internal.common_device_type import instantiate_device_type_tests
from torch.testing._internal.common_modules import module_db, modules
from torch.testing._internal.common_utils import TestCase, noncontiguous_like
from torch.utils._pytree import tree_map

import upstream_common as common
from upstream_common import tensors_in, to_cpu, to_device

SUITE = "modules"
EXPECT = common.load_expectations(SUITE)
MODULE_DB = common.select(SUITE, module_db, lambda m: m.name)
SUBJECTS = {m.formatted_name: m.name for m in module_db}
BASES = ("test_forward", "test_to", "test_save_load", "test_non_contiguous_tensors")
SEED = 1234
MAX_INPUTS = 2


def describe(test_name):
    return common.describe(test_name, BASES, SUBJECTS)


def _inputs(module_info, dtype, training):
    inputs = module_info.module_inputs_func(module_info, device="cpu", dtype=dtype, requires_grad=True,
                                            training=training)
    return [i for i in inputs if i.forward_input is not None][:MAX_INPUTS]


def _build(module_info, module_input, dtype, training, device):
    """The module as constructed on CPU from a fixed seed, then moved to ``device``; lazy modules
    are materialised on CPU first so both copies start from the same parameters."""
    args = to_device(module_input.constructor_input.args, "cpu")
    kwargs = to_device(module_input.constructor_input.kwargs, "cpu")
    common.seed(SEED)
    m = module_info.module_cls(*args, **kwargs)
    if module_info.is_lazy:
        fwd = module_input.forward_input
        with torch.no_grad():
            m(*to_device(fwd.args, "cpu"), **to_device(fwd.kwargs, "cpu"))
    m = m.to(dtype).train(training)
    return copy.deepcopy(m).to(device), m


def _forward(m, fwd, device, noncontiguous=False):
    args, kwargs = to_device(fwd.args, device), to_device(fwd.kwargs, device)
    if noncontiguous:
        args, kwargs = tree_map(lambda t: _noncontig(t), (args, kwargs))
    common.seed(SEED)
    return m(*args, **kwargs), (args, kwargs)


def _noncontig(t):
    if not isinstance(t, torch.Tensor):
        return t
    out = noncontiguous_like(t.detach())
    return out.requires_grad_(t.requires_grad) if out.is_floating_point() or out.is_complex() else out


def _float_outputs(out):
    return [t for t in tensors_in(out) if t.is_floating_point() or t.is_complex()]


def _backward(m, out, inputs):
    outs = [t for t in _float_outputs(out) if t.requires_grad]
    if not outs:
        return None
    gen = torch.Generator().manual_seed(SEED)
    gos = [torch.randn(t.shape, dtype=t.dtype, generator=gen).to(t.device) for t in outs]
    leaves = [t for t in tensors_in(inputs) if t.requires_grad] + [p for p in m.parameters() if p.requires_grad]
    return torch.autograd.grad(outs, leaves, gos, allow_unused=True)


class TestModule(TestCase):
    exact_dtype = True

    def _compare(self, test, module_info, dtype, actual, expected, what):
        tol = common.tolerance_kwargs(EXPECT, test, module_info.name, dtype)
        common.assert_on_device(self, actual)
        common.assert_close(self, to_cpu(actual), expected, **tol, msg=f"{module_info.name}: {what}")

    def _parity(self, test, module_info, dtype, training, device, noncontiguous):
        inputs = _inputs(module_info, dtype, training)
        if not inputs:
            self.skipTest("no module inputs")
        for mi in inputs:
            m_dev, m_cpu = _build(module_info, mi, dtype, training, device)
            out_cpu, in_cpu = _forward(m_cpu, mi.forward_input, "cpu")
            out_dev, in_dev = _forward(m_dev, mi.forward_input, device, noncontiguous)
            self._compare(test, module_info, dtype, out_dev, out_cpu, f"forward, {mi.desc}")
            self.assertEqual(m_dev.training, training)
            grads_cpu = _backward(m_cpu, out_cpu, in_cpu)
            if grads_cpu is not None:
                grads_dev = _backward(m_dev, out_dev, in_dev)
                self._compare(test, module_info, dtype, [g for g in grads_dev if g is not None],
                              [g for g in grads_cpu if g is not None], f"backward, {mi.desc}")
            self._compare(test, module_info, dtype, m_dev.state_dict(), m_cpu.state_dict(),
                          f"buffers after forward, {mi.desc}")

    @modules(MODULE_DB, allowed_dtypes=(torch.float32,))
    def test_forward(self, device, dtype, module_info, training):
        self._parity("test_forward", module_info, dtype, training, device, noncontiguous=False)

    @modules(MODULE_DB, allowed_dtypes=(torch.float32,))
    def test_non_contiguous_tensors(self, device, dtype, module_info, training):
        self._parity("test_non_contiguous_tensors", module_info, dtype, training, device, noncontiguous=True)

    @modules(MODULE_DB, allowed_dtypes=(torch.float32,))
    def test_to(self, device, dtype, module_info, training):
        for mi in _inputs(module_info, dtype, training)[:2]:
            m_dev, m_cpu = _build(module_info, mi, dtype, training, device)
            params = list(m_dev.parameters())
            for t in list(m_dev.parameters()) + list(m_dev.buffers()):
                self.assertEqual(t.device.type, "neuron")
            # Module.to keeps Parameter objects (their .data is swapped), as for CUDA.
            m_dev.to(torch.float64)
            self.assertTrue(all(a is b for a, b in zip(params, m_dev.parameters())))
            for p in m_dev.parameters():
                self.assertEqual((p.device.type, p.dtype), ("neuron", torch.float64))
            back = m_dev.to(dtype).to("cpu")
            self._compare_cpu(module_info, dtype, back.state_dict(), m_cpu.state_dict(), f"to() round trip, {mi.desc}")

    def _compare_cpu(self, module_info, dtype, actual, expected, what):
        tol = common.tolerance_kwargs(EXPECT, "test_to", module_info.name, dtype)
        for t in tensors_in(actual):
            self.assertEqual(t.device.type, "cpu")
        self.assertEqual(actual, expected, **tol, msg=f"{module_info.name}: {what}")

    @modules(MODULE_DB, allowed_dtypes=(torch.float32,))
    def test_save_load(self, device, dtype, module_info, training):
        for mi in _inputs(module_info, dtype, training)[:2]:
            m_dev, m_cpu = _build(module_info, mi, dtype, training, device)
            buf = io.BytesIO()
            torch.save(m_dev.state_dict(), buf)
            buf.seek(0)
            loaded = torch.load(buf)
            for t in tensors_in(loaded):
                self.assertEqual(t.device.type, "neuron")
            buf.seek(0)
            self.assertEqual(torch.load(buf, map_location="cpu"), m_cpu.state_dict())
            fresh, _ = _build(module_info, mi, dtype, training, device)
            with torch.no_grad():
                for t in list(fresh.parameters()) + list(fresh.buffers()):
                    if t.is_floating_point():
                        t.zero_()
            fresh.load_state_dict(loaded)
            out_dev, _ = _forward(fresh, mi.forward_input, device)
            out_cpu, _ = _forward(m_cpu, mi.forward_input, "cpu")
            tol = common.tolerance_kwargs(EXPECT, "test_save_load", module_info.name, dtype)
            common.assert_close(self, to_cpu(out_dev), out_cpu, **tol, msg=f"{module_info.name}: forward after load, {mi.desc}")


instantiate_device_type_tests(TestModule, globals(), only_for="neuron")
