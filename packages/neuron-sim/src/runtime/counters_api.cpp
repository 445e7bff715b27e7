// Per-device counters, read with relaxed loads (each field is exact; the set is not a snapshot).
#include "error.h"
#include "runtime.h"

using namespace nsim;

extern "C" {

NSIM_API nsimError nsimGetCounters(int device, nsimCounters* counters) {
  Runtime* rt = runtime_or_error("nsimGetCounters");
  if (!rt) return runtime_unavailable();
  Device* d = device_or_error(rt, "nsimGetCounters", device);
  if (!d) return NSIM_ERROR_INVALID_DEVICE;
  if (!counters) return set_error(NSIM_ERROR_INVALID_VALUE, "nsimGetCounters: counters is NULL");
  const DeviceCounters& c = d->counters;
  counters->live_allocations = c.live_allocations.load();
  counters->bytes_in_use = c.bytes_in_use.load();
  counters->peak_bytes_in_use = c.peak_bytes_in_use.load();
  counters->total_allocations = c.total_allocations.load();
  counters->total_frees = c.total_frees.load();
  counters->failed_allocations = c.failed_allocations.load();
  counters->memcpy_h2d = c.memcpy_h2d.load();
  counters->memcpy_d2h = c.memcpy_d2h.load();
  counters->memcpy_d2d = c.memcpy_d2d.load();
  counters->bytes_h2d = c.bytes_h2d.load();
  counters->bytes_d2h = c.bytes_d2h.load();
  counters->bytes_d2d = c.bytes_d2d.load();
  counters->memsets = c.memsets.load();
  counters->launches = c.launches.load();
  counters->live_queues = c.live_queues.load();
  counters->live_events = c.live_events.load();
  return NSIM_SUCCESS;
}

NSIM_API nsimError nsimResetPeakCounters(int device) {
  Runtime* rt = runtime_or_error("nsimResetPeakCounters");
  if (!rt) return runtime_unavailable();
  Device* d = device_or_error(rt, "nsimResetPeakCounters", device);
  if (!d) return NSIM_ERROR_INVALID_DEVICE;
  d->counters.peak_bytes_in_use.store(d->counters.bytes_in_use.load());
  return NSIM_SUCCESS;
}

}  // extern "C"
