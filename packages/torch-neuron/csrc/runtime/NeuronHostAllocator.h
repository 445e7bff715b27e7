// Pinned host memory for `neuron` (tensor.pin_memory(), DataLoader(pin_memory=True)),
// allocated through neuron_sim so the runtime knows it as page-locked host memory.
#pragma once

#include <ATen/core/CachingHostAllocator.h>

namespace torch_neuron {
at::HostAllocator* host_allocator();
bool is_pinned_ptr(const void* ptr);
}  // namespace torch_neuron
