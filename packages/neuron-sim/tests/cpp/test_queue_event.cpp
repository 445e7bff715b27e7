// Queues and events: priorities, handle validation, simulated time, elapsed time and
// cross-queue ordering.
#include <cstdint>
#include <set>
#include <string>

#include "check.h"

static uint32_t name(const char* s) {
  uint32_t id = 0;
  nsimRegisterName(s, &id);
  return id;
}

TEST(priorities_are_clamped_into_the_cuda_style_range) {
  REQUIRE_OK(nsimInit());
  int least = 7, greatest = 7;
  CHECK_OK(nsimQueueGetPriorityRange(&least, &greatest));
  CHECK_EQ(least, 0);
  CHECK_EQ(greatest, -1);
  nsimQueue lo, hi, clamp_lo, clamp_hi;
  REQUIRE_OK(nsimQueueCreate(1, 0, &lo));
  REQUIRE_OK(nsimQueueCreate(1, -1, &hi));
  REQUIRE_OK(nsimQueueCreate(1, 5, &clamp_lo));
  REQUIRE_OK(nsimQueueCreate(1, -9, &clamp_hi));
  int dev = -1, prio = 9;
  uint64_t id = 0;
  std::set<uint64_t> ids;
  CHECK_OK(nsimQueueGetInfo(lo, &dev, &prio, &id));
  CHECK_EQ(dev, 1);
  CHECK_EQ(prio, 0);
  ids.insert(id);
  CHECK_OK(nsimQueueGetInfo(hi, &dev, &prio, &id));
  CHECK_EQ(prio, -1);
  ids.insert(id);
  CHECK_OK(nsimQueueGetInfo(clamp_lo, &dev, &prio, &id));
  CHECK_EQ(prio, 0);
  ids.insert(id);
  CHECK_OK(nsimQueueGetInfo(clamp_hi, &dev, &prio, &id));
  CHECK_EQ(prio, -1);
  ids.insert(id);
  nsimQueue def;
  REQUIRE_OK(nsimQueueGetDefault(1, &def));
  CHECK_OK(nsimQueueGetInfo(def, &dev, &prio, &id));
  CHECK_EQ(prio, 0);
  ids.insert(id);
  CHECK_EQ(ids.size(), size_t(5));
  nsimCounters c;
  REQUIRE_OK(nsimGetCounters(1, &c));
  CHECK_EQ(c.live_queues, 4u);
  for (nsimQueue q : {lo, hi, clamp_lo, clamp_hi}) CHECK_OK(nsimQueueDestroy(q));
  REQUIRE_OK(nsimGetCounters(1, &c));
  CHECK_EQ(c.live_queues, 0u);
  CHECK_ERR(nsimQueueCreate(9, 0, &lo), NSIM_ERROR_INVALID_DEVICE);
}

TEST(default_queue_is_stable_and_cannot_be_destroyed) {
  REQUIRE_OK(nsimInit());
  nsimQueue a, b, other;
  REQUIRE_OK(nsimQueueGetDefault(0, &a));
  REQUIRE_OK(nsimQueueGetDefault(0, &b));
  REQUIRE_OK(nsimQueueGetDefault(1, &other));
  CHECK(a == b);
  CHECK(a != other);
  CHECK_ERR(nsimQueueDestroy(a), NSIM_ERROR_INVALID_QUEUE);
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "default queue of neuron device 0");
  CHECK_OK(nsimQueueSynchronize(a));
  CHECK_OK(nsimQueueQuery(a));
}

TEST(destroyed_and_foreign_queue_handles_fail_cleanly) {
  REQUIRE_OK(nsimInit());
  nsimQueue q;
  REQUIRE_OK(nsimQueueCreate(0, 0, &q));
  CHECK_OK(nsimQueueDestroy(q));
  const uint32_t k = name("k");
  CHECK_ERR(nsimLaunch(q, k, NSIM_LAUNCH_KERNEL, 1.0, nullptr, nullptr), NSIM_ERROR_INVALID_QUEUE);
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "was destroyed");
  CHECK_ERR(nsimQueueDestroy(q), NSIM_ERROR_INVALID_QUEUE);
  CHECK_ERR(nsimQueueSynchronize(q), NSIM_ERROR_INVALID_QUEUE);
  CHECK_ERR(nsimQueueQuery(q), NSIM_ERROR_INVALID_QUEUE);
  double t;
  CHECK_ERR(nsimQueueGetTime(q, &t), NSIM_ERROR_INVALID_QUEUE);
  int dev;
  CHECK_ERR(nsimQueueGetInfo(q, &dev, nullptr, nullptr), NSIM_ERROR_INVALID_QUEUE);
  int junk = 0;
  nsimQueue foreign = reinterpret_cast<nsimQueue>(&junk);
  CHECK_ERR(nsimLaunch(foreign, k, NSIM_LAUNCH_KERNEL, 1.0, nullptr, nullptr),
            NSIM_ERROR_INVALID_QUEUE);
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "not a queue created by nsimQueueCreate");
  CHECK_ERR(nsimLaunch(nullptr, k, NSIM_LAUNCH_KERNEL, 1.0, nullptr, nullptr),
            NSIM_ERROR_INVALID_QUEUE);
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "nsimQueueGetDefault");
}

