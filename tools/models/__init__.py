"""Sweep of transformers architectures built from tiny configs, trained on neuron against CPU."""
