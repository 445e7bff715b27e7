// Armed faults: the n-th allocation, launches of named kernels. Process-wide, cleared at
// nsimShutdown. The checks are a single relaxed load when nothing is armed.
#ifndef NEURON_SIM_RUNTIME_FAULT_INJECTION_H
#define NEURON_SIM_RUNTIME_FAULT_INJECTION_H

#include <cstdint>

namespace nsim {

struct Config;

bool consume_alloc_fault();                 // true: this allocation must fail
bool consume_kernel_fault(uint32_t name_id);  // true: this launch must fail
void clear_fault_injection();
// Device loss armed for a device's n-th launch (NEURON_SIM_FAULT_DEVICE_LOST); true: this
// launch is the one, and the caller marks the device lost.
bool consume_device_lost_fault(int device);
// Whether the next launch of `name_id` on `device` fails by an armed fault, without
// consuming it (a relaxed load or two when nothing is armed).
bool launch_fault_pending(int device, uint32_t name_id);
// Arms the faults that the environment requests (NEURON_SIM_FAULT_*), at nsimInit.
void arm_faults_from_config(const Config& cfg);

}  // namespace nsim

#endif
