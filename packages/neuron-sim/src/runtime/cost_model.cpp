#include "cost_model.h"

#include <algorithm>
#include <cmath>

#include "error.h"

namespace nsim {
namespace {

// The engine rate a roofline divides the op's flops by. TensorE peaks per precision
// (calibration §4.2, facts §5.2; profiles.cpp); everything else runs on VectorE at its FP32
// rate (calibration §4.2), integers included.
double peak_flops(const nsimDeviceProperties& p, const nsimLaunchCost& c) {
  if (c.compute != NSIM_COMPUTE_TENSOR) return p.vector_flops_fp32;
  switch (c.dtype_class) {
    case NSIM_DTYPE_BF16: return p.peak_flops_bf16;
    case NSIM_DTYPE_FP8: return p.peak_flops_fp8;
    case NSIM_DTYPE_INT: return p.vector_flops_fp32;
    default: return p.peak_flops_fp32;
  }
}

bool finite_nonneg(double x) { return x >= 0.0 && !std::isinf(x); }

}  // namespace

double model_launch_ns(const nsimDeviceProperties& p, const nsimLaunchCost& c, const char** why) {
  if (!finite_nonneg(c.flops) || !finite_nonneg(c.bytes_read) || !finite_nonneg(c.bytes_written) ||
      !finite_nonneg(c.duration_ns)) {
    *why = "flops, bytes_read, bytes_written and duration_ns must be finite and >= 0";
    return -1.0;
  }
  if (c.dtype_class > NSIM_DTYPE_NONE || c.compute > NSIM_COMPUTE_TENSOR) {
    *why = "dtype_class must be an nsimDtypeClass and compute an nsimComputeClass";
    return -1.0;
  }
  switch (c.model) {
    case NSIM_MODEL_UNSPECIFIED:
    case NSIM_MODEL_INTERCONNECT:
      return c.duration_ns;
    case NSIM_MODEL_KERNEL_SCHEDULE:
      // The schedule covers the engines; a launch also pays the runtime's fixed device-side
      // cost (calibration §4.6: 3.0-4.1 us for a trivial NEFF).
      return p.launch_overhead_ns + c.duration_ns;
    case NSIM_MODEL_ROOFLINE:
    case NSIM_MODEL_HOST_ROUND_TRIP: {
      const double peak = peak_flops(p, c);
      const double bytes = c.bytes_read + c.bytes_written;
      const double compute_ns = peak > 0 ? c.flops / peak * 1e9 : 0.0;
      const double memory_ns = p.hbm_bandwidth > 0 ? bytes / p.hbm_bandwidth * 1e9 : 0.0;
      double ns = p.launch_overhead_ns + std::max(compute_ns, memory_ns);
      if (c.model == NSIM_MODEL_HOST_ROUND_TRIP && p.host_link_bandwidth > 0) {
        // On a chip, an op the device cannot run bounces its operands through host memory:
        // both directions over the host link (assumed PCIe figure, profiles.cpp) plus one DMA
        // setup each way (calibration §4.5: ~1300 ns).
        ns += bytes / p.host_link_bandwidth * 1e9 + 2 * p.dma_fixed_overhead_ns;
      }
      return ns;
    }
    default:
      *why = "model must be UNSPECIFIED, KERNEL_SCHEDULE, ROOFLINE, HOST_ROUND_TRIP or INTERCONNECT "
             "(copies are costed by nsimMemcpy itself)";
      return -1.0;
  }
}

}  // namespace nsim

using namespace nsim;

extern "C" {

NSIM_API nsimError nsimModelLaunchDuration(int device, const nsimLaunchCost* cost,
                                           double* duration_ns) {
  Runtime* rt = runtime_or_error("nsimModelLaunchDuration");
  if (!rt) return runtime_unavailable();
  Device* d = device_or_error(rt, "nsimModelLaunchDuration", device);
  if (!d) return NSIM_ERROR_INVALID_DEVICE;
  if (!cost || !duration_ns) {
    return set_error(NSIM_ERROR_INVALID_VALUE, "nsimModelLaunchDuration: cost or duration_ns is NULL");
  }
  const char* why = "";
  const double ns = model_launch_ns(d->props, *cost, &why);
  if (ns < 0) {
    return set_error(NSIM_ERROR_INVALID_VALUE, "nsimModelLaunchDuration: neuron device %d: %s",
                     device, why);
  }
  *duration_ns = ns;
  return NSIM_SUCCESS;
}

}  // extern "C"
