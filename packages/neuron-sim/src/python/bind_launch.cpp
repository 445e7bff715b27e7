// Launches: interned names and Queue.launch, which runs a Python callable or a
// native nsimHostFn as the launched work.
#include <climits>
#include <string>

#include "binding.h"
#include "queue.h"

namespace nsim_py {

namespace {

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

}  // namespace

uint32_t intern_name(const std::string& name) {
  uint32_t id = 0;
  check(nsimRegisterName(name.c_str(), &id));
  return id;
}

void Queue::launch(const std::string& name, double duration_ns, const py::object& fn, int kind,
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

void bind_launch(py::module_& m) {
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
}

}  // namespace nsim_py
