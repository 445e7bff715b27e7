// Copies and memsets: data, kind checks, bounds, peer copies, and the modelled durations
// placed on the default queue (reference: bytes / bandwidth + DMA overhead from the device's
// properties).
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "check.h"

static double queue_time(int device) {
  nsimQueue q;
  double t = -1;
  nsimQueueGetDefault(device, &q);
  nsimQueueGetTime(q, &t);
  return t;
}

static nsimDeviceProperties props(int device) {
  nsimDeviceProperties p;
  nsimGetDeviceProperties(device, &p);
  return p;
}

TEST(host_device_round_trip_preserves_bytes) {
  REQUIRE_OK(nsimInit());
  const size_t n = 1 << 20;
  std::vector<uint8_t> in(n), out(n, 0);
  for (size_t i = 0; i < n; ++i) in[i] = static_cast<uint8_t>(i * 131 + 7);
  void *a, *b;
  REQUIRE_OK(nsimMalloc(0, n, &a));
  REQUIRE_OK(nsimMalloc(0, n, &b));
  CHECK_OK(nsimMemcpy(a, in.data(), n, NSIM_MEMCPY_HOST_TO_DEVICE));
  CHECK_OK(nsimMemcpy(b, a, n, NSIM_MEMCPY_DEVICE_TO_DEVICE));
  CHECK_OK(nsimMemcpy(out.data(), b, n, NSIM_MEMCPY_DEVICE_TO_HOST));
  CHECK(in == out);
  std::fill(out.begin(), out.end(), 0);
  // DEFAULT infers the kind from the pointers.
  CHECK_OK(nsimMemcpy(out.data() + 100, static_cast<char*>(a) + 100, 1000, NSIM_MEMCPY_DEFAULT));
  CHECK(std::equal(out.begin() + 100, out.begin() + 1100, in.begin() + 100));
  CHECK_EQ(out[99], 0);
  CHECK_EQ(out[1100], 0);
  std::vector<uint8_t> h2(n);
  CHECK_OK(nsimMemcpy(h2.data(), in.data(), n, NSIM_MEMCPY_HOST_TO_HOST));
  CHECK(h2 == in);
  nsimCounters c;
  REQUIRE_OK(nsimGetCounters(0, &c));
  CHECK_EQ(c.memcpy_h2d, 1u);
  CHECK_EQ(c.memcpy_d2d, 1u);
  CHECK_EQ(c.memcpy_d2h, 2u);
  CHECK_EQ(c.bytes_h2d, n);
  CHECK_EQ(c.bytes_d2h, n + 1000);
  CHECK_EQ(c.bytes_d2d, n);
  CHECK_OK(nsimFree(a));
  CHECK_OK(nsimFree(b));
}

