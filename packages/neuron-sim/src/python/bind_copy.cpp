// Copies and memset between Python buffers, host and device memory, with the
// modelled duration of a transfer.
#include <string>
#include <utility>

#include "binding.h"
#include "queue.h"

namespace nsim_py {

namespace {

// A contiguous view of a Python buffer (numpy array, bytes, bytearray...).
struct HostSpan {
  py::buffer_info info;  // holds the buffer export until the copy is done
  size_t nbytes;
};

HostSpan host_span(const py::buffer& obj, bool writable, const char* call, const char* arg) {
  py::buffer_info info;
  try {
    info = obj.request(writable);
  } catch (py::error_already_set&) {
    fail(NSIM_ERROR_INVALID_VALUE,
         std::string(call) + ": " + arg + " must be a " + (writable ? "writable " : "") +
             "buffer (e.g. a numpy array)" + (writable ? "; pass a copy with .copy()" : ""));
  }
  ssize_t expected = info.itemsize;
  for (ssize_t d = info.ndim - 1; d >= 0; --d) {
    if (info.shape[d] > 1 && info.strides[d] != expected) {
      fail(NSIM_ERROR_INVALID_VALUE,
           std::string(call) + ": " + arg +
               " is not C-contiguous; pass numpy.ascontiguousarray(" + arg + ")");
    }
    expected *= info.shape[d];
  }
  size_t nbytes = static_cast<size_t>(info.size) * static_cast<size_t>(info.itemsize);
  return HostSpan{std::move(info), nbytes};
}

void memcpy_checked(void* dst, const void* src, size_t size, nsimMemcpyKind kind, const Queue* queue) {
  nsimQueue q = queue ? queue->handle("memcpy") : nullptr;
  nsimError err;
  {
    py::gil_scoped_release nogil;
    err = q ? nsimMemcpyAsync(dst, src, size, kind, q) : nsimMemcpy(dst, src, size, kind);
  }
  check(err);
}

size_t memcpy_htod(uintptr_t dst, const py::buffer& src, const Queue* queue) {
  ensure_init();
  HostSpan span = host_span(src, false, "memcpy_htod", "src");
  memcpy_checked(to_ptr(dst), span.info.ptr, span.nbytes, NSIM_MEMCPY_HOST_TO_DEVICE, queue);
  return span.nbytes;
}

size_t memcpy_dtoh(const py::buffer& dst, uintptr_t src, const Queue* queue) {
  ensure_init();
  HostSpan span = host_span(dst, true, "memcpy_dtoh", "dst");
  memcpy_checked(span.info.ptr, to_ptr(src), span.nbytes, NSIM_MEMCPY_DEVICE_TO_HOST, queue);
  return span.nbytes;
}

void memset_device(uintptr_t ptr, int value, size_t size, const Queue* queue) {
  ensure_init();
  nsimQueue q = queue ? queue->handle("memset") : nullptr;
  nsimError err;
  {
    py::gil_scoped_release nogil;
    err = q ? nsimMemsetAsync(to_ptr(ptr), value, size, q) : nsimMemset(to_ptr(ptr), value, size);
  }
  check(err);
}

}  // namespace

void bind_copy(py::module_& m) {
  m.def("memcpy_htod", &memcpy_htod, py::arg("dst"), py::arg("src"), py::arg("queue") = nullptr);
  m.def("memcpy_dtoh", &memcpy_dtoh, py::arg("dst"), py::arg("src"), py::arg("queue") = nullptr);
  m.def("memcpy", [](uintptr_t dst, uintptr_t src, size_t size, int kind, const Queue* queue) {
    ensure_init();
    memcpy_checked(to_ptr(dst), to_ptr(src), size, static_cast<nsimMemcpyKind>(kind), queue);
  }, py::arg("dst"), py::arg("src"), py::arg("size"), py::arg("kind"), py::arg("queue") = nullptr);
  m.def("memset", &memset_device, py::arg("ptr"), py::arg("value"), py::arg("size"),
        py::arg("queue") = nullptr);
  m.def("model_copy_duration", [](int device, int kind, size_t bytes) {
    ensure_init();
    double ns = 0;
    check(nsimModelCopyDuration(device, static_cast<nsimMemcpyKind>(kind), bytes, &ns));
    return ns;
  });
}

}  // namespace nsim_py
