// Environment registry, hardware profiles, device enumeration and init/shutdown.
// Reference values are the published figures of the fact sheets (facts/trainium-and-torchneuron.md
// §5, facts/trainium-calibration.md §4).
#include <cstdlib>
#include <set>
#include <string>

#include "check.h"

static const uint64_t kGiB = 1ull << 30;

TEST(calls_before_init_fail_with_not_initialized) {
  CHECK(!nsimIsInitialized());
  int n = 0;
  void* p = nullptr;
  nsimQueue q = nullptr;
  CHECK_ERR(nsimGetDeviceCount(&n), NSIM_ERROR_NOT_INITIALIZED);
  CHECK_ERR(nsimMalloc(0, 16, &p), NSIM_ERROR_NOT_INITIALIZED);
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "nsimInit");
  CHECK_ERR(nsimQueueGetDefault(0, &q), NSIM_ERROR_NOT_INITIALIZED);
  CHECK_ERR(nsimMallocHost(16, &p), NSIM_ERROR_NOT_INITIALIZED);
  CHECK_EQ(nsimGetLastError(), NSIM_ERROR_NOT_INITIALIZED);
  CHECK_EQ(nsimGetLastError(), NSIM_SUCCESS);  // cleared by the previous call
  CHECK_EQ(std::string(nsimGetLastErrorMessage()), std::string(""));
}

TEST(default_configuration_is_one_trn2_chip_with_lnc2) {
  REQUIRE_OK(nsimInit());
  CHECK(nsimIsInitialized());
  CHECK_OK(nsimInit());  // idempotent
  int n = 0;
  CHECK_OK(nsimGetDeviceCount(&n));
  REQUIRE(n == 4);
  for (int d = 0; d < n; ++d) {
    nsimDeviceProperties p;
    REQUIRE_OK(nsimGetDeviceProperties(d, &p));
    CHECK_EQ(std::string(p.profile), std::string("trn2"));
    CHECK_EQ(std::string(p.name), std::string("Trainium2 NC-v3 (LNC=2)"));
    CHECK_EQ(p.device, d);
    CHECK_EQ(p.logical_core, d);
    CHECK_EQ(p.chip, 0);
    CHECK_EQ(p.lnc, 2);
    CHECK_EQ(p.physical_cores_per_chip, 8);
    CHECK_EQ(p.logical_cores_per_chip, 4);
    CHECK_EQ(p.hbm_capacity, 96 * kGiB / 4);         // §5.1: 96 GiB per chip
    CHECK_NEAR(p.hbm_bandwidth, 2.9e12 / 4, 1e-12);  // §5.1: 2.9 TB/s per chip
    CHECK_NEAR(p.peak_flops_bf16, 2 * 79e12, 1e-12);  // §5.2: 79 TF per NC-v3
    CHECK_NEAR(p.peak_flops_fp8, 2 * 158e12, 1e-12);
    CHECK_NEAR(p.peak_flops_fp32, 2 * 20e12, 1e-12);
    CHECK_NEAR(p.vector_flops_fp32, 2 * 1.0e12, 1e-12);
    CHECK_NEAR(p.tensor_clock_hz, 2.4e9, 1e-12);
    CHECK_NEAR(p.vector_clock_hz, 0.96e9, 1e-12);
    CHECK_EQ(p.sbuf_partitions, 128);
    CHECK_EQ(p.sbuf_bytes_per_partition, 224u * 1024);  // 28 MiB SBUF
    CHECK_EQ(p.psum_bytes_per_partition * 128, 2u << 20);  // 2 MiB PSUM
    CHECK_EQ(p.psum_banks, 8);
    CHECK_EQ(p.dma_engines, 16);
    CHECK_NEAR(p.dma_engine_bandwidth, 23e9, 1e-12);  // 23 B/ns
    CHECK_NEAR(p.dma_fixed_overhead_ns, 1300, 1e-12);
    CHECK_NEAR(p.launch_overhead_ns, 3000, 1e-12);
    CHECK_NEAR(p.chip_link_bandwidth, 1.28e12, 1e-12);
    CHECK_NEAR(p.host_link_bandwidth, 63e9, 1e-12);
    CHECK_EQ(p.compute_capability_major, 3);
  }
  nsimDeviceProperties p;
  CHECK_ERR(nsimGetDeviceProperties(4, &p), NSIM_ERROR_INVALID_DEVICE);
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "NEURON_RT_VISIBLE_CORES");
  CHECK_ERR(nsimGetDeviceProperties(-1, &p), NSIM_ERROR_INVALID_DEVICE);
}

