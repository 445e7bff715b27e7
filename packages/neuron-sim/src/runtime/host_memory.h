// Pinned host memory: page-aligned anonymous mappings, tracked for pointer attributes.
#ifndef NEURON_SIM_RUNTIME_HOST_MEMORY_H
#define NEURON_SIM_RUNTIME_HOST_MEMORY_H

#include <cstddef>

namespace nsim {

// The pinned allocation containing p, if any.
bool find_host_allocation(const void* p, void** base, size_t* size);
void release_all_host_memory();

}  // namespace nsim

#endif
