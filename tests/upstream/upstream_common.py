"""Shared pieces of the upstream-style suites: moving samples between devices, comparing
neuron results with CPU results, and reading the suite's expectation file."""

import os
import pathlib
import sys

import torch
from torch.utils._pytree import tree_flatten, tree_map

REPO = pathlib.Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tools.upstream import expectations as _expectations  # noqa: E402


def _current_test_fn():
    """The running unittest test function, found by walking the stack's frames.

    What torch.testing._internal.common_utils.extract_test_fn computes, without its
    ``inspect.stack()``: that builds a FrameInfo for every frame, reading each frame's source
    lines and resolving its module (``inspect.getmodule``, a scan of sys.modules on a cache
    miss). It runs several times per test (each sample_inputs / reference_inputs /
    error_inputs iterator asks for the test function), at ~50 ms a call under pytest-xdist's
    deep stacks, more as sys.modules grows: most of a compare-vs-CPU test's time. This walk
    checks the same frames in the same order (innermost first) for the same ``self``.
    """
    import unittest

    frame = sys._getframe(1)
    try:
        while frame is not None:
            self_val = frame.f_locals.get("self")
            if isinstance(self_val, unittest.TestCase):
                *_, cls_name, test_name = self_val.id().rsplit(".", 2)
                if cls_name == type(self_val).__name__ and test_name.startswith("test"):
                    return getattr(self_val, test_name).__func__
            frame = frame.f_back
    except Exception:  # noqa: BLE001 - as upstream: no test function found
        pass
    finally:
        del frame
    return None


def _install_fast_test_fn_lookup():
    from torch.testing._internal import common_utils
    from torch.testing._internal.opinfo import core

    # Both modules call the name through their globals (core imported it by name).
    common_utils.extract_test_fn = _current_test_fn
    core.extract_test_fn = _current_test_fn


_install_fast_test_fn_lookup()

DEVICE = "neuron"
# Samples per op and dtype, from sample_inputs and again from reference_inputs; keeps the
# full sweep inside its time budget on a 2-core machine.
MAX_SAMPLES = int(os.environ.get("NEURON_UPSTREAM_MAX_SAMPLES", "4"))


# The accounting names of the backend's random kernels (csrc/aten/Random*.cpp).
RANDOM_KERNELS = frozenset(
    "aten::" + name for name in (
        "uniform_", "normal_", "random_", "bernoulli_", "exponential_", "geometric_", "log_normal_",
        "cauchy_", "native_dropout", "multinomial", "randperm", "poisson", "binomial",
        "_standard_gamma", "rrelu_with_noise"))


def dtype_name(dtype):
    return str(dtype).removeprefix("torch.")


def describe(test_name, bases, subjects, device=DEVICE):
    """Split an instantiated test name ``<base>_<subject>_<device>[_<dtype>]`` into its parts.

    ``subjects`` maps the formatted subject name used in test names to its full name.
    """
    base = max((b for b in bases if test_name.startswith(b + "_")), key=len, default=None)
    if base is None:
        return None
    rest = test_name[len(base) + 1 :]
    marker = f"_{device}"
    idx = rest.rfind(marker)
    if idx < 0:
        return None
    formatted, dtype = rest[:idx], rest[idx + len(marker) :].lstrip("_") or None
    variant = None
    for suffix in ("_train_mode", "_eval_mode"):
        if formatted.endswith(suffix):
            formatted, variant = formatted[: -len(suffix)], suffix[1:]
    return {
        "test": base,
        "subject": subjects.get(formatted, formatted),
        "dtype": dtype,
        "variant": variant,
    }


def load_expectations(suite):
    return _expectations.load(suite)


def seed(value):
    """Seeds the generators these suites compare: CPU's and every neuron device's.

    torch.manual_seed does the same and also queues a seed for CUDA, XPU and MTIA, each of
    which formats the caller's whole stack (traceback.format_stack) while those are not
    initialized: tens of milliseconds per test at the per-sample rate the suites seed."""
    torch.default_generator.manual_seed(value)
    torch.neuron.manual_seed_all(value)


def to_device(value, device):
    """Copy every tensor in a nested structure to ``device``, keeping requires_grad leaves."""

    def move(t):
        if not isinstance(t, torch.Tensor):
            return t
        out = t.detach().to(device)
        if t.requires_grad:
            out.requires_grad_(True)
        return out

    return tree_map(move, value)