TEST(elapsed_time_is_the_sum_of_launch_durations_between_records) {
  REQUIRE_OK(nsimInit());
  nsimQueue q;
  REQUIRE_OK(nsimQueueCreate(0, 0, &q));
  nsimEvent start, end;
  REQUIRE_OK(nsimEventCreate(0, NSIM_EVENT_DEFAULT, &start));
  REQUIRE_OK(nsimEventCreate(0, NSIM_EVENT_DEFAULT, &end));
  const uint32_t k = name("gemm");
  CHECK_OK(nsimLaunch(q, k, NSIM_LAUNCH_KERNEL, 500.0, nullptr, nullptr));  // before start
  CHECK_OK(nsimEventRecord(start, q));
  const double durations[] = {1234.5, 10.25, 98765.0, 0.0, 3.125};
  double sum = 0;
  for (double d : durations) {
    CHECK_OK(nsimLaunch(q, k, NSIM_LAUNCH_KERNEL, d, nullptr, nullptr));
    sum += d;
  }
  CHECK_OK(nsimEventRecord(end, q));
  CHECK_OK(nsimEventQuery(end));
  CHECK_OK(nsimEventSynchronize(end));
  float ms = -1;
  CHECK_OK(nsimEventElapsedTime(&ms, start, end));
  CHECK_NEAR(ms, sum / 1e6, 1e-6);
  double ts = 0, te = 0;
  CHECK_OK(nsimEventGetTime(start, &ts));
  CHECK_OK(nsimEventGetTime(end, &te));
  CHECK_EQ(ts, 500.0);
  CHECK_EQ(te, 500.0 + sum);
  CHECK_OK(nsimEventElapsedTime(&ms, end, start));  // reversed order: negative
  CHECK_NEAR(ms, -sum / 1e6, 1e-6);
  // Re-recording moves the event.
  CHECK_OK(nsimLaunch(q, k, NSIM_LAUNCH_KERNEL, 1000.0, nullptr, nullptr));
  CHECK_OK(nsimEventRecord(end, q));
  CHECK_OK(nsimEventElapsedTime(&ms, start, end));
  CHECK_NEAR(ms, (sum + 1000.0) / 1e6, 1e-6);
  nsimCounters c;
  REQUIRE_OK(nsimGetCounters(0, &c));
  CHECK_EQ(c.live_events, 2u);
  CHECK_EQ(c.launches, 7u);
  CHECK_OK(nsimEventDestroy(start));
  CHECK_OK(nsimEventDestroy(end));
  REQUIRE_OK(nsimGetCounters(0, &c));
  CHECK_EQ(c.live_events, 0u);
  CHECK_OK(nsimQueueDestroy(q));
}

TEST(event_errors_not_ready_timing_disabled_devices_destroyed) {
  REQUIRE_OK(nsimInit());
  nsimQueue q0, q1;
  REQUIRE_OK(nsimQueueGetDefault(0, &q0));
  REQUIRE_OK(nsimQueueGetDefault(1, &q1));
  nsimEvent a, b, untimed, other;
  REQUIRE_OK(nsimEventCreate(0, NSIM_EVENT_DEFAULT, &a));
  REQUIRE_OK(nsimEventCreate(0, NSIM_EVENT_DEFAULT, &b));
  REQUIRE_OK(nsimEventCreate(0, NSIM_EVENT_DISABLE_TIMING, &untimed));
  REQUIRE_OK(nsimEventCreate(1, NSIM_EVENT_DEFAULT, &other));
  float ms;
  double t;
  CHECK_OK(nsimEventQuery(a));  // never recorded: nothing pending
  CHECK_ERR(nsimEventGetTime(a, &t), NSIM_ERROR_NOT_READY);
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "never recorded");
  CHECK_OK(nsimEventRecord(a, q0));
  CHECK_ERR(nsimEventElapsedTime(&ms, a, b), NSIM_ERROR_NOT_READY);
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "end event was never recorded");
  CHECK_OK(nsimEventRecord(untimed, q0));
  CHECK_ERR(nsimEventElapsedTime(&ms, a, untimed), NSIM_ERROR_TIMING_DISABLED);
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "NSIM_EVENT_DISABLE_TIMING");
  CHECK_OK(nsimEventRecord(other, q1));
  CHECK_ERR(nsimEventElapsedTime(&ms, a, other), NSIM_ERROR_INVALID_VALUE);
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "both events must belong to one device");
  CHECK_ERR(nsimEventRecord(a, q1), NSIM_ERROR_INVALID_VALUE);
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "create the event on the queue's device");
  CHECK_ERR(nsimEventCreate(0, 0x80, &b), NSIM_ERROR_INVALID_VALUE);
  CHECK_OK(nsimEventDestroy(b));
  CHECK_ERR(nsimEventRecord(b, q0), NSIM_ERROR_INVALID_EVENT);
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "was destroyed");
  CHECK_ERR(nsimEventDestroy(b), NSIM_ERROR_INVALID_EVENT);
  CHECK_ERR(nsimEventQuery(b), NSIM_ERROR_INVALID_EVENT);
  CHECK_ERR(nsimEventElapsedTime(&ms, a, b), NSIM_ERROR_INVALID_EVENT);
  int junk;
  CHECK_ERR(nsimEventSynchronize(reinterpret_cast<nsimEvent>(&junk)), NSIM_ERROR_INVALID_EVENT);
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "not an event created by nsimEventCreate");
  for (nsimEvent e : {a, untimed, other}) CHECK_OK(nsimEventDestroy(e));
}

