// Python bindings of the backend (torch_neuron._C). The only translation unit
// that includes torch/extension.h.
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/extension.h>

#include "aten/Accounting.h"
#include "aten/HostFallback.h"
#include "aten/HostScope.h"
#include "aten/NativeDecision.h"
#include "aten/OpRegistry.h"
#include "aten/ShapeOnly.h"
#include "runtime/HostAllocationRedirect.h"
#include "runtime/NeuronAllocator.h"
#include "runtime/Valueless.h"
#include "runtime/NeuronGenerator.h"
#include "runtime/NeuronRuntime.h"
#include "runtime/NeuronStream.h"
#include "runtime/SanitizerLog.h"

namespace py = pybind11;

namespace torch_neuron {
namespace {

py::object* g_py_estimator = nullptr;  // intentionally leaked: called until process exit
py::object* g_py_executor = nullptr;   // likewise (device numerics)
py::object* g_py_reporter = nullptr;   // likewise (fallback warnings)
py::object* g_py_reader = nullptr;     // likewise (host reads of valueless tensors)

py::list to_py(c10::ArrayRef<c10::IValue> values) {
  py::list out;
  for (const c10::IValue& v : values) out.append(torch::jit::toPyObject(v));
  return out;
}

// The estimator returns the schedule's ns, or (ns, per-engine busy ns in nsimEngine order).
NativeCost estimate_with_python(const OpInfo& info, c10::ScalarType dtype,
                                c10::ArrayRef<c10::IValue> args) {
  py::gil_scoped_acquire gil;
  py::object r = (*g_py_estimator)(info.name, info.native_entry,
                                   std::string(c10::toString(dtype)), to_py(args));
  NativeCost c;
  if (py::isinstance<py::tuple>(r)) {
    auto t = r.cast<py::tuple>();
    c.ns = t[0].cast<double>();
    auto busy = t[1].cast<py::sequence>();
    for (size_t e = 0; e < c.engine_busy_ns.size() && e < busy.size(); ++e) {
      c.engine_busy_ns[e] = busy[e].cast<double>();
    }
  } else {
    c.ns = r.cast<double>();
  }
  return c;
}

void execute_with_python(const OpInfo& info, c10::ScalarType dtype,
                         c10::ArrayRef<c10::IValue> inputs, c10::ArrayRef<c10::IValue> args,
                         c10::ArrayRef<c10::IValue> results) {
  std::string error;
  {
    py::gil_scoped_acquire gil;
    try {
      (*g_py_executor)(info.name, info.native_entry, std::string(c10::toString(dtype)),
                       to_py(inputs), to_py(args), to_py(results));
      return;
    } catch (py::error_already_set& e) {
      // The Python error (and its traceback, which holds host aliases of device memory)
      // is released here, under the GIL; the message travels as a c10::Error.
      error = py::str(e.value()).cast<std::string>();
    }
  }
  TORCH_CHECK(false, error);
}

// Runs inside the op that fell back, on whatever thread it runs, with or without the GIL
// (a device worker of autograd has no Python thread state yet: gil_scoped_acquire makes
// one). A Python error (warnings turned into errors) propagates as py::error_already_set,
// which torch's bindings turn back into the Python exception.
bool report_with_python(const OpInfo& info, c10::ScalarType dtype, bool rejected, bool per_op) {
#if PY_VERSION_HEX >= 0x030D0000
  if (!Py_IsInitialized() || Py_IsFinalizing()) return false;
#else
  if (!Py_IsInitialized() || _Py_IsFinalizing()) return false;
#endif
  py::gil_scoped_acquire gil;
  py::error_scope pending;  // an op run while a Python error is set (e.g. in a __del__)
  return (*g_py_reporter)(info.name, std::string(c10::toString(dtype)), rejected, per_op)
      .cast<bool>();
}

// A host read of a valueless tensor (shape-only execution): fn(what, tensor) attributes it to
// the user's line. Errors in the reader propagate as for the fallback reporter.
void read_with_python(const char* what, const at::Tensor& t) {
#if PY_VERSION_HEX >= 0x030D0000
  if (!Py_IsInitialized() || Py_IsFinalizing()) return;
#else
  if (!Py_IsInitialized() || _Py_IsFinalizing()) return;
#endif
  py::gil_scoped_acquire gil;
  py::error_scope pending;
  (*g_py_reader)(std::string(what), t);
}

// Launches a compiled graph deferred, between end_deferred_launches and settle_deferred_launches.
std::vector<DeferredLaunch>& pending_launches() {
  thread_local std::vector<DeferredLaunch> pending;
  return pending;
}
}  // namespace
}  // namespace torch_neuron