TEST(copy_durations_follow_the_bandwidth_model) {
  REQUIRE_OK(nsimInit());
  const nsimDeviceProperties p = props(0);
  const size_t n = 8u << 20;
  std::vector<uint8_t> host(n, 3);
  void *a, *b;
  REQUIRE_OK(nsimMalloc(0, n, &a));
  REQUIRE_OK(nsimMalloc(0, n, &b));
  const double h2d = n / p.host_link_bandwidth * 1e9 + p.dma_fixed_overhead_ns;
  const double d2d = 2.0 * n / p.hbm_bandwidth * 1e9 + p.dma_fixed_overhead_ns;
  double model = 0;
  CHECK_OK(nsimModelCopyDuration(0, NSIM_MEMCPY_HOST_TO_DEVICE, n, &model));
  CHECK_NEAR(model, h2d, 1e-12);
  CHECK_OK(nsimModelCopyDuration(0, NSIM_MEMCPY_DEVICE_TO_HOST, n, &model));
  CHECK_NEAR(model, h2d, 1e-12);
  CHECK_OK(nsimModelCopyDuration(0, NSIM_MEMCPY_DEVICE_TO_DEVICE, n, &model));
  CHECK_NEAR(model, d2d, 1e-12);
  CHECK_ERR(nsimModelCopyDuration(0, NSIM_MEMCPY_HOST_TO_HOST, n, &model), NSIM_ERROR_INVALID_VALUE);
  // 8 MiB over 63 GB/s is ~133 us: far above the 1.3 us overhead.
  CHECK(h2d > 100e3 && h2d < 200e3);

  CHECK_OK(nsimMemcpy(a, host.data(), n, NSIM_MEMCPY_HOST_TO_DEVICE));
  CHECK_NEAR(queue_time(0), h2d, 1e-12);
  CHECK_OK(nsimMemcpy(b, a, n, NSIM_MEMCPY_DEVICE_TO_DEVICE));
  CHECK_NEAR(queue_time(0), h2d + d2d, 1e-12);
  CHECK_OK(nsimMemcpy(host.data(), b, n, NSIM_MEMCPY_DEVICE_TO_HOST));
  CHECK_NEAR(queue_time(0), 2 * h2d + d2d, 1e-12);
  CHECK_OK(nsimMemset(a, 0, n));
  const double memset_ns = n / p.hbm_bandwidth * 1e9 + p.dma_fixed_overhead_ns;
  CHECK_NEAR(queue_time(0), 2 * h2d + d2d + memset_ns, 1e-12);
  CHECK_EQ(queue_time(1), 0.0);  // other devices untouched

  nsimTimelineRecord r[8];
  size_t written = 0;
  CHECK_OK(nsimTimelineGetRecords(0, r, 8, &written));
  REQUIRE(written == 4);
  CHECK_EQ(std::string(nsimGetName(r[0].name_id)), std::string("memcpy_h2d"));
  CHECK_EQ(std::string(nsimGetName(r[1].name_id)), std::string("memcpy_d2d"));
  CHECK_EQ(std::string(nsimGetName(r[2].name_id)), std::string("memcpy_d2h"));
  CHECK_EQ(std::string(nsimGetName(r[3].name_id)), std::string("memset"));
  CHECK_EQ(r[0].kind, uint32_t(NSIM_LAUNCH_MEMCPY));
  CHECK_EQ(r[3].kind, uint32_t(NSIM_LAUNCH_MEMSET));
  CHECK_EQ(r[2].bytes, uint64_t(n));
  CHECK_EQ(r[1].start_ns, r[0].end_ns);
  CHECK_OK(nsimFree(a));
  CHECK_OK(nsimFree(b));
}

TEST(peer_copies_use_hbm_on_one_chip_and_the_chip_link_across_chips) {
  setenv("NEURON_SIM_NUM_CHIPS", "2", 1);
  REQUIRE_OK(nsimInit());
  const nsimDeviceProperties p = props(0);
  const size_t n = 4u << 20;
  std::vector<uint8_t> in(n), out(n);
  std::iota(in.begin(), in.end(), 0);
  void *d0, *d1, *d5;
  REQUIRE_OK(nsimMalloc(0, n, &d0));
  REQUIRE_OK(nsimMalloc(1, n, &d1));
  REQUIRE_OK(nsimMalloc(5, n, &d5));  // chip 1
  CHECK_OK(nsimMemcpy(d0, in.data(), n, NSIM_MEMCPY_HOST_TO_DEVICE));
  CHECK_OK(nsimMemcpy(d1, d0, n, NSIM_MEMCPY_DEVICE_TO_DEVICE));
  // Synchronous peer copies run on the destination's default queue.
  CHECK_NEAR(queue_time(1), n / p.hbm_bandwidth * 1e9 + p.dma_fixed_overhead_ns, 1e-12);
  CHECK_OK(nsimMemcpy(d5, d1, n, NSIM_MEMCPY_DEFAULT));
  CHECK_NEAR(queue_time(5), n / p.chip_link_bandwidth * 1e9 + p.dma_fixed_overhead_ns, 1e-12);
  CHECK_OK(nsimMemcpy(out.data(), d5, n, NSIM_MEMCPY_DEVICE_TO_HOST));
  CHECK(in == out);
  nsimCounters c;
  REQUIRE_OK(nsimGetCounters(5, &c));
  CHECK_EQ(c.memcpy_d2d, 1u);
  CHECK_EQ(c.memcpy_d2h, 1u);
  for (void* x : {d0, d1, d5}) CHECK_OK(nsimFree(x));
}

