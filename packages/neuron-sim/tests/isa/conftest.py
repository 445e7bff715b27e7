# Copyright 2026 The neuron-sim Authors. Licensed under the Apache License, Version 2.0.
"""Test the ISA simulator from this source tree.

neuron_sim.isa is pure Python; when the installed neuron_sim predates (or differs from) the
checkout, search the checkout's package directory first so the tests exercise these sources.
"""

import os

import neuron_sim

_SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "python", "neuron_sim"))
if os.path.isdir(_SRC) and _SRC not in neuron_sim.__path__:  # not in a copy of the tests
    neuron_sim.__path__.insert(0, _SRC)
