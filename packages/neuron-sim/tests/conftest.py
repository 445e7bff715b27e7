"""Tests in this process run the default configuration (trn2, one chip, LNC=2)."""

from __future__ import annotations

import os

import pytest

import neuron_sim as ns
from nsim_child import REGISTERED

for _name in REGISTERED:
    os.environ.pop(_name, None)
ns.shutdown()  # in case something initialised the runtime before the variables were cleared


@pytest.fixture
def fresh_runtime():
    """A runtime started for this test and shut down after it (faults, lost devices and all)."""
    ns.shutdown()
    ns.init()
    yield
    ns.shutdown()


@pytest.fixture(autouse=True)
def _no_faults_left():
    yield
    if ns.is_initialized():
        ns.faults.clear()
