// Injected faults: the n-th allocation, launches of a named kernel, a lost device.
#include <string>
#include <vector>

#include "check.h"

static uint32_t name(const char* s) {
  uint32_t id = 0;
  nsimRegisterName(s, &id);
  return id;
}

static int mark(void* flag) {
  *static_cast<int*>(flag) += 1;
  return 0;
}

TEST(nth_allocation_fails_once_on_any_device) {
  REQUIRE_OK(nsimInit());
  CHECK_OK(nsimFaultFailNthAlloc(3));
  void *a, *b, *c, *d;
  CHECK_OK(nsimMalloc(0, 100, &a));
  CHECK_OK(nsimMalloc(1, 100, &b));
  CHECK_ERR(nsimMalloc(2, 100, &c), NSIM_ERROR_OUT_OF_MEMORY);
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "injected allocation failure (nsimFaultFailNthAlloc)");
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "neuron device 2");
  CHECK_OK(nsimMalloc(2, 100, &c));  // one-shot
  nsimCounters cnt;
  REQUIRE_OK(nsimGetCounters(2, &cnt));
  CHECK_EQ(cnt.failed_allocations, 1u);
  CHECK_EQ(cnt.live_allocations, 1u);
  CHECK_OK(nsimFaultFailNthAlloc(1));
  CHECK_OK(nsimFaultFailNthAlloc(0));  // disarm
  CHECK_OK(nsimMalloc(0, 100, &d));
  CHECK_OK(nsimFaultFailNthAlloc(2));
  CHECK_OK(nsimFaultClear());
  void *e, *f;
  CHECK_OK(nsimMalloc(0, 100, &e));
  CHECK_OK(nsimMalloc(0, 100, &f));
  for (void* p : {a, b, c, d, e, f}) CHECK_OK(nsimFree(p));
}

TEST(named_kernel_fails_without_running_for_count_launches) {
  REQUIRE_OK(nsimInit());
  nsimQueue q;
  REQUIRE_OK(nsimQueueGetDefault(0, &q));
  const uint32_t bad = name("flaky_kernel"), good = name("good_kernel");
  CHECK_OK(nsimFaultFailKernel("flaky_kernel", 2));
  int ran = 0;
  // Asking does not consume: the armed fault still fails the next two launches.
  CHECK_EQ(nsimLaunchWouldFail(0, bad), 1);
  CHECK_EQ(nsimLaunchWouldFail(0, bad), 1);
  CHECK_EQ(nsimLaunchWouldFail(0, good), 0);
  CHECK_ERR(nsimLaunch(q, bad, NSIM_LAUNCH_KERNEL, 10.0, mark, &ran), NSIM_ERROR_LAUNCH_FAILED);
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "'flaky_kernel' on neuron device 0");
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "nsimFaultFailKernel");
  CHECK_OK(nsimLaunch(q, good, NSIM_LAUNCH_KERNEL, 10.0, mark, &ran));
  CHECK_ERR(nsimLaunch(q, bad, NSIM_LAUNCH_KERNEL, 10.0, mark, &ran), NSIM_ERROR_LAUNCH_FAILED);
  CHECK_EQ(nsimLaunchWouldFail(0, bad), 0);
  CHECK_OK(nsimLaunch(q, bad, NSIM_LAUNCH_KERNEL, 10.0, mark, &ran));
  CHECK_EQ(ran, 2);  // failed launches never ran
  double t = 0;
  CHECK_OK(nsimQueueGetTime(q, &t));
  CHECK_EQ(t, 20.0);  // nor occupied the queue
  size_t count = 0;
  CHECK_OK(nsimTimelineGetCount(0, &count));
  CHECK_EQ(count, size_t(2));

  CHECK_OK(nsimFaultFailKernel("flaky_kernel", -1));  // every launch
  for (int i = 0; i < 5; ++i) {
    CHECK_ERR(nsimLaunch(q, bad, NSIM_LAUNCH_KERNEL, 1.0, nullptr, nullptr),
              NSIM_ERROR_LAUNCH_FAILED);
  }
  CHECK_OK(nsimFaultClear());
  CHECK_OK(nsimLaunch(q, bad, NSIM_LAUNCH_KERNEL, 1.0, nullptr, nullptr));
  CHECK_OK(nsimFaultFailKernel("flaky_kernel", -1));
  CHECK_OK(nsimFaultFailKernel("flaky_kernel", 0));  // count 0 disarms the name
  CHECK_OK(nsimLaunch(q, bad, NSIM_LAUNCH_KERNEL, 1.0, nullptr, nullptr));
  CHECK_ERR(nsimFaultFailKernel(nullptr, 1), NSIM_ERROR_INVALID_VALUE);
  // Faults do not survive a restart.
  CHECK_OK(nsimFaultFailKernel("flaky_kernel", -1));
  nsimShutdown();
  REQUIRE_OK(nsimInit());
  REQUIRE_OK(nsimQueueGetDefault(0, &q));
  CHECK_OK(nsimLaunch(q, bad, NSIM_LAUNCH_KERNEL, 1.0, nullptr, nullptr));
}

