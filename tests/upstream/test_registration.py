"""The backend must be registered before torch.testing._internal is imported, or the device
generic tests silently skip neuron (PrivateUse1TestBase missing, NATIVE_DEVICES stale)."""

import subprocess
import sys
import textwrap

CHECK = textwrap.dedent(
    """
    import torch
    from torch.testing._internal import common_device_type as cdt, common_utils as cu
    bases = [b.__name__ for b in cdt.device_type_test_bases]
    print("BASES", ",".join(bases))
    print("NATIVE", ",".join(cu.NATIVE_DEVICES))
    print("NAME", torch._C._get_privateuse1_backend_name())
    """
)


def _run(extra_env=None):
    import os

    env = dict(os.environ, **(extra_env or {}))
    proc = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return dict(line.split(" ", 1) for line in proc.stdout.splitlines() if " " in line)


def test_autoload_registers_backend_before_testing_modules():
    out = _run({"TORCH_DEVICE_BACKEND_AUTOLOAD": "1"})
    assert out["NAME"] == "neuron"
    assert "PrivateUse1TestBase" in out["BASES"].split(",")
    assert "neuron" in out["NATIVE"].split(",")


def test_without_autoload_the_testing_modules_miss_the_backend():
    # The counter-case shows the check above can fail: the order is what makes it pass.
    out = _run({"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert "PrivateUse1TestBase" not in out["BASES"].split(",")
