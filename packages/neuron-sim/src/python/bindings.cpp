// Python bindings of the neuron_sim C API: the module neuron_sim._C.
//
// This layer stays thin: it converts arguments, releases the GIL around work
// that may take long, initialises the runtime on first use, and turns every
// failing nsimError into the matching neuron_sim.errors exception. Pythonic
// wrappers (dataclasses, numpy helpers, enums) live in the Python package.

#include <dlfcn.h>

#include <atomic>
#include <climits>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "neuron_sim/neuron_sim.h"

namespace py = pybind11;

namespace {

// A failed runtime call, carried to the exception translator. It holds no
// Python objects, so it may be thrown while the GIL is released.
struct NsimFailure {
  nsimError code;
  std::string message;
};

// Bumped by shutdown(): queues, events and pointers from an earlier runtime
// lifetime must never reach the next one, where their handles may be reused.
std::atomic<uint64_t> g_generation{0};

[[noreturn]] void fail(nsimError code, std::string message) {
  throw NsimFailure{code, std::move(message)};
}

// Reads the calling thread's last-error message; must run on the thread that
// made the failing call (it need not hold the GIL).
void check(nsimError err) {
  if (err == NSIM_SUCCESS) return;
  std::string message = nsimGetLastErrorMessage();
  nsimGetLastError();
  if (message.empty()) message = nsimGetErrorName(err);
  fail(err, std::move(message));
}

void ensure_init() {
  if (!nsimIsInitialized()) check(nsimInit());
}

py::object make_exception(nsimError code, const std::string& message) {
  const char* name = nsimGetErrorName(code);
  return py::module_::import("neuron_sim.errors")
      .attr("_from_code")(static_cast<int>(code), name ? name : "", message);
}

void set_python_error(const py::object& exc) {
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exc.ptr())), exc.ptr());
}

void* to_ptr(uintptr_t address) { return reinterpret_cast<void*>(address); }
uintptr_t from_ptr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

// ------------------------------------------------------------------ buffers
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

// ------------------------------------------------------------------ launches
struct PythonHostFn {
  py::object fn;
  py::object error;  // the exception fn raised, if any
};

// Runs a Python callable as an nsimHostFn. A returned non-zero int is the
// callable's own failure status, as in the C contract. Nothing may propagate
// out of here: the runtime's C frames sit between this and the binding.
int call_python_host_fn(void* user_data) {
  auto* call = static_cast<PythonHostFn*>(user_data);
  py::gil_scoped_acquire gil;
  try {
    py::object result = call->fn();
    if (!py::isinstance<py::int_>(result) || py::isinstance<py::bool_>(result)) return 0;
    int overflow = 0;
    long status = PyLong_AsLongAndOverflow(result.ptr(), &overflow);
    if (overflow || status < INT_MIN || status > INT_MAX) return 1;  // non-zero: still a failure
    return static_cast<int>(status);
  } catch (py::error_already_set& e) {
    call->error = e.value();
  } catch (const std::exception& e) {
    call->error = py::reinterpret_steal<py::object>(PyObject_CallFunction(PyExc_RuntimeError, "s", e.what()));
  }
  return 1;
}

// The address of a native nsimHostFn given as an int or a ctypes function
// (such functions take user_data and run without the GIL).
bool native_host_fn(const py::object& fn, uintptr_t* address) {
  if (py::isinstance<py::bool_>(fn)) return false;
  if (py::isinstance<py::int_>(fn)) {
    *address = fn.cast<uintptr_t>();
    return true;
  }
  py::module_ ctypes = py::module_::import("ctypes");
  if (!py::isinstance(fn, ctypes.attr("_CFuncPtr"))) return false;
  *address = ctypes.attr("cast")(fn, ctypes.attr("c_void_p")).attr("value").cast<uintptr_t>();
  return true;
}

uint32_t intern_name(const std::string& name) {
  uint32_t id = 0;
  check(nsimRegisterName(name.c_str(), &id));
  return id;
}

// ------------------------------------------------------------------ queues
class Queue {
 public:
  Queue(int device, int priority) : owned_(true), generation_(g_generation.load()) {
    ensure_init();
    check(nsimQueueCreate(device, priority, &handle_));
    load_info();
  }
  Queue(nsimQueue handle, bool owned) : handle_(handle), owned_(owned), generation_(g_generation.load()) {
    load_info();
  }
  ~Queue() {
    if (owned_ && !destroyed_ && generation_ == g_generation.load() && nsimIsInitialized()) {
      if (nsimQueueDestroy(handle_) != NSIM_SUCCESS) nsimGetLastError();
    }
  }
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;

  static std::unique_ptr<Queue> default_queue(int device) {
    ensure_init();
    nsimQueue handle = nullptr;
    check(nsimQueueGetDefault(device, &handle));
    return std::make_unique<Queue>(handle, false);
  }

