"""Benchmark entry point (same as the `neuron-ccl-bench` console script)."""
from neuron_ccl.bench import main

if __name__ == "__main__":
    main()