TEST(trn1_profile_has_two_cores_and_fixed_lnc) {
  setenv("NEURON_SIM_PROFILE", "trn1", 1);
  REQUIRE_OK(nsimInit());
  int n = 0;
  CHECK_OK(nsimGetDeviceCount(&n));
  CHECK_EQ(n, 2);
  nsimDeviceProperties p;
  REQUIRE_OK(nsimGetDeviceProperties(1, &p));
  CHECK_EQ(p.lnc, 1);
  CHECK_EQ(p.hbm_capacity, 16 * kGiB);               // 32 GiB / 2 cores
  CHECK_NEAR(p.hbm_bandwidth, 820e9 / 2, 1e-12);
  CHECK_NEAR(p.peak_flops_bf16, 92e12, 1e-12);
  CHECK_NEAR(p.dma_engine_bandwidth, 17e9, 1e-12);
  CHECK_NEAR(p.host_link_bandwidth, 31.5e9, 1e-12);
  CHECK_EQ(p.compute_capability_major, 2);
  CHECK_EQ(std::string(p.name), std::string("Trainium NC-v2 (LNC=1)"));
  nsimShutdown();
  setenv("NEURON_LOGICAL_NC_CONFIG", "2", 1);
  CHECK_ERR(nsimInit(), NSIM_ERROR_CONFIG);
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "NEURON_LOGICAL_NC_CONFIG='2'");
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "only 1");
}

TEST(trn3_with_lnc1_has_eight_devices) {
  setenv("NEURON_SIM_PROFILE", "trn3", 1);
  setenv("NEURON_LOGICAL_NC_CONFIG", "1", 1);
  REQUIRE_OK(nsimInit());
  int n = 0;
  CHECK_OK(nsimGetDeviceCount(&n));
  CHECK_EQ(n, 8);
  nsimDeviceProperties p;
  REQUIRE_OK(nsimGetDeviceProperties(7, &p));
  CHECK_EQ(p.hbm_capacity, 144 * kGiB / 8);
  CHECK_NEAR(p.hbm_bandwidth, 4.9e12 / 8, 1e-12);
  CHECK_NEAR(p.peak_flops_bf16, 79e12, 1e-12);
  CHECK_NEAR(p.peak_flops_fp8, 315e12, 1e-12);
  CHECK_NEAR(p.dma_engine_bandwidth, 33e9, 1e-12);
  CHECK_EQ(p.compute_capability_major, 4);
  CHECK_EQ(p.logical_core, 7);
}

TEST(multiple_chips_number_cores_chip_by_chip) {
  setenv("NEURON_SIM_NUM_CHIPS", "2", 1);
  REQUIRE_OK(nsimInit());
  int n = 0;
  CHECK_OK(nsimGetDeviceCount(&n));
  REQUIRE(n == 8);
  nsimDeviceProperties p;
  REQUIRE_OK(nsimGetDeviceProperties(5, &p));
  CHECK_EQ(p.chip, 1);
  CHECK_EQ(p.logical_core, 5);
  REQUIRE_OK(nsimGetDeviceProperties(3, &p));
  CHECK_EQ(p.chip, 0);
}

