#include "runtime/SanitizerLog.h"

#include <mutex>

namespace torch_neuron {

std::atomic<bool> g_sanitizer_on{false};

namespace {
std::mutex g_mutex;
std::vector<SanitizerEvent> g_log;
}  // namespace

void set_sanitizing(bool on) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_sanitizer_on.store(on);
  if (!on) g_log.clear();
}

void sanitizer_log(SanitizerEvent ev) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_sanitizer_on.load(std::memory_order_relaxed)) g_log.push_back(std::move(ev));
}

std::vector<SanitizerEvent> sanitizer_drain() {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<SanitizerEvent> out;
  out.swap(g_log);
  return out;
}

}  // namespace torch_neuron
