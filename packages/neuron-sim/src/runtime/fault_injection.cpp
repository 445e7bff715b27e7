#include "fault_injection.h"

#include <atomic>
#include <mutex>
#include <unordered_map>

#include "config.h"
#include "error.h"
#include "names.h"
#include "runtime.h"

namespace nsim {
namespace {

std::atomic<uint64_t> g_alloc_countdown{0};  // 0: disarmed
std::atomic<uint64_t> g_alloc_run_pending{0};  // consecutive failures after the n-th, once hit
std::atomic<uint64_t> g_alloc_run_left{0};
std::atomic<int> g_lost_device{-1};
std::atomic<uint64_t> g_lost_countdown{0};
std::atomic<bool> g_kernel_faults_armed{false};
std::mutex g_kernel_mu;
// name id -> launches left to fail (< 0: every launch)
std::unordered_map<uint32_t, int>& kernel_faults() {
  static auto* m = new std::unordered_map<uint32_t, int>();
  return *m;
}

}  // namespace

bool consume_alloc_fault() {
  uint64_t run = g_alloc_run_left.load(std::memory_order_relaxed);
  while (run != 0) {
    if (g_alloc_run_left.compare_exchange_weak(run, run - 1)) return true;
  }
  uint64_t left = g_alloc_countdown.load(std::memory_order_relaxed);
  while (left != 0) {
    if (g_alloc_countdown.compare_exchange_weak(left, left - 1)) {
      if (left != 1) return false;
      g_alloc_run_left.store(g_alloc_run_pending.exchange(0));
      return true;
    }
  }
  return false;
}

bool consume_kernel_fault(uint32_t name_id) {
  if (!g_kernel_faults_armed.load(std::memory_order_relaxed)) return false;
  std::lock_guard<std::mutex> lock(g_kernel_mu);
  auto& faults = kernel_faults();
  auto it = faults.find(name_id);
  if (it == faults.end()) return false;
  if (it->second > 0 && --it->second == 0) {
    faults.erase(it);
    if (faults.empty()) g_kernel_faults_armed.store(false);
  }
  return true;
}

bool consume_device_lost_fault(int device) {
  if (g_lost_device.load(std::memory_order_relaxed) != device) return false;
  uint64_t left = g_lost_countdown.load(std::memory_order_relaxed);
  while (left != 0) {
    if (g_lost_countdown.compare_exchange_weak(left, left - 1)) {
      if (left != 1) return false;
      g_lost_device.store(-1);
      return true;
    }
  }
  return false;
}

bool launch_fault_pending(int device, uint32_t name_id) {
  if (g_lost_device.load(std::memory_order_relaxed) == device &&
      g_lost_countdown.load(std::memory_order_relaxed) == 1) {
    return true;
  }
  if (!g_kernel_faults_armed.load(std::memory_order_relaxed)) return false;
  std::lock_guard<std::mutex> lock(g_kernel_mu);
  return kernel_faults().count(name_id) != 0;
}

void arm_faults_from_config(const Config& cfg) {
  if (cfg.fault_alloc != 0) {
    g_alloc_run_left.store(0);
    g_alloc_countdown.store(cfg.fault_alloc);
    g_alloc_run_pending.store(cfg.fault_alloc_run - 1);
  }
  if (!cfg.fault_kernels.empty()) {
    std::lock_guard<std::mutex> lock(g_kernel_mu);
    for (const auto& [name, count] : cfg.fault_kernels) kernel_faults()[intern_name(name.c_str())] = count;
    g_kernel_faults_armed.store(true);
  }
  if (cfg.fault_lost_device >= 0) {
    g_lost_countdown.store(cfg.fault_lost_after);
    g_lost_device.store(cfg.fault_lost_device);
  }
}

void clear_fault_injection() {
  g_alloc_countdown.store(0);
  g_alloc_run_left.store(0);
  g_alloc_run_pending.store(0);
  g_lost_device.store(-1);
  g_lost_countdown.store(0);
  std::lock_guard<std::mutex> lock(g_kernel_mu);
  kernel_faults().clear();
  g_kernel_faults_armed.store(false);
}

}  // namespace nsim

using namespace nsim;

extern "C" {

NSIM_API nsimError nsimFaultFailNthAlloc(uint64_t n) {
  if (!runtime_or_error("nsimFaultFailNthAlloc")) return runtime_unavailable();
  g_alloc_run_pending.store(0);
  g_alloc_run_left.store(0);
  g_alloc_countdown.store(n);
  return NSIM_SUCCESS;
}

NSIM_API nsimError nsimFaultFailKernel(const char* name, int count) {
  if (!runtime_or_error("nsimFaultFailKernel")) return runtime_unavailable();
  if (!name) return set_error(NSIM_ERROR_INVALID_VALUE, "nsimFaultFailKernel: name is NULL");
  const uint32_t id = intern_name(name);
  std::lock_guard<std::mutex> lock(g_kernel_mu);
  auto& faults = kernel_faults();
  if (count == 0) {
    faults.erase(id);  // count 0 disarms this name
  } else {
    faults[id] = count;
  }
  g_kernel_faults_armed.store(!faults.empty());
  return NSIM_SUCCESS;
}

NSIM_API nsimError nsimFaultSetDeviceLost(int device) {
  Runtime* rt = runtime_or_error("nsimFaultSetDeviceLost");
  if (!rt) return runtime_unavailable();
  Device* d = device_or_error(rt, "nsimFaultSetDeviceLost", device);
  if (!d) return NSIM_ERROR_INVALID_DEVICE;
  d->lost.store(true);
  return NSIM_SUCCESS;
}

NSIM_API nsimError nsimFaultClear(void) {
  if (!runtime_or_error("nsimFaultClear")) return runtime_unavailable();
  clear_fault_injection();
  return NSIM_SUCCESS;
}

}  // extern "C"
