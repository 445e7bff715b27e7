// nsimLaunch / nsimLaunchWithCost: run the host function, then place the launch on its queue's
// timeline. The record-only path (fn == NULL) takes one registry read lock and one device lock.
#include <cmath>

#include "cost_model.h"
#include "error.h"
#include "fault_injection.h"
#include "names.h"
#include "runtime.h"

using namespace nsim;

namespace {

const char* display_name(uint32_t name_id) {
  const char* name = name_of(name_id);
  return name ? name : "(unregistered name)";
}

// `cost` null: the caller gave duration_ns (nsimLaunch). Otherwise the duration is modelled
// from the cost inputs on the queue's device.
nsimError launch(const char* call, nsimQueue queue, uint32_t name_id, nsimLaunchKind kind,
                 double duration_ns, const nsimLaunchCost* cost, nsimHostFn fn, void* user_data,
                 double* duration_out) {
  Runtime* rt = runtime_or_error(call);
  if (!rt) return runtime_unavailable();
  std::shared_ptr<Queue> q = queue_or_error(rt, call, queue);
  if (!q) return NSIM_ERROR_INVALID_QUEUE;
  Device* d = q->device;
  nsimError err = check_device(d, call);
  if (err != NSIM_SUCCESS) return err;
  if (consume_device_lost_fault(d->index)) {
    d->lost.store(true);
    return check_device(d, call);
  }
  if (static_cast<unsigned>(kind) > NSIM_LAUNCH_HOST_FUNC) {
    return set_error(NSIM_ERROR_INVALID_VALUE,
                     "%s: launch '%s' on neuron device %d has kind %d; the kind must be an "
                     "nsimLaunchKind", call, display_name(name_id), d->index, static_cast<int>(kind));
  }
  nsimCostModel model = NSIM_MODEL_UNSPECIFIED;
  if (cost) {
    const char* why = "";
    duration_ns = model_launch_ns(d->props, *cost, &why);
    if (duration_ns < 0) {
      return set_error(NSIM_ERROR_INVALID_VALUE, "%s: launch '%s' on neuron device %d: %s", call,
                       display_name(name_id), d->index, why);
    }
    model = static_cast<nsimCostModel>(cost->model);
  } else if (kind == NSIM_LAUNCH_COLLECTIVE) {
    model = NSIM_MODEL_INTERCONNECT;
  } else if (kind == NSIM_LAUNCH_MEMCPY || kind == NSIM_LAUNCH_MEMSET) {
    model = NSIM_MODEL_COPY;  // callers cost copies with nsimModelCopyDuration
  }
  if (!(duration_ns >= 0.0) || std::isinf(duration_ns)) {
    return set_error(NSIM_ERROR_INVALID_VALUE,
                     "%s: launch '%s' on neuron device %d has duration_ns=%g and kind %d; "
                     "the duration must be finite and >= 0 and the kind an nsimLaunchKind",
                     call, display_name(name_id), d->index, duration_ns, static_cast<int>(kind));
  }
  if (consume_kernel_fault(name_id)) {
    return set_error(NSIM_ERROR_LAUNCH_FAILED,
                     "%s: launch of '%s' on neuron device %d failed: fault injected by "
                     "nsimFaultFailKernel or NEURON_SIM_FAULT_KERNEL (disarm with nsimFaultClear)",
                     call, display_name(name_id), d->index);
  }
  if (fn) {
    const int rc = fn(user_data);
    if (rc != 0) {
      return set_error(NSIM_ERROR_LAUNCH_FAILED, "%s: host function of '%s' on neuron device %d returned %d",
                       call, display_name(name_id), d->index, rc);
    }
  }
  place_on_queue(rt, q.get(), name_id, kind, duration_ns, 0, model, cost);
  d->counters.launches.fetch_add(1, std::memory_order_relaxed);
  if (duration_out) *duration_out = duration_ns;
  return NSIM_SUCCESS;
}

}  // namespace

extern "C" {

NSIM_API nsimError nsimLaunch(nsimQueue queue, uint32_t name_id, nsimLaunchKind kind,
                              double duration_ns, nsimHostFn fn, void* user_data) {
  return launch("nsimLaunch", queue, name_id, kind, duration_ns, nullptr, fn, user_data, nullptr);
}

NSIM_API nsimError nsimLaunchWithCost(nsimQueue queue, uint32_t name_id, nsimLaunchKind kind,
                                      const nsimLaunchCost* cost, nsimHostFn fn, void* user_data,
                                      double* duration_ns) {
  if (!cost) {
    return set_error(NSIM_ERROR_INVALID_VALUE, "nsimLaunchWithCost: cost is NULL (use nsimLaunch to "
                     "give a duration directly)");
  }
  return launch("nsimLaunchWithCost", queue, name_id, kind, 0.0, cost, fn, user_data, duration_ns);
}

NSIM_API int nsimLaunchWouldFail(int device, uint32_t name_id) {
  return launch_fault_pending(device, name_id) ? 1 : 0;
}

}  // extern "C"
