// Modelled device time of a launch from its cost inputs: the kernel-schedule, roofline and
// host-round-trip models (copies are in copy_model.h).
#ifndef NEURON_SIM_RUNTIME_COST_MODEL_H
#define NEURON_SIM_RUNTIME_COST_MODEL_H

#include "runtime.h"

namespace nsim {

// Duration in ns, or a negative value when the inputs are invalid (*why says which).
double model_launch_ns(const nsimDeviceProperties& p, const nsimLaunchCost& c, const char** why);

}  // namespace nsim

#endif
