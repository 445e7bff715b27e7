// Python bindings of the neuron_sim C API: the module neuron_sim._C, one
// bind_x() per API object (bind_*.cpp).
//
// This layer stays thin: it converts arguments, releases the GIL around work
// that may take long, initialises the runtime on first use, and turns every
// failing nsimError into the matching neuron_sim.errors exception. Pythonic
// wrappers (dataclasses, numpy helpers, enums) live in the Python package.

#include <exception>

#include "binding.h"

PYBIND11_MODULE(_C, m) {
  m.doc() = "Bindings of the neuron_sim C API (see neuron_sim.h); use the neuron_sim package instead.";
  m.attr("API_VERSION") = NSIM_API_VERSION;
  m.attr("ALIGNMENT") = NSIM_ALIGNMENT;

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const nsim_py::NsimFailure& f) {
      nsim_py::set_python_error(nsim_py::make_exception(f.code, f.message));
    }
  });

  nsim_py::bind_runtime(m);
  nsim_py::bind_memory(m);
  nsim_py::bind_copy(m);
  nsim_py::bind_queue(m);
  nsim_py::bind_event(m);
  nsim_py::bind_launch(m);
  nsim_py::bind_timeline(m);
  nsim_py::bind_counters(m);
  nsim_py::bind_faults(m);
  nsim_py::bind_env(m);
}
