"""One rank of a multi-process Trainer run, started by torchrun or `accelerate launch` with no
device or backend setting: what accelerate picks on its own is what is checked.

usage: hf_trainer_worker.py {gpt2|llama} OUT_DIR
Writes OUT_DIR/rank{RANK}.json (what accelerate chose, the losses, where the ops ran) and, on
rank 0, OUT_DIR/params.pt (the trained weights on CPU).
"""
from __future__ import annotations

import json
import os
import sys

import hf_models
import torch
import torch.distributed as dist


def main(kind: str, out_dir: str) -> None:
    import torch_neuron
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    rank = int(os.environ["RANK"])
    accelerator = Accelerator()
    report = {
        "rank": rank,
        "accelerator_device": str(accelerator.device),
        "accelerator_distributed_type": str(accelerator.distributed_type),
        "c10d_backend": dist.get_backend() if dist.is_initialized() else None,
    }
    torch_neuron.clear_op_tracking()
    args = hf_models.trainer_arguments(os.path.join(out_dir, "trainer"), dist.get_world_size())
    trainer, logged = hf_models.train(kind, args)
    executed = torch_neuron.get_executed_ops()
    report.update(
        args_device=str(args.device),
        trainer_distributed_type=str(AcceleratorState().distributed_type),
        parameter_devices=sorted({str(p.device) for p in trainer.model.parameters()}),
        logged=logged,
        native_op_calls=sum(c["native"] for c in executed.values()),
        executed_ops=sorted(executed),
        fallback_ops=sorted(torch_neuron.get_fallback_ops()),
    )
    if rank == 0:
        model = trainer.accelerator.unwrap_model(trainer.model)
        torch.save({k: v.detach().cpu() for k, v in model.state_dict().items()}, os.path.join(out_dir, "params.pt"))
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(report, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
