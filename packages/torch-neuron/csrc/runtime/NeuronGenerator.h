// Random number generators of device `neuron`.
//
// A neuron generator owns a Philox-free mt19937 engine identical to CPU's
// (at::CPUGeneratorImpl), so a given seed yields the same stream as on CPU.
// Host kernels run by the backend require a CPU-typed generator; the backend
// hands them the generator's engine, which shares the neuron generator's state.
#pragma once

#include <ATen/core/Generator.h>

namespace torch_neuron {

at::Generator make_generator(c10::DeviceIndex device);
const at::Generator& default_generator(c10::DeviceIndex device);
// The CPU engine behind a neuron generator (throws for other generators).
at::Generator engine_of(const at::Generator& neuron_generator);

}  // namespace torch_neuron
