// The process-wide runtime: configuration, devices, queues and events. One instance exists
// between nsimInit and nsimShutdown; calls racing with nsimShutdown are not supported.
#ifndef NEURON_SIM_RUNTIME_RUNTIME_H
#define NEURON_SIM_RUNTIME_RUNTIME_H

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "address_space.h"
#include "config.h"
#include "device_allocator.h"
#include "neuron_sim/neuron_sim.h"
#include "timeline.h"

struct nsimQueue_st;
struct nsimEvent_st;

namespace nsim {

struct Device;

struct DeviceCounters {
  std::atomic<uint64_t> live_allocations{0}, bytes_in_use{0}, peak_bytes_in_use{0};
  std::atomic<uint64_t> total_allocations{0}, total_frees{0}, failed_allocations{0};
  std::atomic<uint64_t> memcpy_h2d{0}, memcpy_d2h{0}, memcpy_d2d{0};
  std::atomic<uint64_t> bytes_h2d{0}, bytes_d2h{0}, bytes_d2d{0};
  std::atomic<uint64_t> memsets{0}, launches{0}, live_queues{0}, live_events{0};
};

// Simulated state is guarded by the owning device's mutex.
struct Queue {
  Device* device;
  int priority;
  uint64_t id;
  bool is_default;
  double tail_ns = 0;   // end of the last operation placed on the queue
  double floor_ns = 0;  // later work starts no earlier than this (events waited on)
};

struct Event {
  Device* device;
  unsigned flags;
  bool recorded = false;
  double time_ns = 0;
};

struct Device {
  int index = 0;
  nsimDeviceProperties props{};
  std::unique_ptr<DeviceAllocator> allocator;
  std::mutex mu;  // queue tails/floors, event times, timeline, end_ns
  double end_ns = 0;  // latest end over every queue of the device, destroyed ones included
  uint64_t sequence = 0;  // records placed so far (timeline order)
  Timeline timeline;
  DeviceCounters counters;
  std::atomic<bool> lost{false};
  std::shared_ptr<Queue> default_queue;
};

// Live queue and event handles. Destroyed handles are remembered so their reuse is reported
// as use-after-destroy rather than as an unknown handle.
struct HandleRegistry {
  std::shared_mutex mu;
  std::unordered_map<const void*, std::shared_ptr<Queue>> queues;
  std::unordered_map<const void*, std::shared_ptr<Event>> events;
  std::unordered_set<const void*> destroyed_queues, destroyed_events;
  std::atomic<uint64_t> next_queue_id{0};
};

struct Runtime {
  Config config;
  AddressSpace space;
  std::vector<std::unique_ptr<Device>> devices;
  HandleRegistry handles;
  std::atomic<bool> timeline_enabled{true};
  uint32_t name_h2d = 0, name_d2h = 0, name_d2d = 0, name_memset = 0;
};

extern std::atomic<Runtime*> g_runtime;
// Set in a child forked after nsimInit; see nsimIsForkedChild.
extern std::atomic<bool> g_forked_child;

// Each helper sets the thread's last error (naming `call`) and returns null on failure.
Runtime* runtime_or_error(const char* call);
// The code of runtime_or_error's failure: NSIM_ERROR_FORKED_CHILD or NSIM_ERROR_NOT_INITIALIZED.
nsimError runtime_unavailable();
Device* device_or_error(Runtime* rt, const char* call, int device);
// NSIM_ERROR_DEVICE_LOST with a message when the device is marked lost, else success.
nsimError check_device(const Device* d, const char* call);
std::shared_ptr<Queue> queue_or_error(Runtime* rt, const char* call, nsimQueue_st* handle);
std::shared_ptr<Event> event_or_error(Runtime* rt, const char* call, nsimEvent_st* handle);

// Places an operation of `duration_ns` on the queue's simulated timeline; returns its end.
// Places [start, start + duration_ns) on the queue; `cost` (may be null) and `model` go on
// the timeline record with the calling thread's correlation id.
double place_on_queue(Runtime* rt, Queue* q, uint32_t name_id, nsimLaunchKind kind,
                      double duration_ns, uint64_t bytes, nsimCostModel model = NSIM_MODEL_UNSPECIFIED,
                      const nsimLaunchCost* cost = nullptr);
// Innermost nsimCorrelationPush id of the calling thread (0 when none).
uint64_t current_correlation_id();

}  // namespace nsim

#endif
