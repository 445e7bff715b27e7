// Events capture a queue's simulated tail. Execution is synchronous, so a recorded event is
// always complete: query and synchronize succeed at once.
#include "error.h"
#include "runtime.h"

using namespace nsim;

extern "C" {

NSIM_API nsimError nsimEventCreate(int device, unsigned flags, nsimEvent* event) {
  Runtime* rt = runtime_or_error("nsimEventCreate");
  if (!rt) return runtime_unavailable();
  Device* d = device_or_error(rt, "nsimEventCreate", device);
  if (!d) return NSIM_ERROR_INVALID_DEVICE;
  if (!event) return set_error(NSIM_ERROR_INVALID_VALUE, "nsimEventCreate: event is NULL");
  if (flags & ~NSIM_EVENT_DISABLE_TIMING) {
    return set_error(NSIM_ERROR_INVALID_VALUE,
                     "nsimEventCreate: unknown flags 0x%x (accepted: NSIM_EVENT_DEFAULT, "
                     "NSIM_EVENT_DISABLE_TIMING)",
                     flags);
  }
  auto e = std::make_shared<Event>();
  e->device = d;
  e->flags = flags;
  {
    std::unique_lock<std::shared_mutex> lock(rt->handles.mu);
    rt->handles.destroyed_events.erase(e.get());
    rt->handles.events.emplace(e.get(), e);
  }
  d->counters.live_events.fetch_add(1);
  *event = reinterpret_cast<nsimEvent>(e.get());
  return NSIM_SUCCESS;
}

NSIM_API nsimError nsimEventDestroy(nsimEvent event) {
  Runtime* rt = runtime_or_error("nsimEventDestroy");
  if (!rt) return runtime_unavailable();
  std::shared_ptr<Event> e;
  {
    std::unique_lock<std::shared_mutex> lock(rt->handles.mu);
    auto it = rt->handles.events.find(event);
    if (it != rt->handles.events.end()) {
      e = it->second;
      rt->handles.events.erase(it);
      rt->handles.destroyed_events.insert(event);
    }
  }
  if (!e) {
    event_or_error(rt, "nsimEventDestroy", event);  // sets the message: destroyed or unknown
    return NSIM_ERROR_INVALID_EVENT;
  }
  e->device->counters.live_events.fetch_sub(1);
  return NSIM_SUCCESS;
}

NSIM_API nsimError nsimEventRecord(nsimEvent event, nsimQueue queue) {
  Runtime* rt = runtime_or_error("nsimEventRecord");
  if (!rt) return runtime_unavailable();
  std::shared_ptr<Event> e = event_or_error(rt, "nsimEventRecord", event);
  if (!e) return NSIM_ERROR_INVALID_EVENT;
  std::shared_ptr<Queue> q = queue_or_error(rt, "nsimEventRecord", queue);
  if (!q) return NSIM_ERROR_INVALID_QUEUE;
  nsimError err = check_device(q->device, "nsimEventRecord");
  if (err != NSIM_SUCCESS) return err;
  if (q->device != e->device) {
    return set_error(NSIM_ERROR_INVALID_VALUE,
                     "nsimEventRecord: event %p belongs to neuron device %d but queue %p to "
                     "neuron device %d; create the event on the queue's device",
                     static_cast<void*>(event), e->device->index, static_cast<void*>(queue),
                     q->device->index);
  }
  std::lock_guard<std::mutex> lock(q->device->mu);
  // The event completes when all earlier work of the queue ends, including awaited events.
  e->time_ns = std::max(q->tail_ns, q->floor_ns);
  e->recorded = true;
  return NSIM_SUCCESS;
}

NSIM_API nsimError nsimEventQuery(nsimEvent event) {
  Runtime* rt = runtime_or_error("nsimEventQuery");
  if (!rt) return runtime_unavailable();
  std::shared_ptr<Event> e = event_or_error(rt, "nsimEventQuery", event);
  if (!e) return NSIM_ERROR_INVALID_EVENT;
  return check_device(e->device, "nsimEventQuery");
}

NSIM_API nsimError nsimEventSynchronize(nsimEvent event) {
  Runtime* rt = runtime_or_error("nsimEventSynchronize");
  if (!rt) return runtime_unavailable();
  std::shared_ptr<Event> e = event_or_error(rt, "nsimEventSynchronize", event);
  if (!e) return NSIM_ERROR_INVALID_EVENT;
  return check_device(e->device, "nsimEventSynchronize");
}

NSIM_API nsimError nsimEventGetTime(nsimEvent event, double* time_ns) {
  Runtime* rt = runtime_or_error("nsimEventGetTime");
  if (!rt) return runtime_unavailable();
  std::shared_ptr<Event> e = event_or_error(rt, "nsimEventGetTime", event);
  if (!e) return NSIM_ERROR_INVALID_EVENT;
  if (!time_ns) return set_error(NSIM_ERROR_INVALID_VALUE, "nsimEventGetTime: time_ns is NULL");
  std::lock_guard<std::mutex> lock(e->device->mu);
  if (!e->recorded) {
    return set_error(NSIM_ERROR_NOT_READY,
                     "nsimEventGetTime: event %p was never recorded (call nsimEventRecord first)",
                     static_cast<void*>(event));
  }
  *time_ns = e->time_ns;
  return NSIM_SUCCESS;
}

NSIM_API nsimError nsimEventElapsedTime(float* ms, nsimEvent start, nsimEvent end) {
  Runtime* rt = runtime_or_error("nsimEventElapsedTime");
  if (!rt) return runtime_unavailable();
  if (!ms) return set_error(NSIM_ERROR_INVALID_VALUE, "nsimEventElapsedTime: ms is NULL");
  std::shared_ptr<Event> s = event_or_error(rt, "nsimEventElapsedTime", start);
  if (!s) return NSIM_ERROR_INVALID_EVENT;
  std::shared_ptr<Event> e = event_or_error(rt, "nsimEventElapsedTime", end);
  if (!e) return NSIM_ERROR_INVALID_EVENT;
  if (s->device != e->device) {
    return set_error(NSIM_ERROR_INVALID_VALUE,
                     "nsimEventElapsedTime: start is on neuron device %d and end on neuron device "
                     "%d; both events must belong to one device",
                     s->device->index, e->device->index);
  }
  if ((s->flags | e->flags) & NSIM_EVENT_DISABLE_TIMING) {
    return set_error(NSIM_ERROR_TIMING_DISABLED,
                     "nsimEventElapsedTime: %s event was created with NSIM_EVENT_DISABLE_TIMING; "
                     "create both with NSIM_EVENT_DEFAULT",
                     (s->flags & NSIM_EVENT_DISABLE_TIMING) ? "the start" : "the end");
  }
  std::lock_guard<std::mutex> lock(s->device->mu);
  if (!s->recorded || !e->recorded) {
    return set_error(NSIM_ERROR_NOT_READY,
                     "nsimEventElapsedTime: the %s event was never recorded (nsimEventRecord)",
                     !s->recorded ? "start" : "end");
  }
  *ms = static_cast<float>((e->time_ns - s->time_ns) / 1e6);
  return NSIM_SUCCESS;
}

}  // extern "C"