TEST(queue_wait_event_orders_work_across_queues_and_devices) {
  REQUIRE_OK(nsimInit());
  nsimQueue producer, consumer, independent, remote, idle;
  REQUIRE_OK(nsimQueueCreate(0, 0, &idle));
  REQUIRE_OK(nsimQueueCreate(0, 0, &producer));
  REQUIRE_OK(nsimQueueCreate(0, -1, &consumer));
  REQUIRE_OK(nsimQueueCreate(0, 0, &independent));
  REQUIRE_OK(nsimQueueCreate(3, 0, &remote));
  const uint32_t k = name("step");
  CHECK_OK(nsimLaunch(producer, k, NSIM_LAUNCH_KERNEL, 700.0, nullptr, nullptr));
  CHECK_OK(nsimLaunch(producer, k, NSIM_LAUNCH_KERNEL, 300.0, nullptr, nullptr));
  nsimEvent done;
  REQUIRE_OK(nsimEventCreate(0, NSIM_EVENT_DEFAULT, &done));
  CHECK_OK(nsimEventRecord(done, producer));
  CHECK_OK(nsimQueueWaitEvent(consumer, done));
  CHECK_OK(nsimQueueWaitEvent(remote, done));
  CHECK_OK(nsimLaunch(consumer, k, NSIM_LAUNCH_KERNEL, 10.0, nullptr, nullptr));
  CHECK_OK(nsimLaunch(independent, k, NSIM_LAUNCH_KERNEL, 10.0, nullptr, nullptr));
  CHECK_OK(nsimLaunch(remote, k, NSIM_LAUNCH_KERNEL, 20.0, nullptr, nullptr));
  double t = 0;
  CHECK_OK(nsimQueueGetTime(consumer, &t));
  CHECK_EQ(t, 1010.0);  // started when the producer's work ended
  CHECK_OK(nsimQueueGetTime(independent, &t));
  CHECK_EQ(t, 10.0);  // no wait: overlaps the producer
  CHECK_OK(nsimQueueGetTime(remote, &t));
  CHECK_EQ(t, 1020.0);
  nsimTimelineRecord r[8];
  size_t n = 0;
  CHECK_OK(nsimTimelineGetRecords(0, r, 8, &n));
  REQUIRE(n == 4);
  CHECK_EQ(r[2].start_ns, 1000.0);
  CHECK_EQ(r[3].start_ns, 0.0);
  CHECK_OK(nsimDeviceGetTime(0, &t));
  CHECK_EQ(t, 1010.0);  // the latest queue of the device
  CHECK_OK(nsimDeviceGetTime(3, &t));
  CHECK_EQ(t, 1020.0);
  CHECK_OK(nsimDeviceSynchronize(0));
  // An event recorded on a queue that waited captures the awaited time too.
  nsimEvent after_wait;
  REQUIRE_OK(nsimEventCreate(0, NSIM_EVENT_DEFAULT, &after_wait));
  CHECK_OK(nsimQueueWaitEvent(idle, done));
  CHECK_OK(nsimEventRecord(after_wait, idle));
  CHECK_OK(nsimEventGetTime(after_wait, &t));
  CHECK_EQ(t, 1000.0);
  // A new queue starts at the device's current time.
  nsimQueue late;
  REQUIRE_OK(nsimQueueCreate(0, 0, &late));
  CHECK_OK(nsimQueueGetTime(late, &t));
  CHECK_EQ(t, 1010.0);
  CHECK_OK(nsimEventDestroy(done));
  CHECK_OK(nsimEventDestroy(after_wait));
  for (nsimQueue q : {producer, consumer, independent, remote, idle, late}) {
    CHECK_OK(nsimQueueDestroy(q));
  }
  // Work of destroyed queues still counts for the device's time.
  CHECK_OK(nsimDeviceGetTime(0, &t));
  CHECK_EQ(t, 1010.0);
}

NSIM_TEST_MAIN()
