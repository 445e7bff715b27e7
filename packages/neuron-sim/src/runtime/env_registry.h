// The one table of environment variables the runtime reads. Every lookup goes through
// env_lookup, which refuses names missing from the table.
#ifndef NEURON_SIM_RUNTIME_ENV_REGISTRY_H
#define NEURON_SIM_RUNTIME_ENV_REGISTRY_H

#include "neuron_sim/neuron_sim.h"

namespace nsim {

// Value of a registered variable, or nullptr when unset or empty (empty means "use the default").
// Aborts on an unregistered name: that is a programming error, caught by every test run.
const char* env_lookup(const char* name);

}  // namespace nsim

#endif
