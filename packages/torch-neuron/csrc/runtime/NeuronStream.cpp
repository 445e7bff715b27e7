#include "runtime/NeuronStream.h"

#include "runtime/NeuronRuntime.h"

#include <array>
#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

namespace torch_neuron {
namespace {

constexpr int kPoolSize = 8;  // pooled queues per priority and device, handed out round-robin

struct DeviceQueues {
  std::mutex mutex;
  // deque: element addresses stay valid while others are appended.
  std::deque<nsimQueue> queues;
  std::deque<int> priorities;
  std::array<std::vector<c10::StreamId>, 2> pool;  // [low, high]
  std::array<std::atomic<uint32_t>, 2> next{};
};

std::vector<std::unique_ptr<DeviceQueues>>& tables() {
  static std::vector<std::unique_ptr<DeviceQueues>> t = [] {
    std::vector<std::unique_ptr<DeviceQueues>> v;
    const int n = device_count();
    for (int i = 0; i < n; ++i) {
      auto d = std::make_unique<DeviceQueues>();
      nsimQueue q = nullptr;
      NEURON_CHECK(nsimQueueGetDefault(i, &q));
      d->queues.push_back(q);
      d->priorities.push_back(0);
      v.push_back(std::move(d));
    }
    return v;
  }();
  return t;
}

DeviceQueues& table(c10::DeviceIndex device) {
  check_device_index(device);
  return *tables()[device];
}

// Current stream id per device for this thread (0 = default queue).
thread_local std::vector<c10::StreamId> t_current;

c10::StreamId& current_id(c10::DeviceIndex device) {
  if (C10_UNLIKELY(static_cast<size_t>(device) >= t_current.size())) {
    t_current.resize(device_count(), 0);
  }
  return t_current[device];
}

c10::StreamId add_queue(DeviceQueues& d, c10::DeviceIndex device, int priority) {
  nsimQueue q = nullptr;
  NEURON_CHECK(nsimQueueCreate(device, priority, &q));
  std::lock_guard<std::mutex> lock(d.mutex);
  d.queues.push_back(q);
  d.priorities.push_back(priority);
  return static_cast<c10::StreamId>(d.queues.size() - 1);
}

}  // namespace

nsimQueue queue_of(const c10::Stream& stream) {
  auto& d = table(stream.device_index());
  std::lock_guard<std::mutex> lock(d.mutex);
  const auto id = stream.id();
  TORCH_CHECK(id >= 0 && static_cast<size_t>(id) < d.queues.size(), "neuron: stream id ", id,
              " does not exist on ", stream.device());
  return d.queues[id];
}

c10::Stream default_stream(c10::DeviceIndex device) {
  check_device_index(device);
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, device), 0);
}

c10::Stream current_stream(c10::DeviceIndex device) {
  check_device_index(device);
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, device),
                     current_id(device));
}

nsimQueue current_queue(c10::DeviceIndex device) {
  auto& d = *tables()[device];
  const auto id = current_id(device);
  if (id == 0) {
    return d.queues[0];  // the default queue never moves
  }
  std::lock_guard<std::mutex> lock(d.mutex);
  return d.queues[id];
}

c10::Stream exchange_stream(const c10::Stream& stream) {
  auto prev = current_stream(stream.device_index());
  queue_of(stream);  // validates the id
  current_id(stream.device_index()) = stream.id();
  return prev;
}

c10::Stream new_stream(c10::DeviceIndex device, int priority) {
  auto& d = table(device);
  int least = 0, greatest = 0;
  NEURON_CHECK(nsimQueueGetPriorityRange(&least, &greatest));
  priority = std::max(greatest, std::min(least, priority));
  const auto id = add_queue(d, device, priority);
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, device), id);
}

c10::Stream stream_from_pool(c10::DeviceIndex device, bool high_priority) {
  auto& d = table(device);
  const int which = high_priority ? 1 : 0;
  {
    std::lock_guard<std::mutex> lock(d.mutex);
    if (d.pool[which].empty()) {
      int least = 0, greatest = 0;
      NEURON_CHECK(nsimQueueGetPriorityRange(&least, &greatest));
      for (int i = 0; i < kPoolSize; ++i) {
        nsimQueue q = nullptr;
        NEURON_CHECK(nsimQueueCreate(device, high_priority ? greatest : least, &q));
        d.queues.push_back(q);
        d.priorities.push_back(high_priority ? greatest : least);
        d.pool[which].push_back(static_cast<c10::StreamId>(d.queues.size() - 1));
      }
    }
  }
  const auto k = d.next[which].fetch_add(1) % kPoolSize;
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::PrivateUse1, device),
                     d.pool[which][k]);
}

int stream_priority(const c10::Stream& stream) {
  auto& d = table(stream.device_index());
  std::lock_guard<std::mutex> lock(d.mutex);
  return d.priorities.at(stream.id());
}

}  // namespace torch_neuron