TEST(overlapping_copies_inside_one_allocation_behave_like_memmove) {
  REQUIRE_OK(nsimInit());
  std::vector<uint8_t> in(1024), out(1024), ref(1024);
  std::iota(in.begin(), in.end(), 0);
  void* a;
  REQUIRE_OK(nsimMalloc(0, 1024, &a));
  CHECK_OK(nsimMemcpy(a, in.data(), 1024, NSIM_MEMCPY_HOST_TO_DEVICE));
  CHECK_OK(nsimMemcpy(static_cast<char*>(a) + 10, a, 500, NSIM_MEMCPY_DEVICE_TO_DEVICE));
  ref = in;
  memmove(ref.data() + 10, ref.data(), 500);
  CHECK_OK(nsimMemcpy(out.data(), a, 1024, NSIM_MEMCPY_DEVICE_TO_HOST));
  CHECK(out == ref);
  CHECK_OK(nsimFree(a));
}

TEST(wrong_copy_kinds_are_rejected_naming_the_pointers) {
  REQUIRE_OK(nsimInit());
  std::vector<uint8_t> host(64);
  void* d;
  REQUIRE_OK(nsimMalloc(2, 64, &d));
  CHECK_ERR(nsimMemcpy(host.data(), d, 64, NSIM_MEMCPY_HOST_TO_DEVICE), NSIM_ERROR_INVALID_COPY);
  std::string msg = nsimGetLastErrorMessage();
  CHECK_CONTAINS(msg, "kind NSIM_MEMCPY_HOST_TO_DEVICE does not match");
  CHECK_CONTAINS(msg, "is host memory");
  CHECK_CONTAINS(msg, "is device memory (neuron device 2)");
  CHECK_CONTAINS(msg, "use NSIM_MEMCPY_DEVICE_TO_HOST");
  CHECK_ERR(nsimMemcpy(d, host.data(), 64, NSIM_MEMCPY_DEVICE_TO_HOST), NSIM_ERROR_INVALID_COPY);
  CHECK_ERR(nsimMemcpy(d, host.data(), 64, NSIM_MEMCPY_DEVICE_TO_DEVICE), NSIM_ERROR_INVALID_COPY);
  CHECK_ERR(nsimMemcpy(host.data(), host.data() + 32, 8, NSIM_MEMCPY_DEVICE_TO_DEVICE),
            NSIM_ERROR_INVALID_COPY);
  CHECK_ERR(nsimMemcpy(d, d, 64, NSIM_MEMCPY_HOST_TO_HOST), NSIM_ERROR_INVALID_COPY);
  CHECK_ERR(nsimMemcpy(d, host.data(), 64, static_cast<nsimMemcpyKind>(9)), NSIM_ERROR_INVALID_VALUE);
  CHECK_ERR(nsimMemcpy(nullptr, host.data(), 64, NSIM_MEMCPY_DEFAULT), NSIM_ERROR_INVALID_VALUE);
  nsimCounters c;
  REQUIRE_OK(nsimGetCounters(2, &c));
  CHECK_EQ(c.memcpy_h2d + c.memcpy_d2h + c.memcpy_d2d, 0u);
  CHECK_EQ(queue_time(2), 0.0);
  CHECK_OK(nsimFree(d));
}

TEST(out_of_bounds_and_freed_ranges_are_rejected) {
  REQUIRE_OK(nsimInit());
  std::vector<uint8_t> host(4096);
  void *a, *b;
  REQUIRE_OK(nsimMalloc(0, 1000, &a));
  REQUIRE_OK(nsimMalloc(0, 1000, &b));
  CHECK_ERR(nsimMemcpy(a, host.data(), 1001, NSIM_MEMCPY_HOST_TO_DEVICE), NSIM_ERROR_INVALID_COPY);
  std::string msg = nsimGetLastErrorMessage();
  CHECK_CONTAINS(msg, "dst range");
  CHECK_CONTAINS(msg, "runs past the end of its allocation");
  CHECK_CONTAINS(msg, "size=1000");
  CHECK_ERR(nsimMemcpy(host.data(), static_cast<char*>(a) + 600, 401, NSIM_MEMCPY_DEVICE_TO_HOST),
            NSIM_ERROR_INVALID_COPY);
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "offset 600, 400 bytes left");
  CHECK_OK(nsimMemcpy(host.data(), static_cast<char*>(a) + 600, 400, NSIM_MEMCPY_DEVICE_TO_HOST));
  CHECK_OK(nsimFree(b));
  CHECK_ERR(nsimMemcpy(b, a, 16, NSIM_MEMCPY_DEVICE_TO_DEVICE), NSIM_ERROR_INVALID_COPY);
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "not inside any live allocation");
  CHECK_ERR(nsimMemset(a, 0, 1001), NSIM_ERROR_INVALID_VALUE);
  CHECK_ERR(nsimMemset(host.data(), 0, 10), NSIM_ERROR_INVALID_POINTER);
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "not a device address");
  CHECK_OK(nsimFree(a));
}

