// SIGSEGV/SIGBUS handler that explains host accesses to device memory before the process
// dies; faults elsewhere go to the previously installed handler.
#ifndef NEURON_SIM_RUNTIME_FAULT_HANDLER_H
#define NEURON_SIM_RUNTIME_FAULT_HANDLER_H

namespace nsim {

void install_fault_handler();
void uninstall_fault_handler();

}  // namespace nsim

#endif
