"""Op-argument fuzzing of device neuron against CPU (hypothesis): see run.py."""