TEST(memset_writes_bytes_and_counts) {
  REQUIRE_OK(nsimInit());
  void* a;
  REQUIRE_OK(nsimMalloc(1, 3000, &a));
  CHECK_OK(nsimMemset(a, 0xAB, 3000));
  CHECK_OK(nsimMemset(static_cast<char*>(a) + 1000, 0x11, 10));
  std::vector<uint8_t> out(3000);
  CHECK_OK(nsimMemcpy(out.data(), a, 3000, NSIM_MEMCPY_DEVICE_TO_HOST));
  for (size_t i = 0; i < out.size(); ++i) {
    const uint8_t want = (i >= 1000 && i < 1010) ? 0x11 : 0xAB;
    if (out[i] != want) {
      CHECK_EQ(int(out[i]), int(want));
      break;
    }
  }
  nsimCounters c;
  REQUIRE_OK(nsimGetCounters(1, &c));
  CHECK_EQ(c.memsets, 2u);
  CHECK_OK(nsimFree(a));
}

TEST(async_copies_run_on_the_given_queue) {
  REQUIRE_OK(nsimInit());
  const size_t n = 1 << 16;
  std::vector<uint8_t> host(n, 5), out(n);
  void *d0, *d1;
  REQUIRE_OK(nsimMalloc(0, n, &d0));
  REQUIRE_OK(nsimMalloc(1, n, &d1));
  nsimQueue q0, q2;
  REQUIRE_OK(nsimQueueCreate(0, 0, &q0));
  REQUIRE_OK(nsimQueueCreate(2, 0, &q2));
  CHECK_OK(nsimMemcpyAsync(d0, host.data(), n, NSIM_MEMCPY_HOST_TO_DEVICE, q0));
  double t = 0, model = 0;
  CHECK_OK(nsimQueueGetTime(q0, &t));
  CHECK_OK(nsimModelCopyDuration(0, NSIM_MEMCPY_HOST_TO_DEVICE, n, &model));
  CHECK_NEAR(t, model, 1e-12);
  CHECK_EQ(queue_time(0), 0.0);
  // A device-to-device copy may run on either side's queue.
  CHECK_OK(nsimMemcpyAsync(d1, d0, n, NSIM_MEMCPY_DEVICE_TO_DEVICE, q0));
  CHECK_ERR(nsimMemcpyAsync(d1, d0, n, NSIM_MEMCPY_DEVICE_TO_DEVICE, q2), NSIM_ERROR_INVALID_VALUE);
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "takes no part in this copy");
  CHECK_ERR(nsimMemsetAsync(d1, 0, n, q0), NSIM_ERROR_INVALID_VALUE);
  CHECK_OK(nsimMemsetAsync(d0, 7, n, q0));
  CHECK_OK(nsimMemcpyAsync(out.data(), d0, n, NSIM_MEMCPY_DEVICE_TO_HOST, q0));
  CHECK(out == std::vector<uint8_t>(n, 7));
  CHECK_OK(nsimQueueDestroy(q0));
  CHECK_ERR(nsimMemcpyAsync(d0, host.data(), n, NSIM_MEMCPY_HOST_TO_DEVICE, q0),
            NSIM_ERROR_INVALID_QUEUE);
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "destroyed");
  CHECK_OK(nsimQueueDestroy(q2));
  CHECK_OK(nsimFree(d0));
  CHECK_OK(nsimFree(d1));
}

NSIM_TEST_MAIN()