TEST(lost_device_fails_every_call_until_shutdown) {
  REQUIRE_OK(nsimInit());
  void *d0, *d1;
  REQUIRE_OK(nsimMalloc(0, 4096, &d0));
  REQUIRE_OK(nsimMalloc(1, 4096, &d1));
  nsimQueue q1, q1b;
  REQUIRE_OK(nsimQueueGetDefault(1, &q1));
  REQUIRE_OK(nsimQueueCreate(1, 0, &q1b));
  nsimEvent e1;
  REQUIRE_OK(nsimEventCreate(1, 0, &e1));
  CHECK_ERR(nsimFaultSetDeviceLost(9), NSIM_ERROR_INVALID_DEVICE);
  CHECK_OK(nsimFaultSetDeviceLost(1));
  std::vector<char> host(4096);
  void* p;
  const uint32_t k = name("k");
  CHECK_ERR(nsimMalloc(1, 16, &p), NSIM_ERROR_DEVICE_LOST);
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "neuron device 1 is lost");
  CHECK_ERR(nsimMemcpy(d1, host.data(), 4096, NSIM_MEMCPY_HOST_TO_DEVICE), NSIM_ERROR_DEVICE_LOST);
  CHECK_ERR(nsimMemcpy(host.data(), d1, 4096, NSIM_MEMCPY_DEVICE_TO_HOST), NSIM_ERROR_DEVICE_LOST);
  CHECK_ERR(nsimMemcpy(d0, d1, 4096, NSIM_MEMCPY_DEVICE_TO_DEVICE), NSIM_ERROR_DEVICE_LOST);
  CHECK_ERR(nsimMemset(d1, 0, 4096), NSIM_ERROR_DEVICE_LOST);
  CHECK_ERR(nsimLaunch(q1, k, NSIM_LAUNCH_KERNEL, 1.0, nullptr, nullptr), NSIM_ERROR_DEVICE_LOST);
  CHECK_ERR(nsimLaunch(q1b, k, NSIM_LAUNCH_KERNEL, 1.0, nullptr, nullptr), NSIM_ERROR_DEVICE_LOST);
  CHECK_ERR(nsimQueueSynchronize(q1), NSIM_ERROR_DEVICE_LOST);
  CHECK_ERR(nsimQueueQuery(q1b), NSIM_ERROR_DEVICE_LOST);
  CHECK_ERR(nsimDeviceSynchronize(1), NSIM_ERROR_DEVICE_LOST);
  CHECK_ERR(nsimEventRecord(e1, q1), NSIM_ERROR_DEVICE_LOST);
  CHECK_ERR(nsimEventSynchronize(e1), NSIM_ERROR_DEVICE_LOST);
  CHECK_ERR(nsimQueueCreate(1, 0, &q1b), NSIM_ERROR_DEVICE_LOST);
  CHECK_ERR(nsimFree(d1), NSIM_ERROR_DEVICE_LOST);
  // Other devices keep working.
  CHECK_OK(nsimMemcpy(d0, host.data(), 4096, NSIM_MEMCPY_HOST_TO_DEVICE));
  CHECK_OK(nsimDeviceSynchronize(0));
  CHECK_OK(nsimFree(d0));
  // nsimFaultClear does not revive a device; a restart does.
  CHECK_OK(nsimFaultClear());
  CHECK_ERR(nsimDeviceSynchronize(1), NSIM_ERROR_DEVICE_LOST);
  nsimShutdown();
  REQUIRE_OK(nsimInit());
  CHECK_OK(nsimDeviceSynchronize(1));
  CHECK_OK(nsimMalloc(1, 16, &p));
  CHECK_OK(nsimFree(p));
}

NSIM_TEST_MAIN()
