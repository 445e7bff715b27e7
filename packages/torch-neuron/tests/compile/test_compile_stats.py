# Copyright 2026 The torch-neuron authors
# SPDX-License-Identifier: Apache-2.0
"""compile_stats(): fallback nodes (host fallbacks at run time) apart from native eager nodes; and
plain torch.compile(model) on a CPU-only graph stays with Inductor."""
from __future__ import annotations

import pytest
import torch
import torch_neuron
from compile_helpers import DEV
from torch import nn

pytestmark = pytest.mark.timeout(300)


def test_fallback_nodes_are_the_ops_that_ran_on_the_host():
    """A compiled AdamW step: its copy_/foreach nodes with native kernels count as eager nodes,
    and exactly the ops the device's counters saw fall back count as fallback nodes."""
    torch.manual_seed(0)
    m = nn.Linear(8, 8).to(DEV)
    opt = torch.optim.AdamW(m.parameters())
    m(torch.randn(4, 8, device=DEV)).sum().backward()

    @torch.compile(backend="neuron")
    def step():
        opt.step()
    torch_neuron.clear_compile_stats()
    before = torch_neuron.get_fallback_ops()
    step()
    after = torch_neuron.get_fallback_ops()
    fell_back = {op for op, n in after.items() if n > before.get(op, 0)}
    s = torch_neuron.compile_stats()
    assert set(s["fallback_reasons"]) == fell_back
    assert "aten::copy_" not in s["fallback_reasons"]
    assert s["eager_nodes"] > 0
    # Counted once per lowering: a second step adds nothing.
    step()
    assert torch_neuron.compile_stats()["eager_nodes"] == s["eager_nodes"]


def test_plain_torch_compile_of_a_cpu_graph_keeps_inductor():
    from torch._dynamo.utils import counters
    torch_neuron.clear_compile_stats()
    counters.clear()
    f = torch.compile(lambda x: torch.relu(x) * 2 + 1)
    x = torch.randn(64)
    torch.testing.assert_close(f(x), torch.relu(x) * 2 + 1)
    assert torch_neuron.compile_stats()["graphs"] == 0
    assert counters["inductor"]["fxgraph_cache_miss"] + counters["inductor"]["fxgraph_cache_hit"] == 1
