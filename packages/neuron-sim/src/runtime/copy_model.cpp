#include "copy_model.h"

#include "error.h"

namespace nsim {

double model_copy_ns(const Device* src, const Device* dst, nsimMemcpyKind kind, size_t bytes) {
  const nsimDeviceProperties& p = dst->props;
  // Every transfer pays the DMA fixed overhead (calibration §4.5: ~1300 ns descriptor setup
  // and semaphore-to-start latency).
  const double overhead = p.dma_fixed_overhead_ns;
  const double b = static_cast<double>(bytes);
  if (kind == NSIM_MEMCPY_HOST_TO_DEVICE || kind == NSIM_MEMCPY_DEVICE_TO_HOST) {
    // Host link bandwidth per direction (assumed PCIe figure, see profiles.cpp).
    return b / p.host_link_bandwidth * 1e9 + overhead;
  }
  if (src == dst) {
    // Same HBM share read and written (facts §5.1 HBM bandwidth / logical cores per chip).
    return 2.0 * b / p.hbm_bandwidth * 1e9 + overhead;
  }
  if (src->props.chip == dst->props.chip) {
    // Read on one share and written on another of the same chip's HBM, in parallel.
    return b / p.hbm_bandwidth * 1e9 + overhead;
  }
  // Across chips: NeuronLink bandwidth per chip (facts §5.1 chip-to-chip).
  return b / p.chip_link_bandwidth * 1e9 + overhead;
}

double model_memset_ns(const Device* d, size_t bytes) {
  // Write-only HBM traffic plus the DMA fixed overhead (calibration §4.5).
  return static_cast<double>(bytes) / d->props.hbm_bandwidth * 1e9 + d->props.dma_fixed_overhead_ns;
}

}  // namespace nsim

using namespace nsim;

extern "C" {

NSIM_API nsimError nsimModelCopyDuration(int device, nsimMemcpyKind kind, size_t bytes,
                                         double* duration_ns) {
  Runtime* rt = runtime_or_error("nsimModelCopyDuration");
  if (!rt) return runtime_unavailable();
  Device* d = device_or_error(rt, "nsimModelCopyDuration", device);
  if (!d) return NSIM_ERROR_INVALID_DEVICE;
  if (!duration_ns) {
    return set_error(NSIM_ERROR_INVALID_VALUE, "nsimModelCopyDuration: duration_ns is NULL");
  }
  if (kind != NSIM_MEMCPY_HOST_TO_DEVICE && kind != NSIM_MEMCPY_DEVICE_TO_HOST &&
      kind != NSIM_MEMCPY_DEVICE_TO_DEVICE) {
    return set_error(NSIM_ERROR_INVALID_VALUE,
                     "nsimModelCopyDuration: kind %d has no device cost; pass "
                     "NSIM_MEMCPY_HOST_TO_DEVICE, NSIM_MEMCPY_DEVICE_TO_HOST or "
                     "NSIM_MEMCPY_DEVICE_TO_DEVICE (same device)",
                     static_cast<int>(kind));
  }
  *duration_ns = model_copy_ns(d, d, kind, bytes);
  return NSIM_SUCCESS;
}

}  // extern "C"
