// Modelled device time of copies and memsets.
#ifndef NEURON_SIM_RUNTIME_COPY_MODEL_H
#define NEURON_SIM_RUNTIME_COPY_MODEL_H

#include <cstddef>

#include "runtime.h"

namespace nsim {

// Host<->device, or device-to-device from `src` to `dst` (same device, same chip, or across
// chips). For host transfers pass the device in both.
double model_copy_ns(const Device* src, const Device* dst, nsimMemcpyKind kind, size_t bytes);
double model_memset_ns(const Device* d, size_t bytes);

}  // namespace nsim

#endif
