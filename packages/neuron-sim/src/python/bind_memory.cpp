// Device memory and pinned host memory: allocation, pointer queries and the
// host alias of device pointers.
#include "binding.h"

namespace nsim_py {

void bind_memory(py::module_& m) {
  m.def("malloc", [](size_t size, int device) {
    ensure_init();
    void* p = nullptr;
    check(nsimMalloc(device, size, &p));
    return from_ptr(p);
  }, py::arg("size"), py::arg("device") = 0);
  m.def("free", [](uintptr_t ptr) {
    ensure_init();
    check(nsimFree(to_ptr(ptr)));
  });
  m.def("mem_get_info", [](int device) {
    ensure_init();
    size_t free_bytes = 0, total = 0;
    check(nsimMemGetInfo(device, &free_bytes, &total));
    return py::make_tuple(free_bytes, total);
  });
  m.def("pointer_attributes", [](uintptr_t ptr) {
    ensure_init();
    nsimPointerAttributes a{};
    check(nsimPointerGetAttributes(to_ptr(ptr), &a));
    return py::make_tuple(static_cast<int>(a.type), a.device, from_ptr(a.base), a.size);
  });
  m.def("device_to_host", [](uintptr_t ptr, size_t size) {
    ensure_init();
    void* alias = nullptr;
    check(nsimDeviceToHost(to_ptr(ptr), size, &alias));
    return from_ptr(alias);
  });
  m.def("host_to_device", [](uintptr_t alias) { return from_ptr(nsimHostToDeviceUnchecked(to_ptr(alias))); });
  m.def("malloc_host", [](size_t size) {
    ensure_init();
    void* p = nullptr;
    check(nsimMallocHost(size, &p));
    return from_ptr(p);
  });
  m.def("free_host", [](uintptr_t ptr) {
    ensure_init();
    check(nsimFreeHost(to_ptr(ptr)));
  });
}

}  // namespace nsim_py
