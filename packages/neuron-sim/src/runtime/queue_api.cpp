// Queues: handles validated against the registry; simulated tails guarded by the device mutex.
#include <algorithm>

#include "error.h"
#include "runtime.h"

using namespace nsim;

namespace {
constexpr int kLeastPriority = 0;
constexpr int kGreatestPriority = -1;
}  // namespace

extern "C" {

NSIM_API nsimError nsimQueueGetPriorityRange(int* least, int* greatest) {
  if (!runtime_or_error("nsimQueueGetPriorityRange")) return runtime_unavailable();
  if (!least || !greatest) {
    return set_error(NSIM_ERROR_INVALID_VALUE, "nsimQueueGetPriorityRange: output pointers are NULL");
  }
  *least = kLeastPriority;
  *greatest = kGreatestPriority;
  return NSIM_SUCCESS;
}

NSIM_API nsimError nsimQueueCreate(int device, int priority, nsimQueue* queue) {
  Runtime* rt = runtime_or_error("nsimQueueCreate");
  if (!rt) return runtime_unavailable();
  Device* d = device_or_error(rt, "nsimQueueCreate", device);
  if (!d) return NSIM_ERROR_INVALID_DEVICE;
  nsimError err = check_device(d, "nsimQueueCreate");
  if (err != NSIM_SUCCESS) return err;
  if (!queue) return set_error(NSIM_ERROR_INVALID_VALUE, "nsimQueueCreate: queue is NULL");
  auto q = std::make_shared<Queue>();
  q->device = d;
  // As in CUDA, a priority outside [greatest, least] is clamped into it, not rejected.
  q->priority = std::min(kLeastPriority, std::max(kGreatestPriority, priority));
  q->id = rt->handles.next_queue_id.fetch_add(1);
  q->is_default = false;
  {
    // A new queue starts at the device's current time, not at zero.
    std::lock_guard<std::mutex> lock(d->mu);
    q->tail_ns = d->end_ns;
  }
  {
    std::unique_lock<std::shared_mutex> lock(rt->handles.mu);
    rt->handles.destroyed_queues.erase(q.get());
    rt->handles.queues.emplace(q.get(), q);
  }
  d->counters.live_queues.fetch_add(1);
  *queue = reinterpret_cast<nsimQueue>(q.get());
  return NSIM_SUCCESS;
}

NSIM_API nsimError nsimQueueDestroy(nsimQueue queue) {
  Runtime* rt = runtime_or_error("nsimQueueDestroy");
  if (!rt) return runtime_unavailable();
  std::shared_ptr<Queue> q = queue_or_error(rt, "nsimQueueDestroy", queue);
  if (!q) return NSIM_ERROR_INVALID_QUEUE;
  if (q->is_default) {
    return set_error(NSIM_ERROR_INVALID_QUEUE,
                     "nsimQueueDestroy: %p is the default queue of neuron device %d, which the "
                     "runtime owns; it cannot be destroyed",
                     static_cast<void*>(queue), q->device->index);
  }
  {
    std::unique_lock<std::shared_mutex> lock(rt->handles.mu);
    if (rt->handles.queues.erase(queue) == 0) {
      return set_error(NSIM_ERROR_INVALID_QUEUE, "nsimQueueDestroy: queue %p was destroyed",
                       static_cast<void*>(queue));
    }
    rt->handles.destroyed_queues.insert(queue);
  }
  q->device->counters.live_queues.fetch_sub(1);
  return NSIM_SUCCESS;
}

NSIM_API nsimError nsimQueueGetDefault(int device, nsimQueue* queue) {
  Runtime* rt = runtime_or_error("nsimQueueGetDefault");
  if (!rt) return runtime_unavailable();
  Device* d = device_or_error(rt, "nsimQueueGetDefault", device);
  if (!d) return NSIM_ERROR_INVALID_DEVICE;
  if (!queue) return set_error(NSIM_ERROR_INVALID_VALUE, "nsimQueueGetDefault: queue is NULL");
  *queue = reinterpret_cast<nsimQueue>(d->default_queue.get());
  return NSIM_SUCCESS;
}

NSIM_API nsimError nsimQueueGetInfo(nsimQueue queue, int* device, int* priority, uint64_t* id) {
  Runtime* rt = runtime_or_error("nsimQueueGetInfo");
  if (!rt) return runtime_unavailable();
  std::shared_ptr<Queue> q = queue_or_error(rt, "nsimQueueGetInfo", queue);
  if (!q) return NSIM_ERROR_INVALID_QUEUE;
  if (device) *device = q->device->index;
  if (priority) *priority = q->priority;
  if (id) *id = q->id;
  return NSIM_SUCCESS;
}

NSIM_API nsimError nsimQueueGetTime(nsimQueue queue, double* time_ns) {
  Runtime* rt = runtime_or_error("nsimQueueGetTime");
  if (!rt) return runtime_unavailable();
  std::shared_ptr<Queue> q = queue_or_error(rt, "nsimQueueGetTime", queue);
  if (!q) return NSIM_ERROR_INVALID_QUEUE;
  if (!time_ns) return set_error(NSIM_ERROR_INVALID_VALUE, "nsimQueueGetTime: time_ns is NULL");
  std::lock_guard<std::mutex> lock(q->device->mu);
  *time_ns = q->tail_ns;
  return NSIM_SUCCESS;
}

// Work executes synchronously, so a valid queue on a live device is always idle.
NSIM_API nsimError nsimQueueSynchronize(nsimQueue queue) {
  Runtime* rt = runtime_or_error("nsimQueueSynchronize");
  if (!rt) return runtime_unavailable();
  std::shared_ptr<Queue> q = queue_or_error(rt, "nsimQueueSynchronize", queue);
  if (!q) return NSIM_ERROR_INVALID_QUEUE;
  return check_device(q->device, "nsimQueueSynchronize");
}

NSIM_API nsimError nsimQueueQuery(nsimQueue queue) {
  Runtime* rt = runtime_or_error("nsimQueueQuery");
  if (!rt) return runtime_unavailable();
  std::shared_ptr<Queue> q = queue_or_error(rt, "nsimQueueQuery", queue);
  if (!q) return NSIM_ERROR_INVALID_QUEUE;
  return check_device(q->device, "nsimQueueQuery");
}

NSIM_API nsimError nsimQueueWaitEvent(nsimQueue queue, struct nsimEvent_st* event) {
  Runtime* rt = runtime_or_error("nsimQueueWaitEvent");
  if (!rt) return runtime_unavailable();
  std::shared_ptr<Queue> q = queue_or_error(rt, "nsimQueueWaitEvent", queue);
  if (!q) return NSIM_ERROR_INVALID_QUEUE;
  std::shared_ptr<Event> e = event_or_error(rt, "nsimQueueWaitEvent", event);
  if (!e) return NSIM_ERROR_INVALID_EVENT;
  nsimError err = check_device(q->device, "nsimQueueWaitEvent");
  if (err != NSIM_SUCCESS) return err;
  double t = 0;
  bool recorded = false;
  {
    std::lock_guard<std::mutex> lock(e->device->mu);
    recorded = e->recorded;
    t = e->time_ns;
  }
  // Waiting on a never-recorded event is a no-op, as in CUDA.
  if (!recorded) return NSIM_SUCCESS;
  std::lock_guard<std::mutex> lock(q->device->mu);
  q->floor_ns = std::max(q->floor_ns, t);
  return NSIM_SUCCESS;
}

NSIM_API nsimError nsimDeviceSynchronize(int device) {
  Runtime* rt = runtime_or_error("nsimDeviceSynchronize");
  if (!rt) return runtime_unavailable();
  Device* d = device_or_error(rt, "nsimDeviceSynchronize", device);
  if (!d) return NSIM_ERROR_INVALID_DEVICE;
  return check_device(d, "nsimDeviceSynchronize");
}

NSIM_API nsimError nsimDeviceGetTime(int device, double* time_ns) {
  Runtime* rt = runtime_or_error("nsimDeviceGetTime");
  if (!rt) return runtime_unavailable();
  Device* d = device_or_error(rt, "nsimDeviceGetTime", device);
  if (!d) return NSIM_ERROR_INVALID_DEVICE;
  if (!time_ns) return set_error(NSIM_ERROR_INVALID_VALUE, "nsimDeviceGetTime: time_ns is NULL");
  std::lock_guard<std::mutex> lock(d->mu);
  *time_ns = d->end_ns;
  return NSIM_SUCCESS;
}

}  // extern "C"
