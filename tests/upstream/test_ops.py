"""Ops suite, modelled on upstream test/test_ops.py ``TestCommon``: every OpInfo of the wheel's
``op_db`` on ``neuron`` against the same op on CPU, for every dtype the OpInfo supports.

The class keeps upstream's name and test names, so the OpInfo database's own skips and
xfails for ``TestCommon`` apply here as they do upstream.
"""

import itertools
import re

import torch  # registers the neuron backend (autoload) before the testing modules load
import torch_neuron
from torch.testing._internal.common_device_type import (
    OpDTypes,
    deviceCountAtLeast,
    instantiate_device_type_tests,
    ops,
)
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.common_utils import TestCase
from torch.testing._internal.opinfo.core import BinaryUfuncInfo
from torch.utils._pytree import tree_map

import upstream_common as common
from upstream_common import MAX_SAMPLES, sample_to, to_cpu

SUITE = "ops"
EXPECT = common.load_expectations(SUITE)
OP_DB = common.select(SUITE, op_db, lambda op: op.full_name)
SUBJECTS = {op.formatted_name: op.full_name for op in op_db}
BASES = (
    "test_compare_cpu",
    "test_noncontiguous_samples",
    "test_out",
    "test_variant_consistency_eager",
    "test_variant_consistency_eager_other_dtypes",
    "test_errors",
    "test_multiple_devices",
)
SEED = 1234
OUT_OPS = [op for op in OP_DB if op.supports_out]
ERROR_OPS = [op for op in OP_DB if op.error_inputs_func is not None]
VARIANT_DTYPES = (torch.float32, torch.complex64)
VARIANT_OTHER_OPS = [op for op in OP_DB if (op.method_variant or op.inplace_variant)
                     and not set(VARIANT_DTYPES) & set(op.supported_dtypes("cpu"))]


def describe(test_name):
    return common.describe(test_name, BASES, SUBJECTS)


def compare_samples(op, dtype):
    """CPU samples from sample_inputs, then from reference_inputs past the ones sample_inputs
    already gave (reference_inputs starts with them for most ops)."""
    samples = list(itertools.islice(op.sample_inputs("cpu", dtype), MAX_SAMPLES))
    if op.reference_inputs_func is not None:
        samples += list(itertools.islice(op.reference_inputs("cpu", dtype), MAX_SAMPLES, 2 * MAX_SAMPLES))
    return samples


def call(op, sample, fn=None):
    common.seed(SEED)
    return (fn or op)(sample.input, *sample.args, **sample.kwargs)


RANDOM_KERNELS = common.RANDOM_KERNELS


def ran_random_kernel(thunk):
    """(value, exception, whether the call ran one of the device's random kernels).

    A random op's values follow the device's own generator -- counter-based on neuron, as on
    CUDA, not CPU's Mersenne Twister -- so it is compared with itself on the device (contiguous
    against strided, function against method variant, one device against another). OpInfo's
    wrapper_set_seed restores the generators around the call, so their state cannot tell."""
    torch_neuron.clear_op_tracking()
    value, exc = outcome(thunk)
    return value, exc, bool(set(torch_neuron.get_executed_ops()) & RANDOM_KERNELS)


def outcome(thunk):
    try:
        return thunk(), None
    except Exception as exc:  # noqa: BLE001 - the exception is the value being compared
        return None, exc


def wrong_dtype_for(dtype):
    """An out= dtype the result cannot be safely cast to, or None when every dtype accepts it."""
    if dtype.is_floating_point or dtype.is_complex:
        return torch.int64
    if dtype != torch.bool:
        return torch.bool
    return None


