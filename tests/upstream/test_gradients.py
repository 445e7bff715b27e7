"""Gradients suite, modelled on upstream test/test_ops_gradients.py ``TestBwdGradients``:
backward on neuron against backward on CPU for every differentiable OpInfo, and
``gradcheck`` in float64 on neuron for a representative subset of ops."""

import itertools

import torch  # registers the neuron backend (autoload) before the testing modules load
from torch.testing._internal.common_device_type import OpDTypes, instantiate_device_type_tests, ops
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.common_utils import TestCase, gradcheck

from torch.utils._pytree import tree_flatten, tree_unflatten

import upstream_common as common
from upstream_common import MAX_SAMPLES, sample_to, tensors_in, to_cpu

SUITE = "gradients"
EXPECT = common.load_expectations(SUITE)
OP_DB = common.select(SUITE, op_db, lambda op: op.full_name)
SUBJECTS = {op.formatted_name: op.full_name for op in op_db}
BASES = ("test_backward_compare_cpu", "test_fn_grad")
SEED = 1234

# One or two ops per family: elementwise, reductions, matmul, convolution, normalisation,
# indexing and views, linear algebra, losses, pooling, attention.
GRADCHECK_OPS = {
    "abs", "exp", "tanh", "sigmoid", "add", "mul", "div", "pow", "maximum", "where", "clamp",
    "sum", "mean", "prod", "amax", "logsumexp", "cumsum", "norm", "var",
    "mm", "bmm", "matmul", "addmm", "einsum", "linalg.solve", "linalg.det", "cholesky",
    "nn.functional.conv1d", "nn.functional.conv2d", "nn.functional.linear",
    "nn.functional.layer_norm", "nn.functional.batch_norm", "nn.functional.group_norm",
    "softmax", "log_softmax", "nn.functional.gelu", "nn.functional.silu",
    "index_select", "gather", "scatter_add", "index_put", "take_along_dim", "masked_fill",
    "cat", "stack", "transpose", "permute", "expand", "narrow", "unfold", "flip", "roll",
    "nn.functional.cross_entropy", "nn.functional.mse_loss", "nn.functional.nll_loss",
    "nn.functional.max_pool2d", "nn.functional.avg_pool2d", "nn.functional.interpolate",
    "nn.functional.embedding", "nn.functional.scaled_dot_product_attention",
}


BACKWARD_OPS = [op for op in OP_DB if op.supports_autograd]
GRADCHECK_OP_INFOS = [op for op in BACKWARD_OPS if op.name in GRADCHECK_OPS]


def describe(test_name):
    return common.describe(test_name, BASES, SUBJECTS)


def _differentiable(value):
    return [t for t in tensors_in(value) if t.requires_grad and (t.is_floating_point() or t.is_complex())]


def _grads(op, sample, grad_outputs_cpu):
    common.seed(SEED)
    out = op(sample.input, *sample.args, **sample.kwargs)
    outs = _differentiable(sample.output_process_fn_grad(out))
    leaves = _differentiable([sample.input, list(sample.args), dict(sample.kwargs)])
    if not outs or not leaves:
        return None
    device = outs[0].device
    gos = [g.to(device) for g in grad_outputs_cpu(outs)]
    grads = torch.autograd.grad(outs, leaves, gos, allow_unused=True)
    return [None if g is None else g for g in grads]


class TestBwdGradients(TestCase):
    exact_dtype = True

    # @ops refuses an empty list, which a narrowed run (NEURON_UPSTREAM_ONLY) can produce.
    @ops(BACKWARD_OPS or OP_DB[:1], dtypes=OpDTypes.supported_backward, allowed_dtypes=(torch.float32,))
    def test_backward_compare_cpu(self, device, dtype, op):
        if not op.supports_autograd:
            self.skipTest("not differentiable")
        samples = list(itertools.islice(op.sample_inputs("cpu", dtype, requires_grad=True), MAX_SAMPLES))
        compared = 0
        for sample in samples:
            # Both sides get the same upstream gradients, drawn once on CPU.
            cache = {}

            def grad_outputs(outs):
                if "g" not in cache:
                    gen = torch.Generator().manual_seed(SEED)
                    cache["g"] = [torch.randn(o.shape, dtype=o.dtype, generator=gen) for o in to_cpu(outs)]
                return cache["g"]

            expected = _grads(op, sample, grad_outputs)
            if expected is None:
                continue
            actual = _grads(op, sample_to(sample, device), grad_outputs)
            common.assert_on_device(self, [g for g in actual if g is not None])
            tol = common.tolerance_kwargs(EXPECT, "test_backward_compare_cpu", op.full_name, dtype)
            common.assert_close(self, to_cpu(actual), expected, **tol, msg=f"{op.full_name}: grads for {sample.summary()}")
            compared += 1
        if not compared:
            self.skipTest("no differentiable samples")

    @ops(GRADCHECK_OP_INFOS or OP_DB[:1], dtypes=OpDTypes.supported_backward, allowed_dtypes=(torch.float64,))
    def test_fn_grad(self, device, dtype, op):
        if op not in GRADCHECK_OP_INFOS:
            self.skipTest("not in the gradcheck subset")
        samples = list(itertools.islice(op.sample_inputs(device, dtype, requires_grad=True), 2))
        if not samples:
            self.skipTest("no samples")
        checked = 0
        for sample in samples:
            # gradcheck perturbs tensors passed to it one by one; tensors requiring grad inside
            # lists (cat, stack, einsum's operands), args and kwargs are passed flat and put
            # back in place for each call.
            structure = [sample.input, list(sample.args), dict(sample.kwargs)]
            flat, spec = tree_flatten(structure)
            slots = [i for i, t in enumerate(flat) if isinstance(t, torch.Tensor) and t.requires_grad]
            leaves = [flat[i] for i in slots]
            if not leaves:
                continue

            def fn(*inputs, flat=flat, spec=spec, slots=slots, sample=sample):
                values = list(flat)
                for i, t in zip(slots, inputs):
                    values[i] = t
                inp, args, kwargs = tree_unflatten(values, spec)
                common.seed(SEED)
                # The OpInfo's wrapper, as upstream: e.g. cholesky's symmetrises its input, which
                # gradcheck perturbs one element at a time.
                out = op.gradcheck_wrapper(op.get_op(), inp, *args, **kwargs)
                return sample.output_process_fn_grad(out)

            checked += 1
            self.assertTrue(
                gradcheck(fn, leaves, check_batched_grad=False, fast_mode=True, raise_exception=True),
                msg=f"{op.full_name}: gradcheck on {sample.summary()}",
            )
        if not checked:
            self.skipTest("no sample has inputs that require grad")


instantiate_device_type_tests(TestBwdGradients, globals(), only_for="neuron")