  nsimQueue handle(const char* call) const {
    if (destroyed_) fail(NSIM_ERROR_INVALID_QUEUE, std::string(call) + ": " + describe() + " was destroyed");
    if (generation_ != g_generation.load() || !nsimIsInitialized())
      fail(NSIM_ERROR_INVALID_QUEUE, std::string(call) + ": " + describe() +
                                         " belongs to a runtime that neuron_sim.shutdown() ended");
    return handle_;
  }

  void destroy() {
    nsimQueue h = handle("Queue.destroy");
    if (!owned_)
      fail(NSIM_ERROR_INVALID_QUEUE,
           "Queue.destroy: " + describe() + " is the device's default queue, which the runtime owns");
    check(nsimQueueDestroy(h));
    destroyed_ = true;
  }

  double time_ns() const {
    double t = 0;
    check(nsimQueueGetTime(handle("Queue.time_ns"), &t));
    return t;
  }
  void synchronize() const {
    nsimQueue h = handle("Queue.synchronize");
    nsimError err;
    {
      py::gil_scoped_release nogil;
      err = nsimQueueSynchronize(h);
    }
    check(err);
  }
  bool query() const {
    nsimError err = nsimQueueQuery(handle("Queue.query"));
    if (err == NSIM_ERROR_NOT_READY) {
      nsimGetLastError();
      return false;
    }
    check(err);
    return true;
  }

  void launch(const std::string& name, double duration_ns, const py::object& fn, int kind,
              uintptr_t user_data) {
    nsimQueue h = handle("Queue.launch");
    uint32_t name_id = intern_name(name);
    auto launch_kind = static_cast<nsimLaunchKind>(kind);
    nsimError err;
    uintptr_t address = 0;
    if (fn.is_none()) {
      err = nsimLaunch(h, name_id, launch_kind, duration_ns, nullptr, nullptr);
    } else if (native_host_fn(fn, &address)) {
      auto native = reinterpret_cast<nsimHostFn>(address);
      py::gil_scoped_release nogil;
      err = nsimLaunch(h, name_id, launch_kind, duration_ns, native, to_ptr(user_data));
    } else {
      if (!PyCallable_Check(fn.ptr()))
        fail(NSIM_ERROR_INVALID_VALUE, "Queue.launch('" + name +
                                           "'): fn must be None, a callable, a ctypes function or a native function address");
      PythonHostFn call{fn, py::none()};
      {
        py::gil_scoped_release nogil;
        err = nsimLaunch(h, name_id, launch_kind, duration_ns, call_python_host_fn, &call);
      }
      if (err != NSIM_SUCCESS && !call.error.is_none()) {
        std::string message = nsimGetLastErrorMessage();
        nsimGetLastError();
        message += " (the Python function raised " + py::repr(call.error).cast<std::string>() + ")";
        py::object exc = make_exception(err, message);
        PyException_SetCause(exc.ptr(), call.error.inc_ref().ptr());
        set_python_error(exc);
        throw py::error_already_set();
      }
    }
    check(err);
  }

  void wait_event(const class Event& event);

  int device() const { return device_; }
  int priority() const { return priority_; }
  uint64_t id() const { return id_; }
  bool is_default() const { return !owned_; }
  bool destroyed() const { return destroyed_; }

  std::string describe() const {
    return "Queue(device=" + std::to_string(device_) + ", id=" + std::to_string(id_) +
           (owned_ ? "" : ", default") + ")";
  }

 private:
  void load_info() { check(nsimQueueGetInfo(handle_, &device_, &priority_, &id_)); }

  nsimQueue handle_ = nullptr;
  bool owned_;
  bool destroyed_ = false;
  uint64_t generation_;
  int device_ = -1;
  int priority_ = 0;
  uint64_t id_ = 0;
};

