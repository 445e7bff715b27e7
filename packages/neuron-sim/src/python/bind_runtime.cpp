// Runtime lifetime, errors, devices and profiles: init/shutdown, device count,
// properties, device-wide synchronisation and time.
#include <dlfcn.h>

#include <string>
#include <vector>

#include "binding.h"

namespace nsim_py {

namespace {

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

// The file the dynamic loader mapped for libneuron_sim: other native code must
// load this very file, or the process would hold two runtimes.
std::string library_path() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&nsimInit), &info) == 0 || info.dli_fname == nullptr)
    fail(NSIM_ERROR_INVALID_VALUE, "get_library_path: dladdr could not resolve libneuron_sim");
  return info.dli_fname;
}

}  // namespace

void bind_runtime(py::module_& m) {
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
}

}  // namespace nsim_py
