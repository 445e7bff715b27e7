// Checked translation of device ranges, shared by the memory, copy and memset entry points.
#ifndef NEURON_SIM_RUNTIME_DEVICE_MEMORY_H
#define NEURON_SIM_RUNTIME_DEVICE_MEMORY_H

#include <cstddef>

#include "runtime.h"

namespace nsim {

// Device index of a device address (inside any device's range), or -1 for host addresses.
int device_index_of(const void* p);

// Checks that [p, p+size) lies inside one live allocation and returns its device and alias.
// `role` names the argument in the message ("dst", "src", "device_ptr"); a range outside
// every live allocation fails with `bad_range`.
nsimError resolve_device_range(Runtime* rt, const char* call, const char* role, const void* p,
                               size_t size, nsimError bad_range, Device** device, void** alias);

}  // namespace nsim

#endif
