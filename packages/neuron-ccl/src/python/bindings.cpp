// Python bindings of neuron_ccl. Pointers are neuron_sim device addresses as Python ints
// (neuron_sim.malloc, DeviceBuffer); the store is a TCPStore or any object with
// set(key: str, value: bytes) and get(key: str) -> bytes.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "../ccl/env.h"
#include "neuron_ccl/neuron_ccl.h"

namespace py = pybind11;
using namespace neuron_ccl;

namespace {

class PyStore : public KVStore {
 public:
  explicit PyStore(py::object obj) : obj_(std::move(obj)) {}
  ~PyStore() override {
    py::gil_scoped_acquire gil;
    obj_ = py::object();
  }
  void set(const std::string& k, const std::string& v) override {
    py::gil_scoped_acquire gil;
    obj_.attr("set")(k, py::bytes(v));
  }
  std::string get(const std::string& k) override {
    py::gil_scoped_acquire gil;
    py::object v = obj_.attr("get")(k);
    return v.cast<std::string>();
  }

 private:
  py::object obj_;
};

struct StoreHandle {
  std::shared_ptr<KVStore> store;
};

std::shared_ptr<KVStore> as_store(py::object o) {
  if (py::isinstance<StoreHandle>(o)) return o.cast<StoreHandle&>().store;
  return std::make_shared<PyStore>(o);
}

std::vector<Buffer> buffers(const std::vector<std::pair<uintptr_t, size_t>>& v) {
  std::vector<Buffer> out;
  out.reserve(v.size());
  for (auto& [p, c] : v) out.push_back({reinterpret_cast<void*>(p), c});
  return out;
}

Reduction reduction(const std::string& op, double factor) { return {reduce_op_from_name(op), factor}; }
void* P(uintptr_t p) { return reinterpret_cast<void*>(p); }

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "neuron_ccl native module";
  static py::exception<Error> base(m, "CclError", PyExc_RuntimeError);
  static py::exception<Error> timeout(m, "CclTimeoutError", base.ptr());
  static py::exception<Error> peer(m, "CclPeerError", base.ptr());
  static py::exception<Error> mismatch(m, "CclMismatchError", base.ptr());
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      switch (e.kind()) {
        case Error::kTimeout: PyErr_SetString(timeout.ptr(), e.what()); return;
        case Error::kPeerFailure:
        case Error::kAborted: PyErr_SetString(peer.ptr(), e.what()); return;
        case Error::kMismatch: PyErr_SetString(mismatch.ptr(), e.what()); return;
        case Error::kInvalidArgument: PyErr_SetString(PyExc_ValueError, e.what()); return;
        default: PyErr_SetString(base.ptr(), e.what()); return;
      }
    }
  });

  py::class_<StoreHandle>(m, "TCPStore")
      .def(py::init([](const std::string& host, int port, bool is_server, double timeout_s) {
             py::gil_scoped_release nogil;
             return StoreHandle{make_tcp_store(host, port, is_server,
                                               std::chrono::milliseconds(int64_t(timeout_s * 1000)))};
           }),
           py::arg("host"), py::arg("port"), py::arg("is_server"), py::arg("timeout_s") = 300.0)
      .def("set", [](StoreHandle& s, const std::string& k, const std::string& v) {
        py::gil_scoped_release nogil;
        s.store->set(k, v);
      })
      .def("get", [](StoreHandle& s, const std::string& k) {
        std::string v;
        {
          py::gil_scoped_release nogil;
          v = s.store->get(k);
        }
        return py::bytes(v);
      });

  using C = Communicator;
  py::class_<C, std::shared_ptr<C>>(m, "Communicator")
      .def(py::init([](py::object store, int rank, int size, int device, double timeout_s, const std::string& name,
                       int local_rank) {
             CommOptions o;
             o.device = device;
             o.timeout = std::chrono::milliseconds(int64_t(timeout_s * 1000));
             o.name = name;
             o.local_rank = local_rank;
             auto s = as_store(store);
             py::gil_scoped_release nogil;
             return C::create(s, rank, size, o);
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("device") = 0, py::arg("timeout_s") = 1800.0,
           py::arg("name") = "default", py::arg("local_rank") = -1)
      .def_property_readonly("rank", &C::rank)
      .def_property_readonly("size", &C::size)
      .def_property_readonly("device", &C::device)
      .def_property_readonly("name", &C::name)
      .def_property_readonly("transport", &C::transport)
      .def("set_timeout", [](C& c, double s) { c.set_timeout(std::chrono::milliseconds(int64_t(s * 1000))); })
      .def("split", &C::split, py::arg("color"), py::arg("key"), py::call_guard<py::gil_scoped_release>())
      .def("all_reduce",
           [](C& c, uintptr_t s, uintptr_t r, size_t n, const std::string& dt, const std::string& op, double f) {
             c.all_reduce(P(s), P(r), n, dtype_from_name(dt), reduction(op, f), nullptr);
           },
           py::arg("send"), py::arg("recv"), py::arg("count"), py::arg("dtype") = "float32", py::arg("op") = "sum",
           py::arg("factor") = 1.0, py::call_guard<py::gil_scoped_release>())
      .def("broadcast",
           [](C& c, uintptr_t b, size_t n, const std::string& dt, int root) {
             c.broadcast(P(b), n, dtype_from_name(dt), root, nullptr);
           },
           py::arg("buf"), py::arg("count"), py::arg("dtype") = "float32", py::arg("root") = 0,
           py::call_guard<py::gil_scoped_release>())
      .def("reduce",
           [](C& c, uintptr_t s, uintptr_t r, size_t n, const std::string& dt, const std::string& op, int root,
              double f) { c.reduce(P(s), P(r), n, dtype_from_name(dt), reduction(op, f), root, nullptr); },
           py::arg("send"), py::arg("recv"), py::arg("count"), py::arg("dtype") = "float32", py::arg("op") = "sum",
           py::arg("root") = 0, py::arg("factor") = 1.0, py::call_guard<py::gil_scoped_release>())
      .def("all_gather",
           [](C& c, uintptr_t s, uintptr_t r, size_t n, const std::string& dt) {
             c.all_gather(P(s), P(r), n, dtype_from_name(dt), nullptr);
           },
           py::arg("send"), py::arg("recv"), py::arg("count"), py::arg("dtype") = "float32",
           py::call_guard<py::gil_scoped_release>())
      .def("all_gather_v",
           [](C& c, uintptr_t s, size_t n, const std::vector<std::pair<uintptr_t, size_t>>& r, const std::string& dt) {
             c.all_gather_v(P(s), n, buffers(r), dtype_from_name(dt), nullptr);
           },
           py::arg("send"), py::arg("count"), py::arg("recv"), py::arg("dtype") = "float32",
           py::call_guard<py::gil_scoped_release>())
      .def("reduce_scatter",
           [](C& c, uintptr_t s, uintptr_t r, size_t n, const std::string& dt, const std::string& op, double f) {
             c.reduce_scatter(P(s), P(r), n, dtype_from_name(dt), reduction(op, f), nullptr);
           },
           py::arg("send"), py::arg("recv"), py::arg("count"), py::arg("dtype") = "float32", py::arg("op") = "sum",
           py::arg("factor") = 1.0, py::call_guard<py::gil_scoped_release>())
      .def("reduce_scatter_v",
           [](C& c, const std::vector<std::pair<uintptr_t, size_t>>& s, uintptr_t r, size_t n, const std::string& dt,
              const std::string& op, double f) {
             c.reduce_scatter_v(buffers(s), P(r), n, dtype_from_name(dt), reduction(op, f), nullptr);
           },
           py::arg("send"), py::arg("recv"), py::arg("count"), py::arg("dtype") = "float32", py::arg("op") = "sum",
           py::arg("factor") = 1.0, py::call_guard<py::gil_scoped_release>())
      .def("all_to_all_v",
           [](C& c, const std::vector<std::pair<uintptr_t, size_t>>& s,
              const std::vector<std::pair<uintptr_t, size_t>>& r, const std::string& dt) {
             c.all_to_all_v(buffers(s), buffers(r), dtype_from_name(dt), nullptr);
           },
           py::arg("send"), py::arg("recv"), py::arg("dtype") = "float32", py::call_guard<py::gil_scoped_release>())
      .def("gather",
           [](C& c, uintptr_t s, size_t n, const std::vector<std::pair<uintptr_t, size_t>>& r, const std::string& dt,
              int root) { c.gather(P(s), n, buffers(r), dtype_from_name(dt), root, nullptr); },
           py::arg("send"), py::arg("count"), py::arg("recv"), py::arg("dtype") = "float32", py::arg("root") = 0,
           py::call_guard<py::gil_scoped_release>())
      .def("scatter",
           [](C& c, const std::vector<std::pair<uintptr_t, size_t>>& s, uintptr_t r, size_t n, const std::string& dt,
              int root) { c.scatter(buffers(s), P(r), n, dtype_from_name(dt), root, nullptr); },
           py::arg("send"), py::arg("recv"), py::arg("count"), py::arg("dtype") = "float32", py::arg("root") = 0,
           py::call_guard<py::gil_scoped_release>())
      .def("barrier", [](C& c) { c.barrier(nullptr); }, py::call_guard<py::gil_scoped_release>())
      .def("send",
           [](C& c, uintptr_t b, size_t n, const std::string& dt, int peer, int tag) {
             c.send(P(b), n, dtype_from_name(dt), peer, tag, nullptr);
           },
           py::arg("buf"), py::arg("count"), py::arg("dtype"), py::arg("peer"), py::arg("tag") = 0,
           py::call_guard<py::gil_scoped_release>())
      .def("recv",
           [](C& c, uintptr_t b, size_t n, const std::string& dt, int peer, int tag) {
             c.recv(P(b), n, dtype_from_name(dt), peer, tag, nullptr);
           },
           py::arg("buf"), py::arg("count"), py::arg("dtype"), py::arg("peer"), py::arg("tag") = 0,
           py::call_guard<py::gil_scoped_release>())
      .def("wait_sends", &C::wait_sends, py::call_guard<py::gil_scoped_release>())
      .def("abort", &C::abort)
      .def("flight_record", &C::flight_record);

  m.def("select_algorithm",
        py::overload_cast<const std::string&, size_t, int, const std::string&>(&select_algorithm), py::arg("op"),
        py::arg("bytes"), py::arg("ranks"), py::arg("transport") = "shm",
        "The algorithm neuron_ccl uses for `op` over `bytes` on `ranks` with `transport` (shm or tcp), "
        "after NEURON_CCL_ALGO.");
  m.def("env_vars", [] {
    py::list out;
    for (size_t i = 0; i < env_var_count(); ++i) {
      const auto& v = env_var(i);
      out.append(py::make_tuple(v.name, v.type, v.default_value, v.meaning));
    }
    return out;
  });
}
