"""transformers.Trainer on device "neuron": one process against CPU, and two processes under
torchrun and under `accelerate launch` against one process on the same global batch."""
from __future__ import annotations

import copy

import hf_launch
import hf_models
import pytest
import torch
import torch_neuron
from transformers import Trainer

LOSS_RTOL = 1e-4


def _assert_logged_close(actual: dict, expected: dict, what):
    # The gradient norm catches a wrong gradient scale, to which Adam's updates are blind.
    for key in ("loss", "grad_norm"):
        a, e = actual[key], expected[key]
        assert len(a) == len(e) == hf_models.TRAIN_STEPS, (what, key, a, e)
        torch.testing.assert_close(torch.tensor(a, dtype=torch.float64), torch.tensor(e, dtype=torch.float64),
                                   rtol=LOSS_RTOL, atol=0, msg=lambda m, key=key, a=a, e=e: f"{what}, {key}: {m}\n{a}\n{e}")


def _assert_params_close(actual: dict, expected: dict, what):
    assert actual.keys() == expected.keys(), what
    for name, value in expected.items():
        # Adam divides by sqrt(v): where a gradient is ~0, rounding-level differences move a
        # weight by up to the learning rate, hence an absolute tolerance well below it (3e-3).
        torch.testing.assert_close(actual[name], value, rtol=1e-4, atol=1e-5,
                                   msg=lambda m, name=name: f"{what}, {name}: {m}")


class SingleProcessRuns:
    """One-process Trainer runs on neuron and on CPU, each run once per module."""

    def __init__(self, root):
        self.root = root
        self.runs: dict = {}

    def get(self, kind: str, device: str) -> dict:
        if (kind, device) not in self.runs:
            torch_neuron.clear_op_tracking()
            args = hf_models.trainer_arguments(str(self.root / f"{kind}-{device}"), 1, use_cpu=device == "cpu")
            trainer, logged = hf_models.train(kind, args)
            model = trainer.accelerator.unwrap_model(trainer.model)
            self.runs[kind, device] = {
                "device": args.device, "logged": logged,
                "params": {k: v.detach().cpu() for k, v in model.state_dict().items()},
                "parameter_devices": {str(p.device) for p in model.parameters()},
                "executed": torch_neuron.get_executed_ops(), "fallbacks": set(torch_neuron.get_fallback_ops()),
                "tied": model.get_output_embeddings().weight is model.get_input_embeddings().weight}
        return copy.copy(self.runs[kind, device])


@pytest.fixture(scope="module")
def single_process(tmp_path_factory):
    return SingleProcessRuns(tmp_path_factory.mktemp("trainer"))


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_trainer_on_neuron_matches_cpu(kind, single_process, fallback_ops):
    neuron = single_process.get(kind, "neuron")
    cpu = single_process.get(kind, "cpu")
    fallback_ops.update(neuron["fallbacks"])
    assert neuron["device"] == torch.device("neuron", 0) and cpu["device"] == torch.device("cpu")
    assert neuron["parameter_devices"] == {"neuron:0"}
    assert sum(c["native"] for c in neuron["executed"].values()) > 0, neuron["executed"]
    assert neuron["tied"] == cpu["tied"] == (kind == "gpt2")
    assert cpu["logged"]["loss"][-1] < cpu["logged"]["loss"][0]
    _assert_logged_close(neuron["logged"], cpu["logged"], f"{kind} Trainer, neuron vs cpu")
    _assert_params_close(neuron["params"], cpu["params"], f"{kind} trained weights, neuron vs cpu")


def test_trainer_bf16_mixed_precision_matches_cpu(tmp_path):
    # accelerate's autocast(device_type="neuron"): neuron follows CUDA's cast lists, CPU its own,
    # hence bf16-level tolerances.
    runs = {}
    for device in ("cpu", "neuron"):
        args = hf_models.trainer_arguments(str(tmp_path / device), 1, use_cpu=device == "cpu", bf16=True)
        trainer = Trainer(model=hf_models.tiny_model("llama").train(), args=args,
                          train_dataset=hf_models.ArithmeticSequences(hf_models.GLOBAL_BATCH * hf_models.TRAIN_STEPS))
        dtypes = set()
        trainer.model.model.layers[0].self_attn.q_proj.register_forward_hook(lambda m, i, o, seen=dtypes: seen.add(o.dtype))
        trainer.train()
        assert trainer.accelerator.mixed_precision == "bf16" and dtypes == {torch.bfloat16}, (device, dtypes)
        runs[device] = [e["loss"] for e in trainer.state.log_history if "loss" in e]
    assert args.device == torch.device("neuron", 0)
    torch.testing.assert_close(torch.tensor(runs["neuron"]), torch.tensor(runs["cpu"]), rtol=1e-2, atol=0)


def _check_two_process_run(reports, reference, what):
    for r in reports:
        rank = r["rank"]
        where = f"{what}, rank {rank}"
        assert r["accelerator_distributed_type"] == r["trainer_distributed_type"] == "DistributedType.MULTI_NEURON", where
        assert r["c10d_backend"] == "neuron", where
        assert r["accelerator_device"] == r["args_device"] == f"neuron:{rank}", where
        assert r["parameter_devices"] == [f"neuron:{rank}"], where
        assert r["native_op_calls"] > 0 and "aten::mm" in r["executed_ops"], where
        _assert_logged_close(r["logged"], reference["logged"], f"{where}, vs one process")


@pytest.mark.parametrize("launcher,kind", [("torchrun", "gpt2"), ("accelerate", "llama")])
def test_two_processes_match_one(launcher, kind, single_process, tmp_path, fallback_ops):
    reference = single_process.get(kind, "neuron")
    reports = hf_launch.run_trainer(launcher, kind, tmp_path)
    for r in reports:
        fallback_ops.update(r["fallback_ops"])
    what = f"{launcher} --nproc 2, {kind}"
    _check_two_process_run(reports, reference, what)
    _assert_params_close(torch.load(tmp_path / "params.pt"), reference["params"], f"{what}: rank 0 weights vs one process")
