// Device bookkeeping shared by every part of the backend: device count, the
// calling thread's current device, and conversion of neuron_sim errors into
// PyTorch exceptions.
#pragma once

#include <c10/core/Device.h>
#include <c10/util/Exception.h>
#include <neuron_sim/neuron_sim.h>

#include <string>

namespace torch_neuron {

// Initialises neuron_sim on first use; throws with the runtime's message, and in a child
// forked after initialisation (which must not touch the parent's device memory).
void ensure_initialized();
bool in_bad_fork() noexcept;
c10::DeviceIndex device_count() noexcept;
c10::DeviceIndex current_device();
void set_current_device(c10::DeviceIndex index);
// Throws "Invalid device ... (N devices visible; NEURON_RT_VISIBLE_CORES ...)" when out of range.
void check_device_index(c10::DeviceIndex index);
const nsimDeviceProperties& device_properties(c10::DeviceIndex index);

// Milliseconds between two recorded events; the errors of torch.cuda.Event.elapsed_time.
double event_elapsed_ms(nsimEvent start, nsimEvent end);

// Raises torch.AcceleratorError (or OutOfMemoryError) carrying neuron_sim's last message.
[[noreturn]] void throw_nsim_error(nsimError err, const char* call);

}  // namespace torch_neuron

#define NEURON_CHECK(expr)                                          \
  do {                                                              \
    nsimError _nsim_err = (expr);                                   \
    if (C10_UNLIKELY(_nsim_err != NSIM_SUCCESS)) {                  \
      ::torch_neuron::throw_nsim_error(_nsim_err, #expr);           \
    }                                                               \
  } while (0)
