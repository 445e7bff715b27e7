// Event, the binding of nsimEvent: shared by the queue and event bindings.
#pragma once

#include <string>

#include "binding.h"
#include "queue.h"

namespace nsim_py {

class Event {
 public:
  Event(int device, bool enable_timing)
      : device_(device), timing_(enable_timing), generation_(g_generation.load()) {
    ensure_init();
    check(nsimEventCreate(device, enable_timing ? NSIM_EVENT_DEFAULT : NSIM_EVENT_DISABLE_TIMING, &handle_));
  }
  ~Event() {
    if (!destroyed_ && generation_ == g_generation.load() && nsimIsInitialized()) {
      if (nsimEventDestroy(handle_) != NSIM_SUCCESS) nsimGetLastError();
    }
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  nsimEvent handle(const char* call) const {
    if (destroyed_) fail(NSIM_ERROR_INVALID_EVENT, std::string(call) + ": " + describe() + " was destroyed");
    if (generation_ != g_generation.load() || !nsimIsInitialized())
      fail(NSIM_ERROR_INVALID_EVENT, std::string(call) + ": " + describe() +
                                         " belongs to a runtime that neuron_sim.shutdown() ended");
    return handle_;
  }

  void destroy() {
    check(nsimEventDestroy(handle("Event.destroy")));
    destroyed_ = true;
  }
  void record(const Queue* queue) {
    nsimEvent e = handle("Event.record");
    if (queue) {
      check(nsimEventRecord(e, queue->handle("Event.record")));
    } else {
      nsimQueue q = nullptr;
      check(nsimQueueGetDefault(device_, &q));
      check(nsimEventRecord(e, q));
    }
  }
  bool query() const {
    nsimError err = nsimEventQuery(handle("Event.query"));
    if (err == NSIM_ERROR_NOT_READY) {
      nsimGetLastError();
      return false;
    }
    check(err);
    return true;
  }
  void synchronize() const {
    nsimEvent e = handle("Event.synchronize");
    nsimError err;
    {
      py::gil_scoped_release nogil;
      err = nsimEventSynchronize(e);
    }
    check(err);
  }
  double time_ns() const {
    double t = 0;
    check(nsimEventGetTime(handle("Event.time_ns"), &t));
    return t;
  }
  float elapsed_time(const Event& end) const {
    float ms = 0;
    check(nsimEventElapsedTime(&ms, handle("Event.elapsed_time"), end.handle("Event.elapsed_time")));
    return ms;
  }

  int device() const { return device_; }
  bool enable_timing() const { return timing_; }
  bool destroyed() const { return destroyed_; }
  std::string describe() const {
    return "Event(device=" + std::to_string(device_) + ", enable_timing=" + (timing_ ? "True" : "False") + ")";
  }

 private:
  nsimEvent handle_ = nullptr;
  int device_;
  bool timing_;
  bool destroyed_ = false;
  uint64_t generation_;
};

}  // namespace nsim_py
