"""0007 (F09): compiling must not advance the neuron RNG."""

import pytest
import torch

pytestmark = pytest.mark.torch_patch("0007")


def _benchmarking_backend(gm, example_inputs):
    # Autotuning backends run the graph on the example inputs while compiling.
    gm(*example_inputs)
    return gm.forward


def test_compiled_dropout_matches_eager_under_same_seed(neuron):
    def fn(x):
        return x * (torch.rand_like(x) >= 0.5) * 2.0  # dropout drawn from the neuron RNG

    x = torch.ones(256, device=neuron)
    torch.manual_seed(0)
    eager = fn(x).cpu()
    torch._dynamo.reset()
    torch.manual_seed(0)
    compiled = torch.compile(fn, backend=_benchmarking_backend)(x).cpu()
    torch.testing.assert_close(compiled, eager, rtol=0, atol=0)
