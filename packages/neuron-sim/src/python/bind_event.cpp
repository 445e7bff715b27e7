// The Event class.
#include "binding.h"
#include "event.h"

namespace nsim_py {

void bind_event(py::module_& m) {
  py::class_<Event>(m, "Event", "A marker in a queue's simulated timeline.")
      .def(py::init<int, bool>(), py::arg("device") = 0, py::arg("enable_timing") = true)
      .def_property_readonly("device", &Event::device)
      .def_property_readonly("enable_timing", &Event::enable_timing)
      .def_property_readonly("destroyed", &Event::destroyed)
      .def_property_readonly("time_ns", &Event::time_ns, "Simulated time captured by the last record().")
      .def("record", &Event::record, py::arg("queue") = nullptr,
           "Captures the time at which all work queued so far on `queue` (default: the device's default queue) ends.")
      .def("query", &Event::query, "True when the captured work is complete.")
      .def("synchronize", &Event::synchronize)
      .def("elapsed_time", &Event::elapsed_time, py::arg("end"),
           "Milliseconds of simulated time from this event to `end`.")
      .def("destroy", &Event::destroy)
      .def("__enter__", [](Event& e) -> Event& { return e; }, py::return_value_policy::reference)
      .def("__exit__", [](Event& e, py::args) {
        if (!e.destroyed()) e.destroy();
      })
      .def("__repr__", &Event::describe);
}

}  // namespace nsim_py
