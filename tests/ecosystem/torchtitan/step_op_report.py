"""``torchtitan.train`` with a record of the ops one training step runs on each rank.

    torchrun ... step_op_report.py --op-report DIR [torchtitan arguments]

Training is torchtitan's own; the only addition wraps ``Trainer.train_step`` so that
step ``--op-report-step`` (default 2: step 1 also sets up lazily built state) starts
from cleared op counters, and its ``torch_neuron.get_fallback_ops()``,
``get_executed_ops()``, ``get_op_stats()`` (per dtype) and ``native_rejections()`` (why a
kernel-library op ran on the host; accumulated over the run) go to ``DIR/rank<R>.json``.
"""
from __future__ import annotations

import json
import os
import sys


def _pop_option(argv: list[str], name: str, default: str | None = None) -> str | None:
    if name in argv:
        i = argv.index(name)
        value = argv[i + 1]
        del argv[i:i + 2]
        return value
    return default


def main() -> None:
    out_dir = _pop_option(sys.argv, "--op-report")
    step = int(_pop_option(sys.argv, "--op-report-step", "2"))
    if out_dir is None:
        raise SystemExit("step_op_report.py needs --op-report DIR")

    import torch_neuron
    from torchtitan import train
    from torchtitan.trainer import Trainer

    train_step = Trainer.train_step

    def recorded_train_step(self, *args, **kwargs):
        if self.step != step:
            return train_step(self, *args, **kwargs)
        torch_neuron.clear_op_tracking()
        result = train_step(self, *args, **kwargs)
        report = {"step": step, "fallback_ops": torch_neuron.get_fallback_ops(),
                  "executed_ops": torch_neuron.get_executed_ops(),
                  "op_stats": torch_neuron.get_op_stats(),
                  "native_rejections": [{"op": op, "dtype": dtype, "shapes": repr(shapes), "reason": reason}
                                        for (op, dtype, shapes), reason in torch_neuron.native_rejections().items()]}
        os.makedirs(out_dir, exist_ok=True)
        with open(os.path.join(out_dir, f"rank{os.environ.get('RANK', '0')}.json"), "w") as f:
            json.dump(report, f, indent=1, sort_keys=True)
        return result

    Trainer.train_step = recorded_train_step
    train.main()


if __name__ == "__main__":
    main()
