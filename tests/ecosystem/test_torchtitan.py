"""TorchTitan 0.3.0 on device ``neuron``, run as its users run it:
``torchrun --nproc_per_node N -m torchtitan.train --module llama3 --config llama3_debugmodel``
plus the knobs listed in the README's TorchTitan section.

One seed checkpoint (torchtitan's ``--checkpoint.create_seed_checkpoint``) gives every
run the same initial weights; the generated datasets give every run the same global
batch per step. FSDP2 on 1 and 2 ranks and TP on 2 ranks must then log the same losses.
"""
from __future__ import annotations

import importlib.metadata
import json
import math
import os
import sys

import pytest

# by distribution metadata: the helper directory below is also named torchtitan
try:
    _VERSION = importlib.metadata.version("torchtitan")
except importlib.metadata.PackageNotFoundError:
    pytest.skip("torchtitan is not installed (make install installs it from tests/ecosystem/requirements.txt)",
                allow_module_level=True)
if _VERSION != "0.3.0":
    pytest.skip(f"written against torchtitan 0.3.0, found {_VERSION}", allow_module_level=True)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "torchtitan"))
import titan_assets
from titan_launch import NEURON_FLAGS, Run, torchrun

SEQ_LEN, GLOBAL_BATCH, STEPS = 128, 4, 10
RUN_TIMEOUT = 300.0
REL_TOL = 1e-4
HERE = os.path.dirname(os.path.abspath(__file__))


