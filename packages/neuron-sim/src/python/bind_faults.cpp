// Fault injection: failing allocations and kernels, lost devices.
#include <string>

#include "binding.h"

namespace nsim_py {

void bind_faults(py::module_& m) {
  m.def("fault_fail_nth_alloc", [](uint64_t n) {
    ensure_init();
    check(nsimFaultFailNthAlloc(n));
  });
  m.def("fault_fail_kernel", [](const std::string& name, int count) {
    ensure_init();
    check(nsimFaultFailKernel(name.c_str(), count));
  });
  m.def("fault_set_device_lost", [](int device) {
    ensure_init();
    check(nsimFaultSetDeviceLost(device));
  });
  m.def("fault_clear", [] {
    ensure_init();
    check(nsimFaultClear());
  });
}

}  // namespace nsim_py
