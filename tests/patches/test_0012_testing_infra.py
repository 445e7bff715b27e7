"""0012 (F15): largeTensorTest and onlyNativeDeviceTypes run on neuron instead of skipping."""

import os
import subprocess
import sys
import textwrap
import unittest

import pytest
import torch

pytestmark = pytest.mark.torch_patch("0012")


def test_large_tensor_test_runs_when_memory_suffices(neuron):
    from torch.testing._internal.common_device_type import largeTensorTest

    ran = []

    class Case(unittest.TestCase):
        device_type = "neuron"

        @largeTensorTest(2**20, device="neuron")
        def test_fits(self):
            ran.append(torch.ones(1024, 256, device="neuron").sum().item())

    result = unittest.TestResult()
    Case("test_fits").run(result)
    assert not result.errors and not result.failures, result.errors + result.failures
    assert not result.skipped, f"skipped on neuron: {result.skipped[0][1]}"
    assert ran == [1024 * 256]


def test_large_tensor_test_skips_when_memory_is_short(neuron):
    from torch.testing._internal.common_device_type import largeTensorTest

    free, _ = torch.accelerator.get_memory_info(0)

    class Case(unittest.TestCase):
        @largeTensorTest(free + 2**30, device="neuron")
        def test_too_big(self):
            raise AssertionError("must not run")

    result = unittest.TestResult()
    Case("test_too_big").run(result)
    assert len(result.skipped) == 1 and "Unknown device type" not in result.skipped[0][1]


def test_only_native_device_types_with_late_backend_registration(neuron):
    # Testing modules imported before the backend registers (autoload disabled).
    script = textwrap.dedent(
        """
        import unittest
        import torch
        from torch.testing._internal.common_device_type import onlyNativeDeviceTypes
        import torch_neuron  # registers and renames the backend now

        class Case(unittest.TestCase):
            device_type = torch._C._get_privateuse1_backend_name()

            @onlyNativeDeviceTypes
            def test_native(self):
                pass

        result = unittest.TestResult()
        Case("test_native").run(result)
        print("DEVICE", Case.device_type, "SKIPPED", len(result.skipped), "OK", result.wasSuccessful())
        """
    )
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "DEVICE neuron SKIPPED 0 OK True" in proc.stdout, proc.stdout