PYBIND11_MODULE(_C, m) {
  using namespace torch_neuron;
  m.doc() = "Native part of the PyTorch backend for device 'neuron'.";

  m.def("_init", [] {
    ensure_initialized();
    install_host_allocation_redirect();
    set_main_thread();
    register_functional_host_kernels();
    register_layout_host_kernels();
  });
  m.def("_is_in_bad_fork", &in_bad_fork);
  m.def("device_count", [] { return static_cast<int>(device_count()); });
  m.def("current_device", [] { return static_cast<int>(current_device()); });
  m.def("set_device", [](int d) { set_current_device(static_cast<c10::DeviceIndex>(d)); });
  // neuron_sim's dictionary of the device's figures (its key names), after torch's index check:
  // one source for both packages.
  m.def("get_device_properties", [](int d) {
    device_properties(static_cast<c10::DeviceIndex>(d));
    return py::module_::import("neuron_sim._C").attr("device_properties")(d);
  });
  m.def("_get_default_generator", [](int d) {
    return py::reinterpret_steal<py::object>(
        THPGenerator_initDefaultGenerator(default_generator(static_cast<c10::DeviceIndex>(d))));
  });
  m.def("device_time_ns", [](int d) {
    check_device_index(d);
    double t = 0;
    NEURON_CHECK(nsimDeviceGetTime(d, &t));
    return t;
  });
  m.def("stream_time_ns", [](int d, int64_t stream_id) {
    double t = 0;
    NEURON_CHECK(nsimQueueGetTime(
        queue_of(c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, d),
                             stream_id)),
        &t));
    return t;
  });
  m.def("current_stream_id", [](int d) {
    return static_cast<int64_t>(current_stream(static_cast<c10::DeviceIndex>(d)).id());
  });
  m.def("_set_sanitizing", &set_sanitizing);
  // (kind, ptr or event, size, device, stream, recorded streams) in the order they happened.
  m.def("_sanitizer_drain", [] {
    std::vector<SanitizerEvent> events = sanitizer_drain();
    py::list out;
    for (const SanitizerEvent& e : events) {
      out.append(py::make_tuple(static_cast<int>(e.kind), e.ptr, e.size, e.device, e.stream,
                                py::tuple(py::cast(e.streams))));
    }
    return out;
  });
  m.def("stream_priority", [](int d, int64_t stream_id) {
    return stream_priority(c10::Stream(c10::Stream::UNSAFE,
                                       c10::Device(c10::DeviceType::PrivateUse1, d), stream_id));
  });
  m.def("event_elapsed_ms", [](int64_t start_id, int64_t end_id) {
    TORCH_CHECK(start_id != 0 && end_id != 0,
                "Both events must be recorded before calculating elapsed time.");
    return event_elapsed_ms(reinterpret_cast<nsimEvent>(start_id),
                            reinterpret_cast<nsimEvent>(end_id));
  });
  m.def("set_native_estimator", [](py::object fn) {
    g_py_estimator = new py::object(std::move(fn));
    set_native_estimator(&estimate_with_python);
  });
  // Device numerics: fn(op, entry, dtype, inputs, args, results) recomputes a native
  // call's outputs with its tile kernel; None turns the mode off.
  m.def("set_native_executor", [](py::object fn) {
    if (fn.is_none()) {
      set_native_executor(nullptr);
      return;
    }
    if (!g_py_executor) g_py_executor = new py::object();
    *g_py_executor = std::move(fn);
    set_native_executor(&execute_with_python);
  });
  m.def("native_executor_set", [] { return native_executor() != nullptr; });
  m.def("register_native", [](const std::string& executed_op, const std::string& entry,
                              py::object dtype) {
    TORCH_CHECK(THPDtype_Check(dtype.ptr()), "register_native: expected a torch.dtype");
    register_native(executed_op, entry, reinterpret_cast<THPDtype*>(dtype.ptr())->scalar_type);
  });
  // Counts one native execution of `op` (a user tile kernel, a generated kernel) and places a
  // launch of launch overhead + kernel_ns, named `op`, on the current stream of `device`;
  // flops and bytes, when given, are the launch's counted arithmetic and operand traffic.
  m.def("launch_native_kernel", [](const std::string& op, py::object dtype, int device,
                                   double kernel_ns, double flops, double bytes_in, double bytes_out) {
    TORCH_CHECK(THPDtype_Check(dtype.ptr()), "launch_native_kernel: expected a torch.dtype");
    check_device_index(static_cast<c10::DeviceIndex>(device));
    CostInputs in;
    in.native = true;
    in.native_ns = kernel_ns;
    in.flops = flops;
    in.bytes_in = bytes_in;
    in.bytes_out = bytes_out;
    account(op_info_by_name(op), static_cast<c10::DeviceIndex>(device),
            reinterpret_cast<THPDtype*>(dtype.ptr())->scalar_type, /*native=*/true, in);
  }, py::arg("op"), py::arg("dtype"), py::arg("device"), py::arg("kernel_ns"), py::arg("flops") = 0.0,
     py::arg("bytes_in") = 0.0, py::arg("bytes_out") = 0.0);
  // CPU tensors over the device bytes of neuron tensors (others returned as they are): the
  // compile backend's fused chains compute their values with CPU ops on these.
  m.def("host_aliases", [](const std::vector<at::Tensor>& ts) {
    std::vector<at::Tensor> out;
    out.reserve(ts.size());
    for (const auto& t : ts) out.push_back(host_alias_of(t));
    return out;
  });
  // While set, this thread's CPU allocations come from the device's memory (as during eager
  // host execution): a fused chain's intermediates live in device memory like eager's. Returns
  // the previous device (-1: none).
  m.def("exchange_execution_device", [](int device) {
    return static_cast<int>(exchange_execution_device(static_cast<c10::DeviceIndex>(device)));
  });
  // Values-only mode of this thread (see Accounting.h); returns the previous mode.
  m.def("exchange_values_only", [](bool on) { return exchange_values_only(on); });
  // A compiled graph's run: its launches are counted but not placed until the end.
  m.def("begin_deferred_launches", [] { begin_deferred_launches(); });
  // Ends deferral and returns (op, device, kernel ns, native) per deferred launch, in issue
  // order; they stay pending for place_deferred_launch until clear_deferred_launches.
  m.def("end_deferred_launches", [] {
    pending_launches() = end_deferred_launches();
    py::list out;
    for (const DeferredLaunch& l : pending_launches()) {
      out.append(py::make_tuple(l.info->name, static_cast<int>(l.device), l.cost.duration_ns, l.native));
    }
    return out;
  });
  m.def("place_deferred_launch", [](size_t i) {
    TORCH_CHECK_INDEX(i < pending_launches().size(), "place_deferred_launch: no pending launch ", i);
    place_deferred(pending_launches()[i]);
  });
  m.def("clear_deferred_launches", [] { pending_launches().clear(); });
  // One launch standing for pending launches first..last (a compiled graph's run of native
  // kernels, one NEFF; the kernels were counted as executions, the launch is not): named `op`,
  // placed on the first one's queue with
  // the modelled latency `ns` and the busy time of each engine (tensor, vector, scalar, gpsimd,
  // dma); its flops and bytes are the kernels' sums, its precision class that of the kernel
  // with the most flops.
  m.def("place_graph_launch", [](const std::string& op, size_t first, size_t last, double ns,
                                 const std::vector<double>& busy) {
    std::vector<DeferredLaunch>& p = pending_launches();
    TORCH_CHECK_INDEX(first <= last && last < p.size(), "place_graph_launch: launches ", first, "..", last,
                      " are not pending (", p.size(), " are)");
    TORCH_CHECK_VALUE(busy.size() == NSIM_ENGINE_COUNT, "place_graph_launch: ", NSIM_ENGINE_COUNT,
                      " engine busy times expected, got ", busy.size());
    nsimLaunchCost c{};
    c.model = NSIM_MODEL_KERNEL_SCHEDULE;
    c.compute = NSIM_COMPUTE_VECTOR;
    c.duration_ns = ns;
    double most = -1.0;
    for (size_t i = first; i <= last; ++i) {
      const nsimLaunchCost& k = p[i].cost;
      c.flops += k.flops;
      c.bytes_read += k.bytes_read;
      c.bytes_written += k.bytes_written;
      if (k.compute == NSIM_COMPUTE_TENSOR) c.compute = NSIM_COMPUTE_TENSOR;
      if (k.flops > most) {
        most = k.flops;
        c.dtype_class = k.dtype_class;
      }
    }
    for (int e = 0; e < NSIM_ENGINE_COUNT; ++e) c.engine_busy_ns[e] = busy[e];
    uint32_t name_id = 0;
    NEURON_CHECK(nsimRegisterName(op.c_str(), &name_id));
    NEURON_CHECK(nsimLaunchWithCost(p[first].queue, name_id, NSIM_LAUNCH_KERNEL, &c, nullptr, nullptr,
                                    nullptr));
  });
  // Host cost class of `op` from op_table.yaml's cost_class column: matmul, reduction or
  // elementwise.
  m.def("set_cost_class", [](const std::string& op, const std::string& cls) {
    OpClass c;
    if (cls == "matmul") {
      c = OpClass::Matmul;
    } else if (cls == "reduction") {
      c = OpClass::Reduction;
    } else if (cls == "elementwise") {
      c = OpClass::Elementwise;
    } else {
      TORCH_CHECK_VALUE(false, "set_cost_class(", op, "): cost class '", cls,
                        "' is not one of matmul, reduction, elementwise (op_table.yaml cost_class)");
    }
    set_cost_class(op, c);
  });
  m.def("ops_ran_off_main_thread", &ops_ran_off_main_thread);
  m.def("op_counts", [] {
    py::list out;
    for (const auto& c : op_counts()) out.append(py::make_tuple(c.op, c.dtype, c.native, c.fallback));
    return out;
  });
  m.def("clear_op_counts", &clear_op_counts);
  m.def("set_strict", &set_strict);
  m.def("strict", &strict);
  m.def("set_fallback_warn_mode", [](int mode) {
    TORCH_CHECK(mode >= 0 && mode <= 2, "set_fallback_warn_mode: expected 0 (off), 1 (once) or 2 (per op)");
    set_fallback_warn(static_cast<FallbackWarn>(mode));
  });
  m.def("fallback_warn_mode", [] { return static_cast<int>(fallback_warn()); });
  // fn(op, dtype, rejected, per_op) -> bool warns about one fallback (torch_neuron.fallback).
  m.def("set_fallback_reporter", [](py::object fn) {
    if (!g_py_reporter) g_py_reporter = new py::object();
    *g_py_reporter = std::move(fn);
    set_fallback_reporter(&report_with_python);
  });
  // Shape-only execution (aten/ShapeOnly.h).
  m.def("set_shape_only", [](bool on) { shape_only::set_active(on); });
  m.def("shape_only", [] { return shape_only::active(); });
  m.def("is_valueless", [](const at::Tensor& t) { return valueless::contains(t); });
  m.def("valueless_count", [] { return valueless::count(); });
  m.def("set_host_read_reporter", [](py::object fn) {
    if (!g_py_reader) g_py_reader = new py::object();
    const bool none = fn.is_none();
    *g_py_reader = std::move(fn);
    shape_only::set_read_reporter(none ? nullptr : &read_with_python);
  });
  m.def("set_allocation_phase", [](int phase) {
    TORCH_CHECK(phase >= 0 && phase < static_cast<int>(kAllocationPhases), "allocation phase ", phase);
    set_allocation_phase(static_cast<AllocationPhase>(phase));
  });
  m.def("allocation_phase", [] { return static_cast<int>(allocation_phase()); });
  // Allocated bytes of tensors by allocation phase, now and at their high-water, and the host
  // kernels' scratch apart.
  m.def("memory_usage", [](int device) {
    const Usage u = usage(static_cast<c10::DeviceIndex>(device));
    py::dict d;
    d["by_phase"] = std::vector<size_t>(u.by_phase.begin(), u.by_phase.end());
    d["at_peak"] = std::vector<size_t>(u.at_peak.begin(), u.at_peak.end());
    d["tensor_peak"] = u.tensor_peak;
    d["scratch"] = u.scratch;
    d["scratch_peak"] = u.scratch_peak;
    return d;
  });
  void torch_neuron_bind_distributed(pybind11::module_ & m);  // csrc/distributed/BindingsImpl.h
  torch_neuron_bind_distributed(m);
}

#include "distributed/BindingsImpl.h"