TEST(visible_cores_select_devices) {
  setenv("NEURON_SIM_NUM_CHIPS", "2", 1);
  setenv("NEURON_RT_VISIBLE_CORES", "0-3", 1);
  REQUIRE_OK(nsimInit());
  int n = 0;
  CHECK_OK(nsimGetDeviceCount(&n));
  CHECK_EQ(n, 4);
  nsimShutdown();
  setenv("NEURON_RT_VISIBLE_CORES", "1,6", 1);
  REQUIRE_OK(nsimInit());
  CHECK_OK(nsimGetDeviceCount(&n));
  REQUIRE(n == 2);
  nsimDeviceProperties p;
  REQUIRE_OK(nsimGetDeviceProperties(0, &p));
  CHECK_EQ(p.logical_core, 1);
  CHECK_EQ(p.chip, 0);
  REQUIRE_OK(nsimGetDeviceProperties(1, &p));
  CHECK_EQ(p.logical_core, 6);
  CHECK_EQ(p.chip, 1);
  nsimShutdown();
  setenv("NEURON_RT_VISIBLE_CORES", "5,0-1", 1);  // listed out of order: devices ascend
  REQUIRE_OK(nsimInit());
  CHECK_OK(nsimGetDeviceCount(&n));
  REQUIRE(n == 3);
  REQUIRE_OK(nsimGetDeviceProperties(2, &p));
  CHECK_EQ(p.logical_core, 5);
}

TEST(invalid_values_fail_with_config_error_naming_the_variable) {
  struct Bad {
    const char* var;
    const char* value;
    const char* accepted;
  };
  const Bad cases[] = {
      {"NEURON_SIM_PROFILE", "trn9", "trn1, trn2 or trn3"},
      {"NEURON_SIM_NUM_CHIPS", "0", "1 to 64"},
      {"NEURON_SIM_NUM_CHIPS", "two", "1 to 64"},
      {"NEURON_LOGICAL_NC_CONFIG", "3", "1 or 2"},
      {"NEURON_RT_VISIBLE_CORES", "4", "does not exist"},
      {"NEURON_RT_VISIBLE_CORES", "0-", "'0-3'"},
      {"NEURON_RT_VISIBLE_CORES", "1,1", "listed twice"},
      {"NEURON_RT_VISIBLE_CORES", "3-1", "range end before its start"},
      {"NEURON_RT_VISIBLE_CORES", "a", "'1,3'"},
      {"NEURON_SIM_HBM_CAPACITY", "12X", "K/M/G/T"},
      {"NEURON_SIM_HBM_CAPACITY", "100", "from 4096"},
      {"NEURON_SIM_TIMELINE", "maybe", "true/false"},
      {"NEURON_SIM_TIMELINE_CAPACITY", "0", "from 1"},
  };
  for (const Bad& b : cases) {
    check::reset_environment();
    setenv(b.var, b.value, 1);
    CHECK_ERR(nsimInit(), NSIM_ERROR_CONFIG);
    const std::string msg = nsimGetLastErrorMessage();
    CHECK_CONTAINS(msg, std::string(b.var) + "='" + b.value + "'");
    CHECK_CONTAINS(msg, b.accepted);
    CHECK(!nsimIsInitialized());
  }
}

TEST(failed_init_is_sticky_until_shutdown) {
  setenv("NEURON_SIM_PROFILE", "bogus", 1);
  CHECK_ERR(nsimInit(), NSIM_ERROR_CONFIG);
  setenv("NEURON_SIM_PROFILE", "trn2", 1);
  CHECK_ERR(nsimInit(), NSIM_ERROR_CONFIG);  // the first call's error
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "bogus");
  CHECK_OK(nsimShutdown());
  CHECK_OK(nsimInit());
}

TEST(hbm_capacity_override_sets_device_memory) {
  setenv("NEURON_SIM_HBM_CAPACITY", "64M", 1);
  REQUIRE_OK(nsimInit());
  size_t free_bytes = 0, total = 0;
  CHECK_OK(nsimMemGetInfo(1, &free_bytes, &total));
  CHECK_EQ(total, size_t(64) << 20);
  CHECK_EQ(free_bytes, size_t(64) << 20);
  nsimDeviceProperties p;
  REQUIRE_OK(nsimGetDeviceProperties(0, &p));
  CHECK_EQ(p.hbm_capacity, uint64_t(64) << 20);
  nsimShutdown();
  setenv("NEURON_SIM_HBM_CAPACITY", "1GiB", 1);
  REQUIRE_OK(nsimInit());
  CHECK_OK(nsimMemGetInfo(0, &free_bytes, &total));
  CHECK_EQ(total, size_t(1) << 30);
}

