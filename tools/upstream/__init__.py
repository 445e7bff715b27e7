"""Runner and dashboard for PyTorch's device-generic tests against the ``neuron`` device.

``python -m tools.upstream.run`` runs the suites in tests/upstream/ (and, when a PyTorch
source tree is available, named upstream test files) and writes build/upstream/.
"""
