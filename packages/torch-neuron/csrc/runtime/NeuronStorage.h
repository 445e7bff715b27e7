// Storage helpers for device `neuron`.
#pragma once

#include <c10/core/StorageImpl.h>

namespace torch_neuron {
// Grows or shrinks a neuron storage to `nbytes`, preserving the common prefix
// (a device-to-device copy into a new block).
void resize_storage_bytes(c10::StorageImpl* storage, size_t nbytes, c10::DeviceIndex device = -1);
}  // namespace torch_neuron