TEST(env_registry_lists_every_variable_with_type_and_default) {
  const std::set<std::string> expected = {
      "NEURON_SIM_PROFILE",      "NEURON_SIM_NUM_CHIPS",        "NEURON_LOGICAL_NC_CONFIG",
      "NEURON_RT_VISIBLE_CORES", "NEURON_SIM_HBM_CAPACITY",     "NEURON_SIM_TIMELINE",
      "NEURON_SIM_TIMELINE_CAPACITY", "NEURON_SIM_FAULT_ALLOC",      "NEURON_SIM_FAULT_KERNEL",
      "NEURON_SIM_FAULT_DEVICE_LOST"};
  std::set<std::string> seen;
  for (size_t i = 0; i < nsimEnvVarCount(); ++i) {
    const nsimEnvVar* v = nsimEnvVarGet(i);
    REQUIRE(v != nullptr);
    seen.insert(v->name);
    CHECK(v->default_value && *v->default_value);
    CHECK(v->meaning && strlen(v->meaning) > 10);
    if (std::string(v->name) == "NEURON_RT_VISIBLE_CORES") CHECK_EQ(v->type, NSIM_ENV_CORE_LIST);
    if (std::string(v->name) == "NEURON_SIM_HBM_CAPACITY") CHECK_EQ(v->type, NSIM_ENV_BYTES);
    if (std::string(v->name) == "NEURON_SIM_TIMELINE") CHECK_EQ(v->type, NSIM_ENV_BOOL);
    if (std::string(v->name) == "NEURON_SIM_PROFILE") {
      CHECK_EQ(std::string(v->default_value), std::string("trn2"));
    }
  }
  CHECK(seen == expected);
  CHECK(nsimEnvVarGet(nsimEnvVarCount()) == nullptr);
}

TEST(profile_properties_are_independent_of_the_active_configuration) {
  CHECK_EQ(nsimProfileCount(), size_t(3));
  std::set<std::string> names;
  for (size_t i = 0; i < nsimProfileCount(); ++i) names.insert(nsimProfileName(i));
  CHECK((names == std::set<std::string>{"trn1", "trn2", "trn3"}));
  CHECK(nsimProfileName(3) == nullptr);
  nsimDeviceProperties p;
  REQUIRE_OK(nsimProfileGetProperties("trn2", 1, &p));
  CHECK_EQ(p.lnc, 1);
  CHECK_EQ(p.logical_cores_per_chip, 8);
  CHECK_EQ(p.hbm_capacity, 12 * kGiB);
  CHECK_NEAR(p.peak_flops_bf16, 79e12, 1e-12);
  REQUIRE_OK(nsimProfileGetProperties("trn3", 0, &p));
  CHECK_EQ(p.lnc, 2);
  CHECK_ERR(nsimProfileGetProperties("trn1", 2, &p), NSIM_ERROR_INVALID_VALUE);
  CHECK_ERR(nsimProfileGetProperties("trn4", 0, &p), NSIM_ERROR_INVALID_VALUE);
  CHECK_CONTAINS(nsimGetLastErrorMessage(), "trn4");
}

TEST(shutdown_releases_everything_and_init_starts_fresh) {
  REQUIRE_OK(nsimInit());
  void* p = nullptr;
  REQUIRE_OK(nsimMalloc(0, 1 << 20, &p));
  nsimQueue q;
  REQUIRE_OK(nsimQueueCreate(0, 0, &q));
  CHECK_OK(nsimShutdown());
  CHECK(!nsimIsInitialized());
  CHECK_ERR(nsimFree(p), NSIM_ERROR_NOT_INITIALIZED);
  CHECK_OK(nsimShutdown());  // shutting down twice is harmless
  REQUIRE_OK(nsimInit());
  nsimCounters c;
  REQUIRE_OK(nsimGetCounters(0, &c));
  CHECK_EQ(c.live_allocations, 0u);
  CHECK_EQ(c.live_queues, 0u);
  CHECK_EQ(c.total_allocations, 0u);
  double t = -1;
  CHECK_OK(nsimDeviceGetTime(0, &t));
  CHECK_EQ(t, 0.0);
}

NSIM_TEST_MAIN()
