"""Runs a proof test's multi-rank scenario: one process per rank, as torchrun would start
them (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT), bounded in time.

A test file that uses it runs itself as the rank script (``python test_NNNN_x.py SCENARIO``):
each rank prints ``RANK OK`` when its checks pass; anything else fails the test with the
ranks' output.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "distributed"))
from dist_launcher import launch  # noqa: E402

OK_LINE = "RANK OK"


def run_ranks(script: str, scenario: str, world: int = 2, timeout: float = 150.0) -> list[str]:
    """Starts ``world`` ranks of ``script scenario``; returns their outputs when all pass."""
    outputs, failed = [], False
    for r in launch(scenario, world, timeout, script=script):
        ok = r.returncode == 0 and OK_LINE in r.output
        code = r.returncode if r.returncode is not None else f"killed after {timeout:.0f} s"
        outputs.append(r.output if ok else f"--- rank {r.rank} exit {code}\n{r.output[-3000:]}")
        failed |= not ok
    if failed:
        # The last line of a failing rank (its exception) leads the message.
        last = [o.strip().splitlines()[-1] for o in outputs if o.startswith("--- rank") and o.strip()]
        raise AssertionError((last[0] if last else "rank failed") + "\n" + "\n".join(outputs))
    return outputs


def rank_env() -> tuple[int, int]:
    return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
