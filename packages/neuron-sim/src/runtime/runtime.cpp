#include "runtime.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "error.h"
#include "fault_handler.h"
#include "fault_injection.h"
#include "host_memory.h"
#include "names.h"

namespace nsim {

std::atomic<Runtime*> g_runtime{nullptr};
std::atomic<bool> g_forked_child{false};

namespace {

// Process that initialised the live runtime (named in the forked child's errors).
pid_t g_init_pid = 0;

void mark_forked_child() {
  if (g_runtime.load(std::memory_order_relaxed)) g_forked_child.store(true, std::memory_order_relaxed);
}

std::mutex g_init_mu;
// First failing nsimInit's result, returned by later calls until nsimShutdown.
nsimError g_init_error = NSIM_SUCCESS;
std::string g_init_message;

nsimError build_runtime(Runtime* rt, std::string* error) {
  if (!load_config(&rt->config, error)) return NSIM_ERROR_CONFIG;
  const Config& cfg = rt->config;
  const HardwareProfile& prof = *cfg.profile;
  const int logical_per_chip = prof.physical_cores_per_chip / cfg.lnc;
  const int n = static_cast<int>(cfg.visible_cores.size());
  nsimDeviceProperties props;
  fill_properties(prof, cfg.lnc, cfg.hbm_capacity_override, &props);
  if (!rt->space.create(n, props.hbm_capacity, error)) {
    *error = "could not reserve device memory (" + *error + ") for " + std::to_string(n) +
             " devices of " + format_bytes(props.hbm_capacity) +
             "; lower NEURON_SIM_HBM_CAPACITY or NEURON_SIM_NUM_CHIPS";
    return NSIM_ERROR_OUT_OF_MEMORY;
  }
  rt->timeline_enabled.store(cfg.timeline_enabled);
  for (int i = 0; i < n; ++i) {
    auto d = std::make_unique<Device>();
    d->index = i;
    d->props = props;
    d->props.device = i;
    d->props.logical_core = cfg.visible_cores[i];
    d->props.chip = cfg.visible_cores[i] / logical_per_chip;
    d->allocator = std::make_unique<DeviceAllocator>(props.hbm_capacity);
    if (!d->timeline.allocate(cfg.timeline_capacity)) {
      *error = "could not reserve the timeline of device " + std::to_string(i) + " (" +
               std::to_string(cfg.timeline_capacity) +
               " records); lower NEURON_SIM_TIMELINE_CAPACITY";
      return NSIM_ERROR_OUT_OF_MEMORY;
    }
    auto q = std::make_shared<Queue>();
    q->device = d.get();
    q->priority = 0;
    q->id = rt->handles.next_queue_id++;
    q->is_default = true;
    d->default_queue = q;
    rt->handles.queues.emplace(q.get(), q);
    rt->devices.push_back(std::move(d));
  }
  rt->name_h2d = intern_name("memcpy_h2d");
  rt->name_d2h = intern_name("memcpy_d2h");
  rt->name_d2d = intern_name("memcpy_d2d");
  rt->name_memset = intern_name("memset");
  return NSIM_SUCCESS;
}

}  // namespace

Runtime* runtime_or_error(const char* call) {
  if (__builtin_expect(!!(g_forked_child.load(std::memory_order_relaxed)), 0)) {
    set_error(NSIM_ERROR_FORKED_CHILD,
              "%s: this process (pid %d) was forked from process %d after that process had "
              "initialised the neuron_sim runtime. Device memory is shared with the parent, so "
              "the child must not use it: start child processes that use the device with the "
              "'spawn' or 'forkserver' start method, or call nsimShutdown and then nsimInit in "
              "the child for a private runtime",
              call, static_cast<int>(getpid()), static_cast<int>(g_init_pid));
    return nullptr;
  }
  Runtime* rt = g_runtime.load(std::memory_order_acquire);
  if (!rt) {
    set_error(NSIM_ERROR_NOT_INITIALIZED, "%s: the runtime is not initialised; call nsimInit first",
              call);
  }
  return rt;
}

nsimError runtime_unavailable() {
  return g_forked_child.load(std::memory_order_relaxed) ? NSIM_ERROR_FORKED_CHILD
                                                        : NSIM_ERROR_NOT_INITIALIZED;
}

Device* device_or_error(Runtime* rt, const char* call, int device) {
  const int n = static_cast<int>(rt->devices.size());
  if (device < 0 || device >= n) {
    set_error(NSIM_ERROR_INVALID_DEVICE,
              "%s: invalid neuron device %d: %d device(s) visible (0..%d); NEURON_RT_VISIBLE_CORES "
              "and NEURON_SIM_NUM_CHIPS select them",
              call, device, n, n - 1);
    return nullptr;
  }
  return rt->devices[device].get();
}

nsimError check_device(const Device* d, const char* call) {
  if (d->lost.load(std::memory_order_relaxed)) {
    return set_error(NSIM_ERROR_DEVICE_LOST,
                     "%s: neuron device %d is lost (nsimFaultSetDeviceLost or "
                     "NEURON_SIM_FAULT_DEVICE_LOST); every call on it "
                     "fails until nsimShutdown",
                     call, d->index);
  }
  return NSIM_SUCCESS;
}

std::shared_ptr<Queue> queue_or_error(Runtime* rt, const char* call, nsimQueue_st* handle) {
  HandleRegistry& h = rt->handles;
  std::shared_lock<std::shared_mutex> lock(h.mu);
  auto it = h.queues.find(handle);
  if (it != h.queues.end()) return it->second;
  if (!handle) {
    set_error(NSIM_ERROR_INVALID_QUEUE,
              "%s: queue is NULL; use nsimQueueGetDefault(device, &queue) for the default queue",
              call);
  } else if (h.destroyed_queues.count(handle)) {
    set_error(NSIM_ERROR_INVALID_QUEUE, "%s: queue %p was destroyed (nsimQueueDestroy)", call,
              static_cast<void*>(handle));
  } else {
    set_error(NSIM_ERROR_INVALID_QUEUE, "%s: %p is not a queue created by nsimQueueCreate", call,
              static_cast<void*>(handle));
  }
  return nullptr;
}

std::shared_ptr<Event> event_or_error(Runtime* rt, const char* call, nsimEvent_st* handle) {
  HandleRegistry& h = rt->handles;
  std::shared_lock<std::shared_mutex> lock(h.mu);
  auto it = h.events.find(handle);
  if (it != h.events.end()) return it->second;
  if (h.destroyed_events.count(handle)) {
    set_error(NSIM_ERROR_INVALID_EVENT, "%s: event %p was destroyed (nsimEventDestroy)", call,
              static_cast<void*>(handle));
  } else {
    set_error(NSIM_ERROR_INVALID_EVENT, "%s: %p is not an event created by nsimEventCreate", call,
              static_cast<void*>(handle));
  }
  return nullptr;
}

double place_on_queue(Runtime* rt, Queue* q, uint32_t name_id, nsimLaunchKind kind,
                      double duration_ns, uint64_t bytes, nsimCostModel model,
                      const nsimLaunchCost* cost) {
  Device* d = q->device;
  const bool record = rt->timeline_enabled.load(std::memory_order_relaxed);
  nsimTimelineRecord r{};
  if (record) {
    r.name_id = name_id;
    r.kind = static_cast<uint32_t>(kind);
    r.device = d->index;
    r.queue_id = q->id;
    r.bytes = bytes;
    r.model = static_cast<uint32_t>(model);
    r.dtype_class = NSIM_DTYPE_NONE;
    if (cost) {
      r.dtype_class = cost->dtype_class;
      r.flops = cost->flops;
      r.bytes_read = cost->bytes_read;
      r.bytes_written = cost->bytes_written;
      r.detail_id = cost->detail_id;
      if (model == NSIM_MODEL_KERNEL_SCHEDULE) {
        for (int e = 0; e < NSIM_ENGINE_COUNT; ++e) r.engine_busy_ns[e] = cost->engine_busy_ns[e];
      }
    } else if (bytes) {
      r.bytes_written = static_cast<double>(bytes);
      r.bytes_read = kind == NSIM_LAUNCH_MEMSET ? 0.0 : r.bytes_written;
    }
    r.correlation_id = current_correlation_id();
    // Host wall clock, the clock torch.profiler's CPU events use: the profiler anchors
    // device time to it so that no launch appears before the host op that issued it.
    r.host_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  }
  std::lock_guard<std::mutex> lock(d->mu);
  const double start = std::max(q->tail_ns, q->floor_ns);
  const double end = start + duration_ns;
  q->tail_ns = end;
  if (end > d->end_ns) d->end_ns = end;
  if (record) {
    r.start_ns = start;
    r.end_ns = end;
    r.sequence = ++d->sequence;
    d->timeline.push(r);
  }
  return end;
}

namespace {
thread_local std::vector<uint64_t> t_correlation;
}  // namespace

uint64_t current_correlation_id() { return t_correlation.empty() ? 0 : t_correlation.back(); }

}  // namespace nsim

