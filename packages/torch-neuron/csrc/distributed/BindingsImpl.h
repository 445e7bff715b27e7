// Included once, by csrc/python/Module.cpp (after torch/extension.h). Adds
// torch_neuron._C._distributed._init(), which binds
// torch_neuron._C._distributed.ProcessGroupNeuron with base c10d::Backend and holder
// c10::intrusive_ptr, as c10d's Python layer requires of a backend. The class is bound on
// first use (torch_neuron.distributed creates a process group) rather than when _C loads
// during torch's own import, so binding never overlaps c10d's initialisation.
#pragma once

#include <pybind11/chrono.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "distributed/Bindings.h"
#include "distributed/ProcessGroupNeuron.h"

void torch_neuron_bind_distributed(pybind11::module_& m) {
  namespace py = pybind11;
  auto sub = m.def_submodule("_distributed", "c10d backend 'neuron'");
  sub.def("_init", [sub]() mutable {
    using torch_neuron::distributed::ProcessGroupNeuron;
    if (py::hasattr(sub, "ProcessGroupNeuron")) return;
    py::class_<ProcessGroupNeuron, c10d::Backend, c10::intrusive_ptr<ProcessGroupNeuron>>(sub, "ProcessGroupNeuron")
        .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                         std::chrono::milliseconds timeout, int device, const std::string& group_name) {
               py::gil_scoped_release nogil;
               return c10::make_intrusive<ProcessGroupNeuron>(store, rank, size, timeout, device, group_name);
             }),
             py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"), py::arg("device"),
             py::arg("group_name") = "default")
        .def_property_readonly("device", &ProcessGroupNeuron::device)
        .def("flight_record", &ProcessGroupNeuron::flightRecord);
  });
}
