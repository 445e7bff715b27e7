#include "runtime/NeuronRuntime.h"

#include <atomic>
#include <mutex>
#include <vector>

namespace torch_neuron {
namespace {

std::once_flag g_init_once;
std::atomic<bool> g_init_done{false};  // fast path: every op asks
nsimError g_init_error = NSIM_SUCCESS;
std::string g_init_message;
c10::DeviceIndex g_device_count = 0;
std::vector<nsimDeviceProperties> g_props;
thread_local c10::DeviceIndex t_current_device = 0;

void do_init() {
  g_init_error = nsimInit();
  if (g_init_error != NSIM_SUCCESS) {
    g_init_message = nsimGetLastErrorMessage();
    return;
  }
  int n = 0;
  if (nsimGetDeviceCount(&n) != NSIM_SUCCESS) {
    n = 0;
  }
  g_device_count = static_cast<c10::DeviceIndex>(n);
  g_props.resize(n);
  for (int i = 0; i < n; ++i) {
    nsimGetDeviceProperties(i, &g_props[i]);
  }
}

}  // namespace

void ensure_initialized() {
  if (C10_LIKELY(g_init_done.load(std::memory_order_acquire) && g_init_error == NSIM_SUCCESS)) return;
  std::call_once(g_init_once, [] {
    do_init();
    g_init_done.store(true, std::memory_order_release);
  });
  TORCH_CHECK(g_init_error == NSIM_SUCCESS,
              "neuron: the simulated device failed to initialise: ", g_init_message);
}

c10::DeviceIndex device_count() noexcept {
  try {
    ensure_initialized();
  } catch (...) {
    return 0;
  }
  return g_device_count;
}

void check_device_index(c10::DeviceIndex index) {
  ensure_initialized();
  TORCH_CHECK_INDEX(index >= 0 && index < g_device_count,
                    "Invalid device index neuron:", static_cast<int>(index), ": ",
                    static_cast<int>(g_device_count),
                    " neuron device(s) are visible (valid indices 0..",
                    static_cast<int>(g_device_count) - 1,
                    "). The visible logical NeuronCores are set by NEURON_RT_VISIBLE_CORES, "
                    "NEURON_LOGICAL_NC_CONFIG and NEURON_SIM_NUM_CHIPS.");
}

c10::DeviceIndex current_device() {
  ensure_initialized();
  return t_current_device;
}

void set_current_device(c10::DeviceIndex index) {
  check_device_index(index);
  t_current_device = index;
}

const nsimDeviceProperties& device_properties(c10::DeviceIndex index) {
  check_device_index(index);
  return g_props[index];
}

void throw_nsim_error(nsimError err, const char* call) {
  std::string msg = nsimGetLastErrorMessage();
  if (msg.empty()) {
    msg = nsimGetErrorName(err);
  }
  if (err == NSIM_ERROR_OUT_OF_MEMORY) {
    TORCH_CHECK_WITH(OutOfMemoryError, false, "neuron: ", msg);
  }
  TORCH_CHECK(false, "neuron: ", msg, " [", nsimGetErrorName(err), " from ", call, "]");
}

}  // namespace torch_neuron
