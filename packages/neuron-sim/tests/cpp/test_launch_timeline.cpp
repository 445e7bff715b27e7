// Launches, interned names, the per-device timeline ring and the Chrome trace export.
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "check.h"

static uint32_t name(const char* s) {
  uint32_t id = 0;
  nsimRegisterName(s, &id);
  return id;
}

static nsimQueue default_queue(int device) {
  nsimQueue q = nullptr;
  nsimQueueGetDefault(device, &q);
  return q;
}

TEST(names_are_interned_once) {
  REQUIRE_OK(nsimInit());
  uint32_t a = 0, b = 0, c = 0;
  CHECK_OK(nsimRegisterName("aten::add", &a));
  CHECK_OK(nsimRegisterName("aten::mul", &b));
  CHECK_OK(nsimRegisterName("aten::add", &c));
  CHECK_EQ(a, c);
  CHECK(a != b);
  CHECK_EQ(std::string(nsimGetName(a)), std::string("aten::add"));
  CHECK(nsimGetName(0xFFFFFFF0u) == nullptr);
  CHECK_ERR(nsimRegisterName(nullptr, &a), NSIM_ERROR_INVALID_VALUE);
  // Ids survive a restart, so layers above may cache them.
  nsimShutdown();
  REQUIRE_OK(nsimInit());
  CHECK_OK(nsimRegisterName("aten::add", &c));
  CHECK_EQ(a, c);
}

struct Scale {
  float* data;
  int n;
  float factor;
};

static int scale(void* user) {
  auto* s = static_cast<Scale*>(user);
  for (int i = 0; i < s->n; ++i) s->data[i] *= s->factor;
  return 0;
}

static int refuse(void*) { return 7; }

TEST(launch_runs_the_host_function_on_device_bytes_and_records_it) {
  REQUIRE_OK(nsimInit());
  const int n = 256;
  std::vector<float> host(n);
  for (int i = 0; i < n; ++i) host[i] = static_cast<float>(i);
  void* d = nullptr;
  REQUIRE_OK(nsimMalloc(1, n * sizeof(float), &d));
  REQUIRE_OK(nsimMemcpy(d, host.data(), n * sizeof(float), NSIM_MEMCPY_HOST_TO_DEVICE));
  void* alias = nullptr;
  REQUIRE_OK(nsimDeviceToHost(d, n * sizeof(float), &alias));
  Scale s{static_cast<float*>(alias), n, 2.5f};
  nsimQueue q;
  REQUIRE_OK(nsimQueueCreate(1, 0, &q));
  uint64_t qid = 0;
  REQUIRE_OK(nsimQueueGetInfo(q, nullptr, nullptr, &qid));
  const uint32_t k = name("scale_kernel");
  CHECK_OK(nsimLaunch(q, k, NSIM_LAUNCH_KERNEL, 4000.0, scale, &s));
  std::vector<float> out(n);
  REQUIRE_OK(nsimMemcpy(out.data(), d, n * sizeof(float), NSIM_MEMCPY_DEVICE_TO_HOST));
  for (int i = 0; i < n; ++i) {
    if (out[i] != 2.5f * i) {
      CHECK_EQ(out[i], 2.5f * i);
      break;
    }
  }
  CHECK_ERR(nsimLaunch(q, k, NSIM_LAUNCH_FALLBACK, 10.0, refuse, nullptr),
            NSIM_ERROR_LAUNCH_FAILED);
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "'scale_kernel' on neuron device 1 returned 7");
  CHECK_ERR(nsimLaunch(q, k, NSIM_LAUNCH_KERNEL, -1.0, nullptr, nullptr), NSIM_ERROR_INVALID_VALUE);
  CHECK_ERR(nsimLaunch(q, k, NSIM_LAUNCH_KERNEL, NAN, nullptr, nullptr), NSIM_ERROR_INVALID_VALUE);
  CHECK_ERR(nsimLaunch(q, k, static_cast<nsimLaunchKind>(42), 1.0, nullptr, nullptr),
            NSIM_ERROR_INVALID_VALUE);
  nsimTimelineRecord r[4];
  size_t written = 0;
  CHECK_OK(nsimTimelineGetRecords(1, r, 4, &written));
  REQUIRE(written == 3);  // copy-in, the successful launch, copy-out
  CHECK_EQ(r[1].name_id, k);
  CHECK_EQ(r[1].kind, uint32_t(NSIM_LAUNCH_KERNEL));
  CHECK_EQ(r[1].device, 1);
  CHECK_EQ(r[1].queue_id, qid);
  // The queue was created after the copy-in, so it starts at the device's time.
  CHECK_EQ(r[1].start_ns, r[0].end_ns);
  CHECK_EQ(r[1].end_ns, r[0].end_ns + 4000.0);
  CHECK_EQ(std::string(nsimGetName(r[2].name_id)), std::string("memcpy_d2h"));
  CHECK_EQ(r[1].bytes, 0u);
  nsimCounters c;
  REQUIRE_OK(nsimGetCounters(1, &c));
  CHECK_EQ(c.launches, 1u);
  CHECK_OK(nsimQueueDestroy(q));
  CHECK_OK(nsimFree(d));
}

