#include "runtime/Valueless.h"

#include <mutex>
#include <unordered_map>

namespace torch_neuron::valueless {

std::atomic<size_t> g_live{0};

namespace {

struct Entry {
  std::optional<c10::Scalar> fill;
};

std::mutex g_mutex;
std::unordered_map<const void*, Entry>& table() {
  static auto* t = new std::unordered_map<const void*, Entry>();
  return *t;
}

const void* key_of(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage()) return nullptr;
  return t.storage().data_ptr().get();
}

}  // namespace

bool contains(const at::Tensor& t) {
  if (!any()) return false;
  const void* k = key_of(t);
  if (!k) return false;
  std::lock_guard<std::mutex> lock(g_mutex);
  return table().count(k) != 0;
}

std::optional<c10::Scalar> fill_of(const at::Tensor& t) {
  if (!any()) return std::nullopt;
  const void* k = key_of(t);
  if (!k) return std::nullopt;
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = table().find(k);
  if (it == table().end()) return std::nullopt;
  return it->second.fill.value_or(c10::Scalar(0));
}

void mark(const at::Tensor& t, std::optional<c10::Scalar> fill) {
  const void* k = key_of(t);
  if (!k) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  table()[k] = Entry{fill};
  g_live.store(table().size(), std::memory_order_relaxed);
}

void write_values(const at::Tensor& t) {
  if (!any()) return;
  const void* k = key_of(t);
  if (!k) return;
  const size_t covered = static_cast<size_t>(t.numel()) * t.element_size();
  if (t.storage_offset() != 0 || !t.is_non_overlapping_and_dense() || covered < t.storage().nbytes()) return;
  forget(k);
}

void forget(const void* device_ptr) {
  if (!device_ptr || !any()) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  table().erase(device_ptr);
  g_live.store(table().size(), std::memory_order_relaxed);
}

bool moved(const void* from, const void* to) {
  if (!from || !to || from == to || !any()) return false;
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = table().find(from);
  if (it == table().end()) return false;
  Entry e = it->second;
  table().erase(it);
  table()[to] = e;
  g_live.store(table().size(), std::memory_order_relaxed);
  return true;
}

size_t count() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return table().size();
}

}  // namespace torch_neuron::valueless