class TestCommon(TestCase):
    exact_dtype = True

    def _check(self, test, op, dtype, actual, expected, sample):
        tol = common.tolerance_kwargs(EXPECT, test, op.full_name, dtype)
        actual = sample.output_process_fn_grad(actual)
        expected = sample.output_process_fn_grad(expected)
        common.assert_on_device(self, actual)
        common.assert_close(self, to_cpu(actual), to_cpu(expected), **tol,
                            msg=f"{op.full_name} {dtype}: sample {sample.summary()}")

    @ops(OP_DB, dtypes=OpDTypes.supported)
    def test_compare_cpu(self, device, dtype, op):
        samples = compare_samples(op, dtype)
        if not samples:
            self.skipTest(f"{op.full_name} has no samples for {dtype}")
        compared = 0
        for sample in samples:
            expected = call(op, sample)
            actual, exc, random_op = ran_random_kernel(lambda: call(op, sample_to(sample, device)))
            if exc is not None:
                raise exc
            if random_op:
                continue  # see ran_random_kernel
            compared += 1
            self._check("test_compare_cpu", op, dtype, actual, expected, sample)
        if not compared:
            self.skipTest("draws random numbers: values follow neuron's counter-based generator, not CPU's "
                          "(as CUDA's do); the strided, variant and two-device tests compare it with itself, "
                          "packages/torch-neuron/tests/test_user_rng_counters.py checks its distributions")

    # Upstream's dtypes for this test: a floating, an integral and a complex one.
    @ops(OP_DB, allowed_dtypes=(torch.float32, torch.long, torch.complex64))
    def test_noncontiguous_samples(self, device, dtype, op):
        samples = list(itertools.islice(op.sample_inputs("cpu", dtype), MAX_SAMPLES))
        if not samples:
            self.skipTest(f"{op.full_name} has no samples for {dtype}")
        for sample in samples:
            # The strided copies are made on the device, so the backend's own strided paths run.
            actual, dev_exc, random_op = ran_random_kernel(
                lambda: call(op, sample_to(sample, device).noncontiguous()))
            expected = call(op, sample_to(sample, device) if random_op else sample)
            if dev_exc is not None:
                # Some CPU kernels refuse strided inputs (native_group_norm checks X is
                # contiguous); neuron must then refuse them the same way, and only then.
                _, cpu_exc = outcome(lambda: call(op, sample.noncontiguous()))
                if cpu_exc is None:
                    raise dev_exc
                common.same_error(self, cpu_exc, dev_exc, f"non-contiguous {sample.summary()}")
                continue
            self._check("test_noncontiguous_samples", op, dtype, actual, expected, sample)

    # @ops refuses an empty list, which a narrowed run (NEURON_UPSTREAM_ONLY) can produce.
    @ops(OUT_OPS or OP_DB[:1], dtypes=OpDTypes.any_one)
    def test_out(self, device, dtype, op):
        if not op.supports_out:
            self.skipTest("no out= variant")
        sample = next(iter(op.sample_inputs("cpu", dtype)), None)
        if sample is None:
            self.skipTest("no samples")
        expected = call(op, sample)
        tensors = common.tensors_in(expected)
        if not tensors or not isinstance(expected, (torch.Tensor, tuple)):
            self.skipTest("op does not return tensors")
        on_device = sample_to(sample, device)

        def outs(like, **kw):
            return tree_map(lambda t: torch.empty_like(t, **kw) if isinstance(t, torch.Tensor) else t, like)

        # CPU first: where CPU's out= variant rejects result-shaped out tensors (histogramdd's
        # Python wrapper takes no tuple of bin edges), neuron must reject them the same way,
        # and nothing more can be checked with this sample.
        _, cpu_exc = outcome(lambda: call(op, sample, lambda *a, **k: op(*a, **k, out=outs(expected))))
        out = outs(expected, device=device)
        if cpu_exc is not None:
            _, dev_exc = outcome(lambda: call(op, on_device, lambda *a, **k: op(*a, **k, out=out)))
            self.assertIsNotNone(dev_exc, msg=f"out=: CPU raised {type(cpu_exc).__name__}: "
                                 f"{common.first_line(cpu_exc)}; neuron did not")
            common.same_error(self, cpu_exc, dev_exc, "out=")
            return
        result, exc, random_op = ran_random_kernel(lambda: call(op, on_device, lambda *a, **k: op(*a, **k, out=out)))
        if exc is not None:
            raise exc
        for got, given in zip(common.tensors_in(result), common.tensors_in(out)):
            self.assertTrue(got is given, msg="out= must return the tensors it was given")
        # A random op's reference is its functional form on the device (see ran_random_kernel).
        reference = call(op, on_device) if random_op else expected
        self._check("test_out", op, dtype, out, reference, sample)

        # Same outcome as CPU for an out= tensor of a dtype the result cannot be cast to.
        wrong = wrong_dtype_for(tensors[0].dtype)
        if wrong is not None:
            cpu_res, cpu_exc = outcome(lambda: call(op, sample, lambda *a, **k: op(*a, **k, out=outs(expected, dtype=wrong))))
            dev_out = outs(expected, dtype=wrong, device=device)
            _, dev_exc = outcome(lambda: call(op, on_device, lambda *a, **k: op(*a, **k, out=dev_out)))
            if cpu_exc is not None:
                self.assertIsNotNone(dev_exc, msg=f"out= of dtype {wrong}: CPU raised "
                                     f"{type(cpu_exc).__name__}: {common.first_line(cpu_exc)}; neuron did not")
                common.same_error(self, cpu_exc, dev_exc, f"out= of dtype {wrong}")
            else:
                self.assertIsNone(dev_exc, msg=f"out= of dtype {wrong}: CPU accepted it, neuron raised {dev_exc!r}")

        # An out= tensor on another device is an error, as it is for CUDA; checked on the first
        # sample whose input is not a 0-dim tensor (those may act as CPU scalars).
        sample = next((s for s in op.sample_inputs("cpu", dtype)
                       if isinstance(s.input, torch.Tensor) and s.input.dim() > 0), None)
        if sample is not None:
            expected = call(op, sample)
            cpu_out = outs(expected)
            _, exc = outcome(lambda: call(op, sample_to(sample, device), lambda *a, **k: op(*a, **k, out=cpu_out)))
            self.assertIsNotNone(exc, msg="out= on cpu for neuron inputs must raise")
            self.assertIsInstance(exc, (RuntimeError, ValueError))

    # Upstream's dtypes for this test: float32 and complex64, where the OpInfo supports them;
    # the ops that support neither (bitwise ops, gcd, ...) run in one dtype of their own below.
    @ops(OP_DB, dtypes=OpDTypes.supported, allowed_dtypes=VARIANT_DTYPES)
    def test_variant_consistency_eager(self, device, dtype, op):
        self._variant_consistency("test_variant_consistency_eager", device, dtype, op)

    @ops(VARIANT_OTHER_OPS or OP_DB[:1], dtypes=OpDTypes.any_one)
    def test_variant_consistency_eager_other_dtypes(self, device, dtype, op):
        if op not in VARIANT_OTHER_OPS:
            self.skipTest("supports float32 or complex64: covered by test_variant_consistency_eager")
        self._variant_consistency("test_variant_consistency_eager_other_dtypes", device, dtype, op)

    def _variant_consistency(self, test, device, dtype, op):
        variants = [("method", op.method_variant), ("inplace", op.inplace_variant)]
        variants = [(k, v) for k, v in variants if v is not None]
        if not variants:
            self.skipTest("no method or in-place variant")
        samples = list(itertools.islice(op.sample_inputs("cpu", dtype), MAX_SAMPLES))
        if not samples:
            self.skipTest("no samples")
        for sample, (kind, variant) in itertools.product(samples, variants):
            if kind == "inplace" and sample.broadcasts_input:
                continue
            dev_sample = sample_to(sample, device)
            actual, dev_exc, random_op = ran_random_kernel(lambda: call(op, dev_sample, variant))
            # A fresh copy: in-place variants write into it. A random op's reference is its
            # function form on the device (see ran_random_kernel).
            ref_sample = sample_to(sample, device if random_op else "cpu")
            expected, cpu_exc = outcome(lambda: call(op, ref_sample, None if random_op else variant))
            what = f"{kind} variant on {sample.summary()}"
            if cpu_exc is not None:
                self.assertIsNotNone(dev_exc, msg=f"{what}: CPU raised {cpu_exc!r}, neuron did not")
                common.same_error(self, cpu_exc, dev_exc, what)
                continue
            if dev_exc is not None:
                raise dev_exc
            if kind == "inplace":
                self.assertTrue(actual is dev_sample.input, msg=f"{what}: must return its input")
            self._check(test, op, dtype, actual, expected, sample)

    @ops(ERROR_OPS or OP_DB[:1], dtypes=OpDTypes.none)
    def test_errors(self, device, op):
        if op.error_inputs_func is None:
            self.skipTest("no error inputs")
        cpu_inputs = list(op.error_inputs("cpu"))
        dev_inputs = list(op.error_inputs(device))
        if not dev_inputs:
            self.skipTest("no error inputs")
        checked = 0
        for i, ei in enumerate(dev_inputs):
            si = ei.sample_input
            _, dev_exc = outcome(lambda: op(si.input, *si.args, **si.kwargs))
            # CPU is the reference: the same error input (same index, when both lists agree in
            # length) must fail there the same way; the OpInfo's pattern applies when it does.
            ref = cpu_inputs[i] if len(cpu_inputs) == len(dev_inputs) else ei
            csi = ref.sample_input
            _, cpu_exc = outcome(lambda: op(csi.input, *csi.args, **csi.kwargs))
            what = f"error input {i} ({ref.error_type.__name__}: {ref.error_regex!r})"
            if cpu_exc is None:
                continue  # not an error on CPU with this torch: nothing to compare against
            checked += 1
            self.assertIsNotNone(dev_exc, msg=f"{what}: CPU raised {type(cpu_exc).__name__}, neuron raised nothing")
            common.same_error(self, cpu_exc, dev_exc, what)
            if isinstance(cpu_exc, ref.error_type) and re.search(ref.error_regex, str(cpu_exc)):
                self.assertTrue(re.search(ref.error_regex, str(dev_exc)),
                                msg=f"{what}: neuron message {common.first_line(dev_exc)!r}")
        if not checked:
            self.skipTest("no error input raises on CPU with this torch version")

    @deviceCountAtLeast(2)
    @ops(OP_DB, allowed_dtypes=(torch.float32, torch.long))  # upstream's dtypes for this test
    def test_multiple_devices(self, devices, dtype, op):
        second = devices[1]
        index = torch.device(second).index
        samples = list(itertools.islice(op.sample_inputs("cpu", dtype), 1))
        if not samples:
            self.skipTest("no samples")
        for sample in samples:
            actual, exc, random_op = ran_random_kernel(lambda: call(op, sample_to(sample, second)))
            if exc is not None:
                raise exc
            expected = call(op, sample_to(sample, devices[0]) if random_op else sample)
            common.assert_on_device(self, actual, index=index)
            self._check("test_multiple_devices", op, dtype, actual, expected, sample)
        # Mixing tensors of two devices in one elementwise op is an error, as for CUDA.
        sample = samples[0]
        other = sample.args[0] if sample.args else None
        if isinstance(op, BinaryUfuncInfo) and isinstance(other, torch.Tensor) and other.dim() > 0:
            with self.assertRaisesRegex(RuntimeError, "device"):
                op(sample.input.to(devices[0]), other.to(second), *sample.args[1:], **sample.kwargs)


instantiate_device_type_tests(TestCommon, globals(), only_for="neuron")