// ------------------------------------------------------------------ events
class Event {
 public:
  Event(int device, bool enable_timing)
      : device_(device), timing_(enable_timing), generation_(g_generation.load()) {
    ensure_init();
    check(nsimEventCreate(device, enable_timing ? NSIM_EVENT_DEFAULT : NSIM_EVENT_DISABLE_TIMING, &handle_));
  }
  ~Event() {
    if (!destroyed_ && generation_ == g_generation.load() && nsimIsInitialized()) {
      if (nsimEventDestroy(handle_) != NSIM_SUCCESS) nsimGetLastError();
    }
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  nsimEvent handle(const char* call) const {
    if (destroyed_) fail(NSIM_ERROR_INVALID_EVENT, std::string(call) + ": " + describe() + " was destroyed");
    if (generation_ != g_generation.load() || !nsimIsInitialized())
      fail(NSIM_ERROR_INVALID_EVENT, std::string(call) + ": " + describe() +
                                         " belongs to a runtime that neuron_sim.shutdown() ended");
    return handle_;
  }

  void destroy() {
    check(nsimEventDestroy(handle("Event.destroy")));
    destroyed_ = true;
  }
  void record(const Queue* queue) {
    nsimEvent e = handle("Event.record");
    if (queue) {
      check(nsimEventRecord(e, queue->handle("Event.record")));
    } else {
      nsimQueue q = nullptr;
      check(nsimQueueGetDefault(device_, &q));
      check(nsimEventRecord(e, q));
    }
  }
  bool query() const {
    nsimError err = nsimEventQuery(handle("Event.query"));
    if (err == NSIM_ERROR_NOT_READY) {
      nsimGetLastError();
      return false;
    }
    check(err);
    return true;
  }
  void synchronize() const {
    nsimEvent e = handle("Event.synchronize");
    nsimError err;
    {
      py::gil_scoped_release nogil;
      err = nsimEventSynchronize(e);
    }
    check(err);
  }
  double time_ns() const {
    double t = 0;
    check(nsimEventGetTime(handle("Event.time_ns"), &t));
    return t;
  }
  float elapsed_time(const Event& end) const {
    float ms = 0;
    check(nsimEventElapsedTime(&ms, handle("Event.elapsed_time"), end.handle("Event.elapsed_time")));
    return ms;
  }

  int device() const { return device_; }
  bool enable_timing() const { return timing_; }
  bool destroyed() const { return destroyed_; }
  std::string describe() const {
    return "Event(device=" + std::to_string(device_) + ", enable_timing=" + (timing_ ? "True" : "False") + ")";
  }

 private:
  nsimEvent handle_ = nullptr;
  int device_;
  bool timing_;
  bool destroyed_ = false;
  uint64_t generation_;
};

void Queue::wait_event(const Event& event) {
  check(nsimQueueWaitEvent(handle("Queue.wait_event"), event.handle("Queue.wait_event")));
}

// ------------------------------------------------------------------ copies
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

// ------------------------------------------------------------------ properties
py::dict properties_dict(const nsimDeviceProperties& p) {
  py::dict d;
  d["name"] = std::string(p.name);
  d["profile"] = std::string(p.profile);
  d["device"] = p.device;
  d["chip"] = p.chip;
  d["logical_core"] = p.logical_core;
  d["lnc"] = p.lnc;
  d["physical_cores_per_chip"] = p.physical_cores_per_chip;
  d["logical_cores_per_chip"] = p.logical_cores_per_chip;
  d["hbm_capacity"] = p.hbm_capacity;
  d["hbm_bandwidth"] = p.hbm_bandwidth;
  d["host_link_bandwidth"] = p.host_link_bandwidth;
  d["peak_flops_bf16"] = p.peak_flops_bf16;
  d["peak_flops_fp32"] = p.peak_flops_fp32;
  d["peak_flops_fp8"] = p.peak_flops_fp8;
  d["vector_flops_fp32"] = p.vector_flops_fp32;
  d["tensor_clock_hz"] = p.tensor_clock_hz;
  d["vector_clock_hz"] = p.vector_clock_hz;
  d["scalar_clock_hz"] = p.scalar_clock_hz;
  d["gpsimd_clock_hz"] = p.gpsimd_clock_hz;
  d["sbuf_partitions"] = p.sbuf_partitions;
  d["sbuf_bytes_per_partition"] = p.sbuf_bytes_per_partition;
  d["psum_bytes_per_partition"] = p.psum_bytes_per_partition;
  d["psum_banks"] = p.psum_banks;
  d["dma_engines"] = p.dma_engines;
  d["dma_engine_bandwidth"] = p.dma_engine_bandwidth;
  d["dma_fixed_overhead_ns"] = p.dma_fixed_overhead_ns;
  d["launch_overhead_ns"] = p.launch_overhead_ns;
  d["chip_link_bandwidth"] = p.chip_link_bandwidth;
  d["compute_capability_major"] = p.compute_capability_major;
  d["compute_capability_minor"] = p.compute_capability_minor;
  return d;
}

py::dict counters_dict(const nsimCounters& c) {
  py::dict d;
  d["live_allocations"] = c.live_allocations;
  d["bytes_in_use"] = c.bytes_in_use;
  d["peak_bytes_in_use"] = c.peak_bytes_in_use;
  d["total_allocations"] = c.total_allocations;
  d["total_frees"] = c.total_frees;
  d["failed_allocations"] = c.failed_allocations;
  d["memcpy_h2d"] = c.memcpy_h2d;
  d["memcpy_d2h"] = c.memcpy_d2h;
  d["memcpy_d2d"] = c.memcpy_d2d;
  d["bytes_h2d"] = c.bytes_h2d;
  d["bytes_d2h"] = c.bytes_d2h;
  d["bytes_d2d"] = c.bytes_d2d;
  d["memsets"] = c.memsets;
  d["launches"] = c.launches;
  d["live_queues"] = c.live_queues;
  d["live_events"] = c.live_events;
  return d;
}

const char* env_type_name(nsimEnvType type) {
  switch (type) {
    case NSIM_ENV_STRING: return "string";
    case NSIM_ENV_INT: return "int";
    case NSIM_ENV_BOOL: return "bool";
    case NSIM_ENV_CORE_LIST: return "core_list";
    case NSIM_ENV_BYTES: return "bytes";
  }
  return "unknown";
}

// The file the dynamic loader mapped for libneuron_sim: other native code must
// load this very file, or the process would hold two runtimes.
std::string library_path() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&nsimInit), &info) == 0 || info.dli_fname == nullptr)
    fail(NSIM_ERROR_INVALID_VALUE, "get_library_path: dladdr could not resolve libneuron_sim");
  return info.dli_fname;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "Bindings of the neuron_sim C API (see neuron_sim.h); use the neuron_sim package instead.";
  m.attr("API_VERSION") = NSIM_API_VERSION;
  m.attr("ALIGNMENT") = NSIM_ALIGNMENT;

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const NsimFailure& f) {
      set_python_error(make_exception(f.code, f.message));
    }
  });

  // -------------------------------------------------------- init / errors
  m.def("init", [] { check(nsimInit()); });
  // Always reaches nsimShutdown: it also clears a failed init, so the next init re-reads the environment.
  m.def("shutdown", [] {
    if (nsimIsInitialized()) ++g_generation;
    check(nsimShutdown());
  });
  m.def("is_initialized", [] { return nsimIsInitialized() != 0; });
  m.def("generation", [] { return g_generation.load(); },
        "Number of shutdown() calls so far: pointers from an earlier generation are stale.");
  m.def("error_name", [](int code) {
    const char* name = nsimGetErrorName(static_cast<nsimError>(code));
    return std::string(name ? name : "");
  });
  m.def("library_path", &library_path);

  // -------------------------------------------------------- devices
  m.def("device_count", [] {
    ensure_init();
    int n = 0;
    check(nsimGetDeviceCount(&n));
    return n;
  });
  m.def("device_properties", [](int device) {
    ensure_init();
    nsimDeviceProperties p{};
    check(nsimGetDeviceProperties(device, &p));
    return properties_dict(p);
  });
  m.def("profile_properties", [](const std::string& name, int lnc) {
    nsimDeviceProperties p{};
    check(nsimProfileGetProperties(name.c_str(), lnc, &p));
    return properties_dict(p);
  });
  m.def("profiles", [] {
    std::vector<std::string> names;
    for (size_t i = 0; i < nsimProfileCount(); ++i) names.emplace_back(nsimProfileName(i));
    return names;
  });
  m.def("device_synchronize", [](int device) {
    ensure_init();
    nsimError err;
    {
      py::gil_scoped_release nogil;
      err = nsimDeviceSynchronize(device);
    }
    check(err);
  });
  m.def("device_time_ns", [](int device) {
    ensure_init();
    double t = 0;
    check(nsimDeviceGetTime(device, &t));
    return t;
  });

  // -------------------------------------------------------- memory
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
  m.def("host_counters", [] {
    ensure_init();
    uint64_t live = 0, bytes = 0;
    check(nsimGetHostCounters(&live, &bytes));
    py::dict d;
    d["live_allocations"] = live;
    d["bytes_in_use"] = bytes;
    return d;
  });

  // -------------------------------------------------------- copies
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

  // -------------------------------------------------------- queues, events
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

  // -------------------------------------------------------- names, timeline, counters
  m.def("register_name", [](const std::string& name) {
    ensure_init();
    return intern_name(name);
  });
  m.def("get_name", [](uint32_t id) -> py::object {
    ensure_init();
    const char* name = nsimGetName(id);
    if (!name) return py::none();
    return py::str(name);
  });
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
  m.def("counters", [](int device) {
    ensure_init();
    nsimCounters c{};
    check(nsimGetCounters(device, &c));
    return counters_dict(c);
  });
  m.def("reset_peak_counters", [](int device) {
    ensure_init();
    check(nsimResetPeakCounters(device));
  });

  // -------------------------------------------------------- faults
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

  // -------------------------------------------------------- environment registry
  m.def("env_registry", [] {
    py::list out;
    for (size_t i = 0; i < nsimEnvVarCount(); ++i) {
      const nsimEnvVar* v = nsimEnvVarGet(i);
      if (!v) continue;
      out.append(py::make_tuple(std::string(v->name), env_type_name(v->type),
                                std::string(v->default_value ? v->default_value : ""),
                                std::string(v->meaning ? v->meaning : "")));
    }
    return out;
  });
}
