// Queue, the binding of nsimQueue: shared by the files whose calls take a queue.
#pragma once

#include <memory>
#include <string>

#include "binding.h"

namespace nsim_py {

class Event;

class Queue {
 public:
  Queue(int device, int priority) : owned_(true), generation_(g_generation.load()) {
    ensure_init();
    check(nsimQueueCreate(device, priority, &handle_));
    load_info();
  }
  Queue(nsimQueue handle, bool owned) : handle_(handle), owned_(owned), generation_(g_generation.load()) {
    load_info();
  }
  ~Queue() {
    if (owned_ && !destroyed_ && generation_ == g_generation.load() && nsimIsInitialized()) {
      if (nsimQueueDestroy(handle_) != NSIM_SUCCESS) nsimGetLastError();
    }
  }
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;

  static std::unique_ptr<Queue> default_queue(int device) {
    ensure_init();
    nsimQueue handle = nullptr;
    check(nsimQueueGetDefault(device, &handle));
    return std::make_unique<Queue>(handle, false);
  }

  nsimQueue handle(const char* call) const {
    if (destroyed_) fail(NSIM_ERROR_INVALID_QUEUE, std::string(call) + ": " + describe() + " was destroyed");
    if (generation_ != g_generation.load() || !nsimIsInitialized())
      fail(NSIM_ERROR_INVALID_QUEUE, std::string(call) + ": " + describe() +
                                         " belongs to a runtime that neuron_sim.shutdown() ended");
    return handle_;
  }

  void destroy() {
    nsimQueue h = handle("Queue.destroy");
    if (!owned_)
      fail(NSIM_ERROR_INVALID_QUEUE,
           "Queue.destroy: " + describe() + " is the device's default queue, which the runtime owns");
    check(nsimQueueDestroy(h));
    destroyed_ = true;
  }

  double time_ns() const {
    double t = 0;
    check(nsimQueueGetTime(handle("Queue.time_ns"), &t));
    return t;
  }
  void synchronize() const {
    nsimQueue h = handle("Queue.synchronize");
    nsimError err;
    {
      py::gil_scoped_release nogil;
      err = nsimQueueSynchronize(h);
    }
    check(err);
  }
  bool query() const {
    nsimError err = nsimQueueQuery(handle("Queue.query"));
    if (err == NSIM_ERROR_NOT_READY) {
      nsimGetLastError();
      return false;
    }
    check(err);
    return true;
  }

  // Defined with the launch bindings (bind_launch.cpp).
  void launch(const std::string& name, double duration_ns, const py::object& fn, int kind,
              uintptr_t user_data);

  void wait_event(const Event& event);

  int device() const { return device_; }
  int priority() const { return priority_; }
  uint64_t id() const { return id_; }
  bool is_default() const { return !owned_; }
  bool destroyed() const { return destroyed_; }

  std::string describe() const {
    return "Queue(device=" + std::to_string(device_) + ", id=" + std::to_string(id_) +
           (owned_ ? "" : ", default") + ")";
  }

 private:
  void load_info() { check(nsimQueueGetInfo(handle_, &device_, &priority_, &id_)); }

  nsimQueue handle_ = nullptr;
  bool owned_;
  bool destroyed_ = false;
  uint64_t generation_;
  int device_ = -1;
  int priority_ = 0;
  uint64_t id_ = 0;
};

}  // namespace nsim_py
