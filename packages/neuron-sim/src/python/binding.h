// Helpers shared by the binding files of neuron_sim._C: the failure carried to
// Python, error checking, lazy init and the runtime generation counter.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "neuron_sim/neuron_sim.h"

namespace py = pybind11;

namespace nsim_py {

// A failed runtime call, carried to the exception translator. It holds no
// Python objects, so it may be thrown while the GIL is released.
struct NsimFailure {
  nsimError code;
  std::string message;
};

// Bumped by shutdown(): queues, events and pointers from an earlier runtime
// lifetime must never reach the next one, where their handles may be reused.
inline std::atomic<uint64_t> g_generation{0};

[[noreturn]] inline void fail(nsimError code, std::string message) {
  throw NsimFailure{code, std::move(message)};
}

// Reads the calling thread's last-error message; must run on the thread that
// made the failing call (it need not hold the GIL).
inline void check(nsimError err) {
  if (err == NSIM_SUCCESS) return;
  std::string message = nsimGetLastErrorMessage();
  nsimGetLastError();
  if (message.empty()) message = nsimGetErrorName(err);
  fail(err, std::move(message));
}

inline void ensure_init() {
  if (!nsimIsInitialized()) check(nsimInit());
}

inline py::object make_exception(nsimError code, const std::string& message) {
  const char* name = nsimGetErrorName(code);
  return py::module_::import("neuron_sim.errors")
      .attr("_from_code")(static_cast<int>(code), name ? name : "", message);
}

inline void set_python_error(const py::object& exc) {
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
}

inline void* to_ptr(uintptr_t address) { return reinterpret_cast<void*>(address); }
inline uintptr_t from_ptr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

// Interns a launch or record name (defined with the launch bindings).
uint32_t intern_name(const std::string& name);

// One per binding file; module.cpp calls them in this order.
void bind_runtime(py::module_& m);
void bind_memory(py::module_& m);
void bind_copy(py::module_& m);
void bind_queue(py::module_& m);
void bind_event(py::module_& m);
void bind_launch(py::module_& m);
void bind_timeline(py::module_& m);
void bind_counters(py::module_& m);
void bind_faults(py::module_& m);
void bind_env(py::module_& m);

}  // namespace nsim_py
