// The timeline of simulated work: recording switch, records, Chrome trace export.
#include <string>
#include <vector>

#include "binding.h"

namespace nsim_py {

void bind_timeline(py::module_& m) {
  m.def("timeline_set_enabled", [](bool enabled) {
    ensure_init();
    check(nsimTimelineSetEnabled(enabled ? 1 : 0));
  });
  m.def("timeline", [](int device) {
    ensure_init();
    size_t count = 0;
    check(nsimTimelineGetCount(device, &count));
    std::vector<nsimTimelineRecord> records(count);
    size_t written = 0;
    if (count) check(nsimTimelineGetRecords(device, records.data(), count, &written));
    py::list out;
    for (size_t i = 0; i < written; ++i) {
      const nsimTimelineRecord& r = records[i];
      const char* name = nsimGetName(r.name_id);
      py::tuple busy(NSIM_ENGINE_COUNT);
      for (int e = 0; e < NSIM_ENGINE_COUNT; ++e) busy[e] = r.engine_busy_ns[e];
      out.append(py::make_tuple(name ? std::string(name) : "#" + std::to_string(r.name_id),
                                r.kind, r.device, r.queue_id, r.start_ns, r.end_ns, r.bytes,
                                r.model, r.dtype_class, r.flops, r.bytes_read, r.bytes_written,
                                busy, r.correlation_id, r.sequence, r.host_ns,
                                r.detail_id ? py::object(py::str(nsimGetName(r.detail_id))) : py::object(py::none())));
    }
    return out;
  });
  m.def("correlation_push", [](uint64_t id) { check(nsimCorrelationPush(id)); });
  m.def("correlation_pop", [] { check(nsimCorrelationPop()); });
  // Duration the cost model gives a launch with these inputs (nsimModelLaunchDuration).
  m.def("model_launch_duration", [](int device, int model, int dtype_class, int compute, double flops,
                                    double bytes_read, double bytes_written, double duration_ns) {
    ensure_init();
    nsimLaunchCost c{};
    c.model = static_cast<uint32_t>(model);
    c.dtype_class = static_cast<uint32_t>(dtype_class);
    c.compute = static_cast<uint32_t>(compute);
    c.flops = flops;
    c.bytes_read = bytes_read;
    c.bytes_written = bytes_written;
    c.duration_ns = duration_ns;
    double ns = 0;
    check(nsimModelLaunchDuration(device, &c, &ns));
    return ns;
  }, py::arg("device"), py::arg("model"), py::arg("dtype_class"), py::arg("compute"), py::arg("flops"),
     py::arg("bytes_read"), py::arg("bytes_written"), py::arg("duration_ns") = 0.0);
  m.def("timeline_clear", [](int device) {
    ensure_init();
    check(nsimTimelineClear(device));
  });
  m.def("export_chrome_trace", [](const std::string& path) {
    ensure_init();
    nsimError err;
    {
      py::gil_scoped_release nogil;
      err = nsimTimelineExportChromeTrace(path.c_str());
    }
    check(err);
  });
}

}  // namespace nsim_py