class Titan:
    def __init__(self, root: str):
        self.root = root
        self.paths = titan_assets.build_assets(os.path.join(root, "assets"), seq_len=SEQ_LEN,
                                               global_batch=GLOBAL_BATCH, steps=STEPS, dp_degrees=(1, 2))

    def args(self, name: str, dp: int, *extra: str, steps: int = STEPS) -> list[str]:
        return ["--module", "llama3", "--config", "llama3_debugmodel",
                "--hf_assets_path", self.paths["tokenizer"],
                "--dataloader.dataset_path", self.paths[f"dp{dp}"],
                "--training.seq_len", str(SEQ_LEN), "--training.local_batch_size", str(GLOBAL_BATCH // dp),
                "--training.steps", str(steps), "--dump_folder", os.path.join(self.root, name),
                "--metrics.disable_color_printing", *NEURON_FLAGS, *extra]

    def run(self, nproc: int, args: list[str], **kw) -> Run:
        run = torchrun(nproc, args, workdir=self.root, timeout=RUN_TIMEOUT, **kw)
        run.check_ok()
        return run


@pytest.fixture(scope="module")
def titan(tmp_path_factory) -> Titan:
    return Titan(str(tmp_path_factory.mktemp("torchtitan")))


@pytest.fixture(scope="module")
def seed_checkpoint(titan: Titan) -> str:
    run = titan.run(1, titan.args("seed", 1, "--checkpoint.enable", "--checkpoint.create_seed_checkpoint"))
    assert "Created seed checkpoint" in run.output, run.tail()
    path = os.path.join(titan.root, "seed", "checkpoint", "step-0")
    assert os.path.isfile(os.path.join(path, ".metadata")), run.tail()
    return path


def _train_from_seed(titan: Titan, seed: str, name: str, nproc: int, dp: int, *extra: str) -> Run:
    # float32 parameters: the comparison checks parallelism, not bf16 rounding of differently
    # grouped matmuls; load_only: the runs read the seed checkpoint and write none
    run = titan.run(nproc, titan.args(name, dp, "--checkpoint.enable", "--checkpoint.initial_load_path", seed,
                                      "--checkpoint.load_only", "--training.mixed_precision_param", "float32",
                                      *extra))
    assert f"Loading the checkpoint from {seed}" in run.output, run.tail()
    assert "out of data" not in run.output, run.tail()  # the loader must not re-loop or stop early
    return run


@pytest.fixture(scope="module")
def one_rank(titan: Titan, seed_checkpoint: str) -> Run:
    return _train_from_seed(titan, seed_checkpoint, "fsdp1", 1, 1)


def _assert_same_losses(ref: list[float], got: list[float], what: str, run: Run) -> None:
    assert len(got) == len(ref) == STEPS, run.tail()
    bad = [(i + 1, r, g) for i, (r, g) in enumerate(zip(ref, got)) if not math.isclose(r, g, rel_tol=REL_TOL)]
    assert not bad, f"{what}: steps whose loss differs from 1 rank by more than rel {REL_TOL}: {bad}\n{run.tail()}"


# (B=2, L=16) position rows: documents of 5 + 11 tokens and a window that starts inside a
# document (13 + 3), then one document per row (the override's maskless path)
_PACKED = [list(range(5)) + list(range(11)), list(range(3, 16)) + list(range(3))]
_ONE_DOC = [list(range(16)), list(range(16))]


@pytest.mark.parametrize("rows", [_PACKED, _ONE_DOC], ids=["packed_documents", "one_document_per_row"])
def test_sdpa_override_computes_flex_attentions_document_causal_attention(rows):
    """The override's attention on neuron against torchtitan's FlexAttention masks on CPU."""
    import torch
    import torch.nn.functional as F
    import torch_neuron
    from neuron_overrides import SDPADocumentAttention
    from torch.nn.attention.flex_attention import (
        and_masks,
        create_block_mask,
        create_mask,
        flex_attention,
    )
    from torchtitan.models.common.attention import (
        create_varlen_metadata_for_document,
        get_causal_mask_mod,
        get_document_mask_mod,
    )

    positions = torch.tensor(rows)
    (B, L), N, H = positions.shape, 4, 8
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(B, L, N, H, generator=g) for _ in range(3))

    mask_mod = and_masks(get_causal_mask_mod(), get_document_mask_mod(positions))
    flex = flex_attention(*[t.transpose(1, 2) for t in (q, k, v)],
                          block_mask=create_block_mask(mask_mod, B, None, L, L, device="cpu"))
    ref_in = [t.double().requires_grad_() for t in (q, k, v)]
    ref = F.scaled_dot_product_attention(*[t.transpose(1, 2) for t in ref_in],
                                         attn_mask=create_mask(mask_mod, B, 1, L, L, device="cpu")).transpose(1, 2)
    ref.square().sum().backward()
    torch.testing.assert_close(flex.transpose(1, 2), ref.float().detach(), rtol=1e-5, atol=1e-5)

    attn = SDPADocumentAttention.Config().build()
    dev_in = [t.to("neuron").requires_grad_() for t in (q, k, v)]
    meta = create_varlen_metadata_for_document(positions.to("neuron"))
    torch_neuron.clear_op_tracking()
    out = attn(*dev_in, attention_masks=meta)
    out.square().sum().backward()
    sdpa = torch_neuron.get_executed_ops()["aten::_scaled_dot_product_fused_attention_overrideable"]
    assert out.device.type == "neuron"
    torch.testing.assert_close(out.detach().cpu().double(), ref.detach(), rtol=1e-5, atol=1e-5)
    for d, r in zip(dev_in, ref_in):
        torch.testing.assert_close(d.grad.cpu().double(), r.grad, rtol=1e-5, atol=1e-5)
    if rows is _ONE_DOC:
        assert sdpa == {"native": 1, "fallback": 0}, sdpa


def test_llama3_debug_model_forward_backward_matches_cpu_float64():
    """torchtitan's llama3 debug model with the override: loss and every gradient on neuron
    (float32) against the same weights on CPU in float64, on two packed documents per row."""
    import copy

    import torch
    import torch.nn.functional as F
    from torchtitan.config.override import OverrideConfig, apply_overrides
    from torchtitan.models.common.attention import create_varlen_metadata_for_document
    from torchtitan.models.llama3 import model_registry

    cfg = model_registry("debugmodel").model
    assert apply_overrides(OverrideConfig(imports=["neuron_overrides.sdpa_document_causal"]), cfg)
    torch.manual_seed(0)
    with torch.device("meta"):
        model = cfg.build()
    model.to_empty(device="cpu")
    with torch.no_grad():
        model.init_weights(buffer_device=torch.device("cpu"))

    B, L = 2, 128
    tokens = torch.randint(0, 2048, (B, L + 1), generator=torch.Generator().manual_seed(1))
    positions = torch.tensor([list(range(50)) + list(range(78)), list(range(20, 120)) + list(range(28))])

    def loss_and_grads(m, device):
        p = positions.to(device)
        logits = m(tokens[:, :-1].to(device), positions=p, attention_masks=create_varlen_metadata_for_document(p))
        loss = F.cross_entropy(logits.flatten(0, 1).float(), tokens[:, 1:].flatten().to(device))
        loss.backward()
        return loss.item(), {n: q.grad.detach().cpu().double() for n, q in m.named_parameters()}

    ref_loss, ref_grads = loss_and_grads(copy.deepcopy(model).double(), "cpu")
    loss, grads = loss_and_grads(copy.deepcopy(model).to("neuron"), "neuron")
    assert math.isclose(loss, ref_loss, rel_tol=1e-5), (loss, ref_loss)
    assert grads.keys() == ref_grads.keys()
    for name, ref in ref_grads.items():
        err = ((grads[name] - ref).abs().max() / ref.abs().max()).item()
        assert err < 1e-4, f"{name}: gradient differs from CPU float64 by {err:.2e} of its largest entry"


