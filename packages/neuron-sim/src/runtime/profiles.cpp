#include "profiles.h"

#include <cstdio>
#include <cstring>

#include "error.h"

namespace nsim {
namespace {

constexpr double kGB = 1e9;
constexpr double kTB = 1e12;
constexpr uint64_t kGiB = 1ull << 30;
constexpr uint64_t kKiB = 1ull << 10;

// Fact sheets: F = facts/trainium-and-torchneuron.md, C = facts/trainium-calibration.md.
// Host link: neither sheet gives a figure. Assumed PCIe Gen5 x16 for trn2/trn3
// (32 GT/s x 16 lanes x 128/130 encoding / 8 = 63 GB/s per direction) and PCIe Gen4 x16
// for trn1 (16 GT/s x 16 x 128/130 / 8 = 31.5 GB/s per direction).
const HardwareProfile kProfiles[] = {
    {
        "trn1", "Trainium", "NC-v2", 2,
        2,  // F §5.1: 2 x NC-v2 per chip
        1, 1,  // F §5.4: LNC applies to trn2/trn3 only
        32 * kGiB, 820 * kGB,  // F §5.1: 32 GiB, 820 GB/s (C §4.7.3: GB/s vs GiB/s; GB/s taken)
        92e12, 23e12, 92e12,   // C §4.2: NC-v2 92 TF BF16/cFP8, 23 TF FP32
        2.3e12,                // C §4.2: VectorE 2.3 TFLOPS FP32
        2.8e9, 1.12e9, 1.4e9, 1.4e9,  // C §4.1: TensorE/VectorE/ScalarE/GpSimd clocks
        128, 192 * kKiB, 16 * kKiB, 8,  // C §4.1: SBUF 128 x 192 KiB; PSUM 128 x 16 KiB, 8 banks
        16, 17 * kGB,          // C §4.5 version B / §4.7.1: 16 engines x 17 B/ns
        1300.0,                // C §4.5: ~1300 ns fixed transfer overhead
        3000.0,                // C §4.6: 3.0-4.1 us device time of a trivial NEFF; 3.0 us taken
        384 * kGB,             // F §5.1: NeuronLink-v2 384 GB/s per chip
        31.5 * kGB,            // assumed PCIe Gen4 x16 (see above)
    },
    {
        "trn2", "Trainium2", "NC-v3", 3,
        8,     // F §5.1: 8 x NC-v3 per chip
        2, 2,  // F §5.4: default LNC=2, allowed 1|2
        96 * kGiB, 2.9 * kTB,  // F §5.1: 96 GiB, 2.9 TB/s
        79e12, 20e12, 158e12,  // C §4.2 / F §5.2: NC-v3 79 TF BF16, 20 TF FP32, 158 TF FP8
        1.0e12,                // C §4.2: VectorE 1.0 TFLOPS FP32
        2.4e9, 0.96e9, 1.2e9, 1.2e9,  // C §4.1
        128, 224 * kKiB, 16 * kKiB, 8,  // C §4.1: SBUF 128 x 224 KiB; PSUM 2 MiB = 128 x 16 KiB
        16, 23 * kGB,          // C §4.5/§4.7.1: 16 engines x 23 B/ns (measured 32 KiB in 1416 ns)
        1300.0,                // C §4.5
        3000.0,                // C §4.6
        1280 * kGB,            // F §5.1: NeuronLink-v3 1.28 TB/s per chip
        63 * kGB,              // assumed PCIe Gen5 x16 (see above)
    },
    {
        "trn3", "Trainium3", "NC-v4", 4,
        8,     // F §5.1: 8 x NC-v4 per chip
        2, 2,  // F §5.4
        144 * kGiB, 4.9 * kTB,  // F §5.1: 144 GiB, 4.9 TB/s
        79e12, 20e12, 315e12,   // C §4.2: NC-v4 79 TF BF16, 20 TF FP32, 315 TF MXFP8
        1.2e12,                 // C §4.2: VectorE 1.2 TFLOPS FP32
        2.4e9, 1.2e9, 1.2e9, 1.2e9,  // C §4.1
        128, 256 * kKiB, 16 * kKiB, 8,  // C §4.1: SBUF 32 MiB = 128 x 256 KiB; PSUM 2 MiB
        16, 33 * kGB,           // C §4.5: 16 engines x 33 B/ns
        1300.0,                 // C §4.5
        3000.0,                 // C §4.6
        2560 * kGB,             // F §5.1: NeuronLink-v4 2.56 TB/s per device
        63 * kGB,               // assumed PCIe Gen5 x16 (see above)
    },
};
constexpr size_t kProfileCount = sizeof(kProfiles) / sizeof(kProfiles[0]);

void copy_string(char* dst, size_t cap, const char* src) {
  snprintf(dst, cap, "%s", src);
}

}  // namespace

const HardwareProfile* find_profile(const char* name) {
  for (const auto& p : kProfiles) {
    if (strcmp(p.name, name) == 0) return &p;
  }
  return nullptr;
}

void fill_properties(const HardwareProfile& p, int lnc, uint64_t hbm_capacity_override,
                     nsimDeviceProperties* props) {
  memset(props, 0, sizeof *props);
  const int logical_per_chip = p.physical_cores_per_chip / lnc;
  snprintf(props->name, sizeof props->name, "%s %s (LNC=%d)", p.chip_name, p.core_name, lnc);
  copy_string(props->profile, sizeof props->profile, p.name);
  props->lnc = lnc;
  props->physical_cores_per_chip = p.physical_cores_per_chip;
  props->logical_cores_per_chip = logical_per_chip;
  // HBM capacity and bandwidth are split evenly among the chip's logical cores.
  props->hbm_capacity =
      hbm_capacity_override ? hbm_capacity_override : p.hbm_bytes_per_chip / logical_per_chip;
  props->hbm_bandwidth = p.hbm_bandwidth_per_chip / logical_per_chip;
  props->host_link_bandwidth = p.host_link_bandwidth;
  props->peak_flops_bf16 = p.tensor_flops_bf16_per_core * lnc;
  props->peak_flops_fp32 = p.tensor_flops_fp32_per_core * lnc;
  props->peak_flops_fp8 = p.tensor_flops_fp8_per_core * lnc;
  props->vector_flops_fp32 = p.vector_flops_fp32_per_core * lnc;
  props->tensor_clock_hz = p.tensor_clock_hz;
  props->vector_clock_hz = p.vector_clock_hz;
  props->scalar_clock_hz = p.scalar_clock_hz;
  props->gpsimd_clock_hz = p.gpsimd_clock_hz;
  props->sbuf_partitions = p.sbuf_partitions;
  props->sbuf_bytes_per_partition = p.sbuf_bytes_per_partition;
  props->psum_bytes_per_partition = p.psum_bytes_per_partition;
  props->psum_banks = p.psum_banks;
  props->dma_engines = p.dma_engines_per_core;
  props->dma_engine_bandwidth = p.dma_engine_bandwidth;
  props->dma_fixed_overhead_ns = p.dma_fixed_overhead_ns;
  props->launch_overhead_ns = p.launch_overhead_ns;
  props->chip_link_bandwidth = p.chip_link_bandwidth;
  props->compute_capability_major = p.core_version;
  props->compute_capability_minor = 0;
}

}  // namespace nsim

