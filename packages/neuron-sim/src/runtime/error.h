// Thread-local last-error state and the formatting helpers every entry point uses.
#ifndef NEURON_SIM_RUNTIME_ERROR_H
#define NEURON_SIM_RUNTIME_ERROR_H

#include <cstdint>
#include <string>

#include "neuron_sim/neuron_sim.h"

namespace nsim {

// Records `err` with a printf-formatted message as this thread's last error and returns it.
nsimError set_error(nsimError err, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// "1.50 GiB (1610612736 bytes)": human units followed by the exact count.
std::string format_bytes(uint64_t bytes);

}  // namespace nsim

#endif