def test_fsdp_one_rank_loss_falls(one_rank: Run):
    losses = one_rank.losses()
    assert len(losses) == STEPS and all(math.isfinite(x) for x in losses), one_rank.tail()
    assert sum(losses[-3:]) / 3 < sum(losses[:3]) / 3 - 0.5, f"loss did not fall: {losses}\n{one_rank.tail()}"


def test_fsdp_two_ranks_match_one_rank(titan: Titan, seed_checkpoint: str, one_rank: Run):
    run = _train_from_seed(titan, seed_checkpoint, "fsdp2", 2, 2)
    assert "dp_shard=2, cp=1, tp=1" in run.output, run.tail()
    _assert_same_losses(one_rank.losses(), run.losses(), "FSDP2 on 2 ranks", run)


def test_tensor_parallel_two_ranks_match_one_rank(titan: Titan, seed_checkpoint: str, one_rank: Run):
    run = _train_from_seed(titan, seed_checkpoint, "tp2", 2, 1, "--parallelism.tensor_parallel_degree", "2")
    assert "active dimensions: ['tp']" in run.output, run.tail()
    _assert_same_losses(one_rank.losses(), run.losses(), "TP=2 on 2 ranks", run)


NATIVE_SHARE_TARGET = 0.90


def test_training_step_fallback_ops_are_the_recorded_ones(titan: Titan):
    """A 2-rank FSDP2 step with torchtitan's defaults (bf16 mixed precision): the ops that run
    on the host are exactly those listed, with a reason each, in torchtitan/fallback_ops.json, and
    at least 90% of the step's op executions run natively on each rank."""
    report_dir = os.path.join(titan.root, "op_report")
    run = titan.run(2, titan.args("ops", 2, steps=3) + ["--op-report", report_dir],
                    entry=[os.path.join(HERE, "torchtitan", "step_op_report.py")])
    assert all(math.isfinite(x) for x in run.losses()), run.tail()
    with open(os.path.join(HERE, "torchtitan", "fallback_ops.json")) as f:
        expected = {op: reason for op, reason in json.load(f)["fallback_ops"].items()}
    for rank in (0, 1):
        with open(os.path.join(report_dir, f"rank{rank}.json")) as f:
            report = json.load(f)
        native = {op for op, n in report["executed_ops"].items() if n["native"]}
        assert "aten::mm" in native, f"rank {rank}: matmuls did not run natively: {report['executed_ops']}"
        n_native = sum(n["native"] for n in report["executed_ops"].values())
        n_host = sum(n["fallback"] for n in report["executed_ops"].values())
        share = n_native / (n_native + n_host)
        print(f"rank {rank}: native share {share:.3f} ({n_native} native, {n_host} host)")
        assert share >= NATIVE_SHARE_TARGET, (
            f"rank {rank}: {share:.3f} of a training step's op executions run natively "
            f"({n_native} native, {n_host} host), below {NATIVE_SHARE_TARGET}: {report['fallback_ops']}")
        seen = set(report["fallback_ops"])
        new, gone = sorted(seen - set(expected)), sorted(set(expected) - seen)
        assert not new and not gone, (
            f"rank {rank}: fallback ops of a training step changed; unlisted: {new}; listed but now "
            f"native or unused: {gone}. Update tests/ecosystem/torchtitan/fallback_ops.json.")