extern "C" {

NSIM_API size_t nsimProfileCount(void) { return nsim::kProfileCount; }

NSIM_API const char* nsimProfileName(size_t index) {
  return index < nsim::kProfileCount ? nsim::kProfiles[index].name : nullptr;
}

NSIM_API nsimError nsimProfileGetProperties(const char* name, int lnc,
                                            nsimDeviceProperties* props) {
  if (!name || !props) {
    return nsim::set_error(NSIM_ERROR_INVALID_VALUE,
                           "nsimProfileGetProperties: name and props must not be NULL");
  }
  const nsim::HardwareProfile* p = nsim::find_profile(name);
  if (!p) {
    return nsim::set_error(NSIM_ERROR_INVALID_VALUE,
                           "nsimProfileGetProperties: unknown profile '%s' (accepted: trn1, trn2, "
                           "trn3)",
                           name);
  }
  if (lnc == 0) lnc = p->default_lnc;
  if (lnc < 1 || lnc > p->max_lnc) {
    return nsim::set_error(NSIM_ERROR_INVALID_VALUE,
                           "nsimProfileGetProperties: LNC %d is not valid for profile %s "
                           "(accepted: %s)",
                           lnc, name, p->max_lnc == 1 ? "1" : "1, 2");
  }
  nsim::fill_properties(*p, lnc, 0, props);
  props->device = 0;
  props->chip = 0;
  props->logical_core = 0;
  return NSIM_SUCCESS;
}

}  // extern "C"
