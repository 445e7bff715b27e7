"""``python -m tools.env`` lists every environment variable of every package, from their registries."""
import os
import pathlib
import subprocess
import sys

import neuron_ccl
from neuron_sim import env as sim_env
from torch_neuron import env as torch_env

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _run(*args, env=None):
    proc = subprocess.run([sys.executable, "-m", "tools.env", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env=env, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_markdown_table_has_every_registered_variable_once():
    out = _run("--markdown")
    names = ([v.name for v in sim_env.env_registry()] + [v[0] for v in neuron_ccl.env_vars()]
             + [v.name for v in torch_env.REGISTRY])
    for name in names:
        assert out.count(f"| `{name}` |") == 1, name
    assert len(out.strip().splitlines()) == len(names) + 2


def test_listing_shows_the_value_set_in_the_environment():
    env = dict(os.environ, NEURON_CCL_SPIN="7")
    out = _run(env=env)
    assert "NEURON_CCL_SPIN=7 " in out
    assert "# neuron-sim" in out and "# neuron-ccl" in out and "# torch-neuron" in out
