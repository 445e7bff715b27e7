// Runtime hot paths, each measured against a baseline in the same run (interleaved repeats,
// median): launch recording, device malloc/free vs libc, device-to-device copy vs memcpy.
//   bench_runtime [--quick]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "neuron_sim/neuron_sim.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void ok(nsimError err, const char* what) {
  if (err != NSIM_SUCCESS) {
    fprintf(stderr, "bench_runtime: %s failed: %s: %s\n", what, nsimGetErrorName(err),
            nsimGetLastErrorMessage());
    exit(1);
  }
}

void row(const std::string& metric, const std::string& value, const std::string& baseline,
         const std::string& ratio, const std::string& target, const char* result) {
  printf("%-30s %-16s %-18s %-9s %-10s %s\n", metric.c_str(), value.c_str(), baseline.c_str(),
         ratio.c_str(), target.c_str(), result);
}

std::string fmt(const char* f, double v) {
  char buf[64];
  snprintf(buf, sizeof buf, f, v);
  return buf;
}

int g_misses = 0;
const char* verdict(bool pass) {
  g_misses += !pass;
  return pass ? "PASS" : "MISS";
}

// Launch recording: the record-only path that every op of the backend takes.
void bench_launch(int repeats, int calls) {
  nsimQueue q;
  ok(nsimQueueGetDefault(0, &q), "nsimQueueGetDefault");
  uint32_t name = 0;
  ok(nsimRegisterName("bench_kernel", &name), "nsimRegisterName");
  std::vector<double> ns;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = Clock::now();
    for (int i = 0; i < calls; ++i) {
      ok(nsimLaunch(q, name, NSIM_LAUNCH_KERNEL, 1.0, nullptr, nullptr), "nsimLaunch");
    }
    ns.push_back(seconds_since(t0) * 1e9 / calls);
  }
  const double m = median(ns);
  row("launch record (fn=NULL)", fmt("%.1f ns/call", m), "-", "-", "<= 300 ns", verdict(m <= 300));
}

// Device malloc+free pairs vs libc malloc+free of the same size, interleaved.
void bench_malloc(int repeats, int pairs, size_t size) {
  std::vector<double> dev_ns, libc_ns;
  for (int r = 0; r < repeats; ++r) {
    auto t0 = Clock::now();
    for (int i = 0; i < pairs; ++i) {
      void* p = nullptr;
      ok(nsimMalloc(0, size, &p), "nsimMalloc");
      ok(nsimFree(p), "nsimFree");
    }
    dev_ns.push_back(seconds_since(t0) * 1e9 / pairs);
    t0 = Clock::now();
    for (int i = 0; i < pairs; ++i) {
      void* p = malloc(size);
      asm volatile("" : : "r"(p) : "memory");  // keep the pair from being optimised out
      free(p);
    }
    libc_ns.push_back(seconds_since(t0) * 1e9 / pairs);
  }
  const double d = median(dev_ns), l = median(libc_ns);
  const std::string label = "malloc+free " + std::to_string(size >> 10) + " KiB";
  row(label, fmt("%.1f ns/pair", d), fmt("libc %.1f ns", l), fmt("%.2fx", d / l), "(info)", "-");
}

// Device-to-device copy vs plain memcpy between the same alias buffers, interleaved.
void bench_copy(int repeats, size_t max_size) {
  void *src = nullptr, *dst = nullptr;
  ok(nsimMalloc(0, max_size, &src), "nsimMalloc");
  ok(nsimMalloc(0, max_size, &dst), "nsimMalloc");
  void *src_h = nullptr, *dst_h = nullptr;
  ok(nsimDeviceToHost(src, max_size, &src_h), "nsimDeviceToHost");
  ok(nsimDeviceToHost(dst, max_size, &dst_h), "nsimDeviceToHost");
  // Touch every page first so neither side pays the first-touch faults.
  memset(src_h, 1, max_size);
  memset(dst_h, 2, max_size);
  for (size_t size = 1u << 20; size <= max_size; size *= 4) {
    // Enough copies per sample for ~64 MiB of traffic, so small sizes are measurable.
    const int iters = static_cast<int>(std::max<size_t>(1, (64u << 20) / size));
    std::vector<double> ratio;
    for (int r = 0; r < repeats; ++r) {
      double t_dev = 0, t_ref = 0;
      for (int order = 0; order < 2; ++order) {
        const bool dev_first = (r + order) % 2 == 0;
        const auto t0 = Clock::now();
        for (int i = 0; i < iters; ++i) {
          if (dev_first) {
            ok(nsimMemcpy(dst, src, size, NSIM_MEMCPY_DEVICE_TO_DEVICE), "nsimMemcpy");
          } else {
            memcpy(dst_h, src_h, size);
            asm volatile("" : : "r"(dst_h) : "memory");
          }
        }
        (dev_first ? t_dev : t_ref) += seconds_since(t0);
      }
      ratio.push_back(t_ref / t_dev);  // bandwidth ratio = inverse time ratio
    }
    const double m = median(ratio);
    row("D2D copy " + std::to_string(size >> 20) + " MiB", fmt("%.3f x memcpy", m),
        "memcpy (aliases)", fmt("%.3f", m), ">= 0.90", verdict(m >= 0.9));
  }
  ok(nsimFree(src), "nsimFree");
  ok(nsimFree(dst), "nsimFree");
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
  ok(nsimInit(), "nsimInit");
  nsimDeviceProperties p;
  ok(nsimGetDeviceProperties(0, &p), "nsimGetDeviceProperties");
  const int repeats = quick ? 3 : 7;
  printf("neuron_sim runtime benchmark: profile %s, device 0, median of %d interleaved repeats%s\n",
         p.profile, repeats, quick ? " (--quick)" : "");
  row("metric", "value", "baseline", "ratio", "target", "result");
  bench_launch(repeats, quick ? 100000 : 1000000);
  bench_malloc(repeats, quick ? 20000 : 200000, 4096);
  bench_malloc(repeats, quick ? 2000 : 20000, 1u << 20);
  bench_copy(repeats, quick ? (16u << 20) : (256u << 20));
  ok(nsimShutdown(), "nsimShutdown");
  printf("%d target(s) missed\n", g_misses);
  return 0;
}
