#include "runtime/NeuronRuntime.h"

#include <pthread.h>
#include <unistd.h>

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
std::atomic<bool> g_in_bad_fork{false};
pid_t g_init_pid = 0;

// A child forked after initialisation inherits the device memory mapping and a copy of the
// allocator: it would hand out the parent's addresses over the parent's pages. Clearing
// g_init_done sends the child's next device use to the slow path, which refuses it.
void on_fork_child() {
  g_in_bad_fork.store(true, std::memory_order_relaxed);
  g_init_done.store(false, std::memory_order_release);
}

void do_init() {
  g_init_pid = getpid();
  pthread_atfork(nullptr, nullptr, &on_fork_child);
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
  if (C10_UNLIKELY(g_in_bad_fork.load(std::memory_order_relaxed))) {
    TORCH_CHECK(false,
                "Cannot re-initialize neuron in forked subprocess. To use neuron with "
                "multiprocessing, you must use the 'spawn' start method "
                "(multiprocessing.set_start_method('spawn'), or multiprocessing_context='spawn' "
                "for a DataLoader whose workers use the device). This process (pid ", getpid(),
                ") was forked from process ", g_init_pid,
                " after the neuron backend initialised there (import torch loads it), and device "
                "memory is shared with that process.");
  }
  std::call_once(g_init_once, [] {
    do_init();
    g_init_done.store(true, std::memory_order_release);
  });
  TORCH_CHECK(g_init_error == NSIM_SUCCESS,
              "neuron: the simulated device failed to initialise: ", g_init_message);
}

bool in_bad_fork() noexcept { return g_in_bad_fork.load(std::memory_order_relaxed); }

c10::DeviceIndex device_count() noexcept {
  if (in_bad_fork()) return g_device_count;  // as torch.cuda in a bad fork: counting is harmless
  try {
    ensure_initialized();
  } catch (...) {
    return 0;
  }
  return g_device_count;
}

void check_device_index(c10::DeviceIndex index) {
  ensure_initialized();
  if (C10_LIKELY(index >= 0 && index < g_device_count)) return;
  // CUDA reports a bad ordinal through cudaSetDevice as torch.AcceleratorError (a RuntimeError).
  throw c10::AcceleratorError(
      {__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, NSIM_ERROR_INVALID_DEVICE,
      c10::str("neuron error: invalid device ordinal neuron:", static_cast<int>(index), ": ",
               static_cast<int>(g_device_count), " neuron device(s) are visible (valid indices 0..",
               static_cast<int>(g_device_count) - 1,
               "). The visible logical NeuronCores are set by NEURON_RT_VISIBLE_CORES, "
               "NEURON_LOGICAL_NC_CONFIG and NEURON_SIM_NUM_CHIPS."));
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

double event_elapsed_ms(nsimEvent start, nsimEvent end) {
  float ms = 0;
  const nsimError err = nsimEventElapsedTime(&ms, start, end);
  // torch.cuda.Event checks the timing flag itself (CUDAEvent.h): a RuntimeError.
  TORCH_CHECK(err != NSIM_ERROR_TIMING_DISABLED,
              "Both events must be created with argument 'enable_timing=True'. (neuron: ",
              nsimGetLastErrorMessage(), ")");
  NEURON_CHECK(err);
  return ms;
}

void throw_nsim_error(nsimError err, const char* call) {
  if (err == NSIM_ERROR_FORKED_CHILD) ensure_initialized();  // raises the bad-fork error
  std::string msg = nsimGetLastErrorMessage();
  if (msg.empty()) {
    msg = nsimGetErrorName(err);
  }
  if (err == NSIM_ERROR_OUT_OF_MEMORY) {
    TORCH_CHECK_WITH(OutOfMemoryError, false, "neuron: ", msg);
  }
  // Every other runtime failure (launch failure, lost device, bad handle or ordinal) is what
  // CUDA reports through C10_CUDA_CHECK: torch.AcceleratorError, carrying the error code.
  throw c10::AcceleratorError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, err,
                              c10::str("neuron error: ", msg, " [", nsimGetErrorName(err), " from ",
                                       call, "]"));
}

}  // namespace torch_neuron
