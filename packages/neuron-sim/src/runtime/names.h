// Interned launch names: launches carry a 32-bit id, the string lives here. Ids stay valid
// for the life of the process (across shutdown and re-init), so layers above may cache them.
#ifndef NEURON_SIM_RUNTIME_NAMES_H
#define NEURON_SIM_RUNTIME_NAMES_H

#include <cstdint>

namespace nsim {

uint32_t intern_name(const char* name);
const char* name_of(uint32_t id);  // nullptr if unknown

}  // namespace nsim

#endif