using namespace nsim;

extern "C" {

NSIM_API nsimError nsimCorrelationPush(uint64_t id) {
  t_correlation.push_back(id);
  return NSIM_SUCCESS;
}

NSIM_API nsimError nsimCorrelationPop(void) {
  if (t_correlation.empty()) {
    return set_error(NSIM_ERROR_INVALID_VALUE,
                     "nsimCorrelationPop: no correlation id is pushed on this thread (every pop "
                     "needs an earlier nsimCorrelationPush on the same thread)");
  }
  t_correlation.pop_back();
  return NSIM_SUCCESS;
}

NSIM_API nsimError nsimInit(void) {
  std::lock_guard<std::mutex> lock(g_init_mu);
  if (g_forked_child.load()) {
    runtime_or_error("nsimInit");
    return NSIM_ERROR_FORKED_CHILD;
  }
  if (g_runtime.load()) return NSIM_SUCCESS;
  if (g_init_error != NSIM_SUCCESS) {
    return set_error(g_init_error, "%s", g_init_message.c_str());
  }
  auto rt = std::make_unique<Runtime>();
  std::string error;
  nsimError err = build_runtime(rt.get(), &error);
  if (err != NSIM_SUCCESS) {
    g_init_error = err;
    g_init_message = "nsimInit: " + error + " (call nsimShutdown before retrying nsimInit)";
    rt->space.destroy();
    return set_error(err, "%s", g_init_message.c_str());
  }
  Runtime* live = rt.release();
  g_runtime.store(live, std::memory_order_release);
  arm_faults_from_config(live->config);
  g_init_pid = getpid();
  static const bool fork_handler = [] {
    pthread_atfork(nullptr, nullptr, &mark_forked_child);
    return true;
  }();
  (void)fork_handler;
  install_fault_handler();
  return NSIM_SUCCESS;
}

NSIM_API nsimError nsimShutdown(void) {
  std::lock_guard<std::mutex> lock(g_init_mu);
  g_init_error = NSIM_SUCCESS;
  g_init_message.clear();
  Runtime* rt = g_runtime.exchange(nullptr);
  if (!rt) return NSIM_SUCCESS;
  uninstall_fault_handler();
  // In a forked child this unmaps the parent's device memory from the child only (munmap and
  // close; no page is released), after which the child may initialise a runtime of its own.
  rt->space.destroy();
  g_forked_child.store(false);
  delete rt;
  release_all_host_memory();
  clear_fault_injection();
  return NSIM_SUCCESS;
}

NSIM_API int nsimIsInitialized(void) { return g_runtime.load() != nullptr; }

NSIM_API int nsimIsForkedChild(void) { return g_forked_child.load() ? 1 : 0; }

NSIM_API nsimError nsimGetDeviceCount(int* count) {
  Runtime* rt = runtime_or_error("nsimGetDeviceCount");
  if (!rt) return runtime_unavailable();
  if (!count) return set_error(NSIM_ERROR_INVALID_VALUE, "nsimGetDeviceCount: count is NULL");
  *count = static_cast<int>(rt->devices.size());
  return NSIM_SUCCESS;
}

NSIM_API nsimError nsimGetDeviceProperties(int device, nsimDeviceProperties* props) {
  Runtime* rt = runtime_or_error("nsimGetDeviceProperties");
  if (!rt) return runtime_unavailable();
  Device* d = device_or_error(rt, "nsimGetDeviceProperties", device);
  if (!d) return NSIM_ERROR_INVALID_DEVICE;
  if (!props) return set_error(NSIM_ERROR_INVALID_VALUE, "nsimGetDeviceProperties: props is NULL");
  *props = d->props;
  return NSIM_SUCCESS;
}

}  // extern "C"
