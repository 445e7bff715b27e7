// The Queue class and the queue priority range.
#include "binding.h"
#include "event.h"
#include "queue.h"

namespace nsim_py {

void Queue::wait_event(const Event& event) {
  check(nsimQueueWaitEvent(handle("Queue.wait_event"), event.handle("Queue.wait_event")));
}

void bind_queue(py::module_& m) {
  m.def("queue_priority_range", [] {
    ensure_init();
    int least = 0, greatest = 0;
    check(nsimQueueGetPriorityRange(&least, &greatest));
    return py::make_tuple(least, greatest);
  });

  py::class_<Queue>(m, "Queue", "A device queue (stream) with its own simulated timeline.")
      .def(py::init<int, int>(), py::arg("device") = 0, py::arg("priority") = 0)
      .def_static("default", &Queue::default_queue, py::arg("device") = 0,
                  "The device's default queue (owned by the runtime).")
      .def_property_readonly("device", &Queue::device)
      .def_property_readonly("priority", &Queue::priority)
      .def_property_readonly("id", &Queue::id)
      .def_property_readonly("is_default", &Queue::is_default)
      .def_property_readonly("destroyed", &Queue::destroyed)
      .def_property_readonly("time_ns", &Queue::time_ns,
                             "Simulated time (ns since init) at which all work queued so far ends.")
      .def("synchronize", &Queue::synchronize)
      .def("query", &Queue::query, "True when the queue is idle.")
      .def("wait_event", &Queue::wait_event, py::arg("event"))
      .def("launch", &Queue::launch, py::arg("name"), py::arg("duration_ns"), py::arg("fn") = py::none(),
           py::arg("kind") = static_cast<int>(NSIM_LAUNCH_KERNEL), py::arg("user_data") = 0)
      .def("destroy", &Queue::destroy)
      .def("__enter__", [](Queue& q) -> Queue& { return q; }, py::return_value_policy::reference)
      .def("__exit__", [](Queue& q, py::args) {
        if (!q.destroyed() && !q.is_default()) q.destroy();
      })
      .def("__repr__", &Queue::describe);
}

}  // namespace nsim_py