def sample_to(sample, device):
    """A SampleInput with all tensors moved to ``device`` (leaf tensors keep requires_grad)."""

    def move(t):
        if not isinstance(t, torch.Tensor):
            return t
        # Always a copy: in-place variants must not write into the shared CPU sample.
        out = t.detach().to(device, copy=True)
        if t.requires_grad:
            out.requires_grad_(True)
        return out

    moved = sample.transform(move)
    moved.name = sample.name
    # Factory functions take the device as a keyword, which transform() leaves alone.
    if isinstance(moved.kwargs.get("device"), (str, torch.device)):
        moved.kwargs["device"] = device
    return moved


def to_cpu(value):
    return tree_map(lambda t: t.detach().cpu() if isinstance(t, torch.Tensor) else t, value)


def tensors_in(value):
    out = []
    tree_map(lambda t: out.append(t) if isinstance(t, torch.Tensor) else t, value)
    return out


def assert_on_device(testcase, value, device_type=DEVICE, index=None):
    for t in tensors_in(value):
        testcase.assertEqual(t.device.type, device_type, msg=f"result on {t.device}, expected {device_type}")
        if index is not None:
            testcase.assertEqual(t.device.index, index, msg=f"result on {t.device}, expected index {index}")


def _bitwise_equal(actual, expected):
    """True when both nested results hold the same values exactly, which is the common case here
    (host execution runs the CPU kernels); the full comparison then is not needed."""
    a_leaves, a_spec = tree_flatten(actual)
    e_leaves, e_spec = tree_flatten(expected)
    if a_spec != e_spec:
        return False
    for a, e in zip(a_leaves, e_leaves):
        if isinstance(a, torch.Tensor) and isinstance(e, torch.Tensor):
            if (a.dtype, a.shape, a.layout) != (e.dtype, e.shape, e.layout) or a.layout != torch.strided:
                return False
            if a.dtype == torch.complex32:  # torch.equal has no ComplexHalf kernel
                return False
            if a.is_conj() != e.is_conj() or a.is_neg() != e.is_neg() or not torch.equal(a, e):
                return False
        elif isinstance(a, torch.Tensor) or isinstance(e, torch.Tensor) or type(a) is not type(e) or a != e:
            return False
    return True


def assert_close(testcase, actual, expected, msg=None, **tol):
    """``actual`` (already on CPU) against the CPU ``expected``: exact match first, then
    TestCase.assertEqual with the dtype's default or the expectation file's tolerance."""
    if _bitwise_equal(actual, expected):
        return
    testcase.assertEqual(actual, expected, msg=msg, **tol)


def tolerance_kwargs(expect, test, subject, dtype):
    tol = expect.tolerance(test, subject, dtype_name(dtype) if dtype is not None else None)
    return {"atol": tol.atol, "rtol": tol.rtol} if tol else {}


def same_error(testcase, cpu_exc, neuron_exc, what):
    """The neuron error must be of the CPU error's type (messages name the device, so the
    error-input tests check them against the OpInfo's pattern instead)."""
    testcase.assertIs(type(neuron_exc), type(cpu_exc), msg=f"{what}: neuron raised {type(neuron_exc).__name__}: "
                      f"{first_line(neuron_exc)}; cpu raised {type(cpu_exc).__name__}: {first_line(cpu_exc)}")


def first_line(exc):
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


# The smoke subset (``python -m tools.upstream.run --smoke``): one or two subjects per family,
# chosen to touch the backend's native kernels, its host-execution path, views, factories,
# reductions, indexing, linear algebra, RNG and multi-output ops.
SMOKE = {
    "ops": {
        "add", "mul", "exp", "where", "sum", "amax", "mm", "addmm", "softmax", "index_put",
        "cat", "as_strided", "arange", "sort", "nn.functional.conv2d", "nn.functional.layer_norm",
        "linalg.solve", "bernoulli",
    },
    "gradients": {"mul", "sum", "mm", "nn.functional.layer_norm", "nn.functional.conv2d"},
    "modules": {"nn.Linear", "nn.Conv2d", "nn.BatchNorm2d", "nn.LSTM", "nn.LazyLinear"},
    "optim": {"SGD", "AdamW", "LBFGS"},
}


def select(suite, db, name_of):
    """The database entries this run covers: all of them, the smoke subset, or the names in
    NEURON_UPSTREAM_ONLY (comma-separated, for reproducing one failure quickly)."""
    only = os.environ.get("NEURON_UPSTREAM_ONLY")
    if only:
        wanted = {n.strip() for n in only.split(",") if n.strip()}
    elif os.environ.get("NEURON_UPSTREAM_SMOKE") == "1":
        wanted = SMOKE[suite]
    else:
        return list(db)
    return [entry for entry in db if name_of(entry) in wanted]