TEST(timeline_ring_keeps_the_newest_records) {
  setenv("NEURON_SIM_TIMELINE_CAPACITY", "5", 1);
  REQUIRE_OK(nsimInit());
  const uint32_t k = name("tick");
  nsimQueue q = default_queue(0);
  for (int i = 0; i < 12; ++i) CHECK_OK(nsimLaunch(q, k, NSIM_LAUNCH_KERNEL, 1.0, nullptr, nullptr));
  size_t count = 0;
  CHECK_OK(nsimTimelineGetCount(0, &count));
  CHECK_EQ(count, size_t(5));
  nsimTimelineRecord r[8];
  size_t written = 0;
  CHECK_OK(nsimTimelineGetRecords(0, r, 8, &written));
  REQUIRE(written == 5);
  for (int i = 0; i < 5; ++i) CHECK_EQ(r[i].start_ns, double(7 + i));  // oldest first
  CHECK_OK(nsimTimelineGetRecords(0, r, 2, &written));
  REQUIRE(written == 2);
  CHECK_EQ(r[0].start_ns, 7.0);
  CHECK_EQ(r[1].start_ns, 8.0);
  CHECK_OK(nsimTimelineGetRecords(0, nullptr, 0, &written));
  CHECK_EQ(written, size_t(0));
  CHECK_ERR(nsimTimelineGetRecords(4, r, 8, &written), NSIM_ERROR_INVALID_DEVICE);
}

TEST(timeline_clear_and_disable) {
  REQUIRE_OK(nsimInit());
  const uint32_t k = name("tick");
  CHECK_OK(nsimLaunch(default_queue(0), k, NSIM_LAUNCH_KERNEL, 1.0, nullptr, nullptr));
  CHECK_OK(nsimLaunch(default_queue(1), k, NSIM_LAUNCH_KERNEL, 1.0, nullptr, nullptr));
  size_t count = 0;
  CHECK_OK(nsimTimelineClear(0));
  CHECK_OK(nsimTimelineGetCount(0, &count));
  CHECK_EQ(count, size_t(0));
  CHECK_OK(nsimTimelineGetCount(1, &count));
  CHECK_EQ(count, size_t(1));
  CHECK_OK(nsimTimelineClear(-1));
  CHECK_OK(nsimTimelineGetCount(1, &count));
  CHECK_EQ(count, size_t(0));
  CHECK_ERR(nsimTimelineClear(17), NSIM_ERROR_INVALID_DEVICE);
  CHECK_OK(nsimTimelineSetEnabled(0));
  CHECK_OK(nsimLaunch(default_queue(0), k, NSIM_LAUNCH_KERNEL, 5.0, nullptr, nullptr));
  CHECK_OK(nsimTimelineGetCount(0, &count));
  CHECK_EQ(count, size_t(0));
  double t = 0;
  CHECK_OK(nsimQueueGetTime(default_queue(0), &t));
  CHECK_EQ(t, 6.0);  // the clock still advances
  CHECK_OK(nsimTimelineSetEnabled(1));
  CHECK_OK(nsimLaunch(default_queue(0), k, NSIM_LAUNCH_KERNEL, 5.0, nullptr, nullptr));
  CHECK_OK(nsimTimelineGetCount(0, &count));
  CHECK_EQ(count, size_t(1));
  nsimShutdown();
  setenv("NEURON_SIM_TIMELINE", "off", 1);
  REQUIRE_OK(nsimInit());
  CHECK_OK(nsimLaunch(default_queue(0), k, NSIM_LAUNCH_KERNEL, 5.0, nullptr, nullptr));
  CHECK_OK(nsimTimelineGetCount(0, &count));
  CHECK_EQ(count, size_t(0));
}

