// Per-device and pinned host memory counters.
#include "binding.h"

namespace nsim_py {

namespace {

py::dict counters_dict(const nsimCounters& c) {
  py::dict d;
  d["live_allocations"] = c.live_allocations;
  d["bytes_in_use"] = c.bytes_in_use;
  d["peak_bytes_in_use"] = c.peak_bytes_in_use;
  d["total_allocations"] = c.total_allocations;
  d["total_frees"] = c.total_frees;
  d["failed_allocations"] = c.failed_allocations;
  d["memcpy_h2d"] = c.memcpy_h2d;
  d["memcpy_d2h"] = c.memcpy_d2h;
  d["memcpy_d2d"] = c.memcpy_d2d;
  d["bytes_h2d"] = c.bytes_h2d;
  d["bytes_d2h"] = c.bytes_d2h;
  d["bytes_d2d"] = c.bytes_d2d;
  d["memsets"] = c.memsets;
  d["launches"] = c.launches;
  d["live_queues"] = c.live_queues;
  d["live_events"] = c.live_events;
  return d;
}

}  // namespace

void bind_counters(py::module_& m) {
  m.def("host_counters", [] {
    ensure_init();
    uint64_t live = 0, bytes = 0;
    check(nsimGetHostCounters(&live, &bytes));
    py::dict d;
    d["live_allocations"] = live;
    d["bytes_in_use"] = bytes;
    return d;
  });
  m.def("counters", [](int device) {
    ensure_init();
    nsimCounters c{};
    check(nsimGetCounters(device, &c));
    return counters_dict(c);
  });
  m.def("reset_peak_counters", [](int device) {
    ensure_init();
    check(nsimResetPeakCounters(device));
  });
}

}  // namespace nsim_py
