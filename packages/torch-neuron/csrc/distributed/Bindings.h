// Python binding of the c10d backend "neuron". Defined in BindingsImpl.h, which is compiled
// inside torch_neuron's one pybind translation unit (csrc/python/Module.cpp, which calls it
// last in its module body and includes BindingsImpl.h after it).
#pragma once

#include <pybind11/pybind11.h>

void torch_neuron_bind_distributed(pybind11::module_& m);
