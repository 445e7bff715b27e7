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
      out.append(py::make_tuple(name ? std::string(name) : "#" + std::to_string(r.name_id),
                                r.kind, r.device, r.queue_id, r.start_ns, r.end_ns, r.bytes));
    }
    return out;
  });
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
