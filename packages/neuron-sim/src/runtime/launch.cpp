// nsimLaunch: run the host function, then place the launch on its queue's timeline. The
// record-only path (fn == NULL) takes one registry read lock and one device lock.
#include <cmath>

#include "error.h"
#include "fault_injection.h"
#include "names.h"
#include "runtime.h"

using namespace nsim;

extern "C" {

NSIM_API nsimError nsimLaunch(nsimQueue queue, uint32_t name_id, nsimLaunchKind kind,
                              double duration_ns, nsimHostFn fn, void* user_data) {
  Runtime* rt = runtime_or_error("nsimLaunch");
  if (!rt) return runtime_unavailable();
  std::shared_ptr<Queue> q = queue_or_error(rt, "nsimLaunch", queue);
  if (!q) return NSIM_ERROR_INVALID_QUEUE;
  Device* d = q->device;
  nsimError err = check_device(d, "nsimLaunch");
  if (err != NSIM_SUCCESS) return err;
  if (consume_device_lost_fault(d->index)) {
    d->lost.store(true);
    return check_device(d, "nsimLaunch");
  }
  if (!(duration_ns >= 0.0) || std::isinf(duration_ns) ||
      static_cast<unsigned>(kind) > NSIM_LAUNCH_HOST_FUNC) {
    return set_error(NSIM_ERROR_INVALID_VALUE,
                     "nsimLaunch: launch '%s' on neuron device %d has duration_ns=%g and kind %d; "
                     "the duration must be finite and >= 0 and the kind an nsimLaunchKind",
                     name_of(name_id) ? name_of(name_id) : "(unregistered name)", d->index,
                     duration_ns, static_cast<int>(kind));
  }
  if (consume_kernel_fault(name_id)) {
    const char* name = name_of(name_id);
    return set_error(NSIM_ERROR_LAUNCH_FAILED,
                     "nsimLaunch: launch of '%s' on neuron device %d failed: fault injected by "
                     "nsimFaultFailKernel or NEURON_SIM_FAULT_KERNEL (disarm with nsimFaultClear)",
                     name ? name : "(unregistered name)", d->index);
  }
  if (fn) {
    const int rc = fn(user_data);
    if (rc != 0) {
      const char* name = name_of(name_id);
      return set_error(NSIM_ERROR_LAUNCH_FAILED,
                       "nsimLaunch: host function of '%s' on neuron device %d returned %d",
                       name ? name : "(unregistered name)", d->index, rc);
    }
  }
  place_on_queue(rt, q.get(), name_id, kind, duration_ns, 0);
  d->counters.launches.fetch_add(1, std::memory_order_relaxed);
  return NSIM_SUCCESS;
}

NSIM_API int nsimLaunchWouldFail(int device, uint32_t name_id) {
  return launch_fault_pending(device, name_id) ? 1 : 0;
}

}  // extern "C"