static std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(chrome_trace_lists_every_record_in_microseconds) {
  REQUIRE_OK(nsimInit());
  nsimQueue q;
  REQUIRE_OK(nsimQueueCreate(2, 0, &q));
  uint64_t qid = 0;
  REQUIRE_OK(nsimQueueGetInfo(q, nullptr, nullptr, &qid));
  CHECK_OK(nsimLaunch(q, name("matmul \"tiled\""), NSIM_LAUNCH_KERNEL, 2500.0, nullptr, nullptr));
  CHECK_OK(nsimLaunch(q, name("all_reduce"), NSIM_LAUNCH_COLLECTIVE, 1000.0, nullptr, nullptr));
  void* d = nullptr;
  REQUIRE_OK(nsimMalloc(0, 1024, &d));
  REQUIRE_OK(nsimMemset(d, 0, 1024));
  char path[] = "/tmp/nsim_trace_XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  CHECK_OK(nsimTimelineExportChromeTrace(path));
  const std::string json = read_file(path);
  unlink(path);
  CHECK_CONTAINS(json, "\"traceEvents\":[");
  CHECK_CONTAINS(json, "\"name\":\"neuron:2 (trn2 core 2)\"");
  CHECK_CONTAINS(json, "\"name\":\"process_name\"");
  CHECK_CONTAINS(json, "{\"ph\":\"X\",\"name\":\"matmul \\\"tiled\\\"\",\"pid\":2,\"tid\":" +
                           std::to_string(qid) + ",\"ts\":0.000,\"dur\":2.500,"
                           "\"args\":{\"kind\":\"kernel\",\"bytes\":0,\"model\":\"unspecified\",");
  CHECK_CONTAINS(json, "\"ts\":2.500,\"dur\":1.000,\"args\":{\"kind\":\"collective\"");
  CHECK_CONTAINS(json, "\"name\":\"memset\",\"pid\":0");
  CHECK_CONTAINS(json, "\"kind\":\"collective\",\"bytes\":0,\"model\":\"interconnect\"");
  CHECK_CONTAINS(json, "\"bytes\":1024,\"model\":\"copy\",\"flops\":0,\"bytes_read\":0,\"bytes_written\":1024");
  int depth = 0, min_depth = 0;
  for (char ch : json) {
    depth += (ch == '{' || ch == '[') - (ch == '}' || ch == ']');
    min_depth = std::min(min_depth, depth);
  }
  CHECK_EQ(depth, 0);
  CHECK_EQ(min_depth, 0);
  CHECK_ERR(nsimTimelineExportChromeTrace("/nonexistent-dir/trace.json"), NSIM_ERROR_INVALID_VALUE);
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "/nonexistent-dir/trace.json");
  CHECK_OK(nsimFree(d));
  CHECK_OK(nsimQueueDestroy(q));
}

NSIM_TEST_MAIN()
