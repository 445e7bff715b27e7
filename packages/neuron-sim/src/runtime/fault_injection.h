// Armed faults: the n-th allocation, launches of named kernels. Process-wide, cleared at
// nsimShutdown. The checks are a single relaxed load when nothing is armed.
#ifndef NEURON_SIM_RUNTIME_FAULT_INJECTION_H
#define NEURON_SIM_RUNTIME_FAULT_INJECTION_H

#include <cstdint>

namespace nsim {

bool consume_alloc_fault();                 // true: this allocation must fail
bool consume_kernel_fault(uint32_t name_id);  // true: this launch must fail
void clear_fault_injection();

}  // namespace nsim

#endif
