// torch.profiler's device activity for `neuron`: a Kineto PrivateUse1 activity profiler that
// turns neuron_sim's timeline records of the profiled window into kernel, memcpy and memset
// activities, one lane per device queue plus one per engine for kernel schedules.
//
// Linking: while a session records, Kineto pushes each op's correlation id on the op's thread;
// the profiler forwards it to neuron_sim, which stamps it on every record placed meanwhile. A
// record's activity is then linked to that op (its NEURON time in key_averages) and gets a flow
// arrow from a launch event on the op's thread.
//
// Time: a record's simulated start/end are ns since the runtime started. Each is placed on the
// host clock (the clock of torch's CPU events) no earlier than the host time of its launch, and
// no earlier than the end of the record before it on the same queue plus their simulated gap:
// durations and queue order are the simulated ones, and no activity starts before its op.
//
// This translation unit alone sees Kineto's headers (built with USE_KINETO, see CMakeLists.txt).
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <GenericTraceActivity.h>
#include <IActivityProfiler.h>
#include <ThreadUtil.h>
#include <libkineto.h>
#include <output_base.h>

#include <neuron_sim/neuron_sim.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace torch_neuron {
namespace {

using libkineto::ActivityType;

constexpr int32_t kEngineLaneBase = 1 << 20;  // resource ids of engine lanes (above queue ids)
constexpr int kLinkAsyncCpuGpu = 2;           // Kineto's flow type for launch -> kernel arrows
const char* const kEngineNames[NSIM_ENGINE_COUNT] = {"TensorE", "VectorE", "ScalarE", "GpSimdE",
                                                     "DMA"};

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

const char* model_name(uint32_t m) {
  switch (m) {
    case NSIM_MODEL_KERNEL_SCHEDULE: return "kernel_schedule";
    case NSIM_MODEL_ROOFLINE: return "roofline";
    case NSIM_MODEL_HOST_ROUND_TRIP: return "host_round_trip";
    case NSIM_MODEL_COPY: return "copy";
    case NSIM_MODEL_INTERCONNECT: return "interconnect";
    default: return "unspecified";
  }
}

// Device activities are named "<launch> [<model>]": the op's own name would merge the kernel's
// row with the op's in key_averages, and the tag says where the duration comes from.
const char* model_tag(uint32_t m) {
  switch (m) {
    case NSIM_MODEL_KERNEL_SCHEDULE: return "kernel";
    case NSIM_MODEL_ROOFLINE: return "roofline";
    case NSIM_MODEL_HOST_ROUND_TRIP: return "host";
    case NSIM_MODEL_COPY: return "copy";
    case NSIM_MODEL_INTERCONNECT: return "ccl";
    default: return "device";
  }
}

const char* dtype_class_name(uint32_t d) {
  switch (d) {
    case NSIM_DTYPE_FP32: return "fp32";
    case NSIM_DTYPE_BF16: return "bf16";
    case NSIM_DTYPE_FP8: return "fp8";
    case NSIM_DTYPE_INT: return "int";
    default: return "none";
  }
}

// The trace span activities refer to; it outlives every trace buffer.
libkineto::TraceSpan& span() {
  static auto* s = new libkineto::TraceSpan(0, 0, "neuron");
  return *s;
}

class Session final : public libkineto::IActivityProfilerSession {
 public:
  void start() override {
    start_ns_ = now_ns();
    status_ = libkineto::TraceStatus::RECORDING;
  }
  void stop() override {
    stop_ns_ = now_ns();
    status_ = libkineto::TraceStatus::PROCESSING;
  }
  std::vector<std::string> errors() override { return errors_; }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, [](int32_t) -> const libkineto::ITraceActivity* { return nullptr; }, 0, 0);
  }

  void processTrace(libkineto::ActivityLogger& logger,
                    libkineto::getLinkedActivityCallback linked_of, int64_t, int64_t) override {
    if (stop_ns_ == 0) stop_ns_ = now_ns();
    int count = 0;
    if (nsimGetDeviceCount(&count) != NSIM_SUCCESS) {
      errors_.push_back(std::string("neuron: no device timeline: ") + nsimGetLastErrorMessage());
      return;
    }
    for (int d = 0; d < count; ++d) emit_device(logger, linked_of, d);
    status_ = libkineto::TraceStatus::READY;
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    const int d = devices_.empty() ? 0 : *devices_.begin();
    // Sorted below the host rows, as other accelerators' lanes are.
    return std::make_unique<libkineto::DeviceInfo>(libkineto::DeviceInfo{
        d, 0x1000000 + d, "neuron:" + std::to_string(d), "neuron " + std::to_string(d)});
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::vector<libkineto::ResourceInfo> out;
    for (const auto& [key, name] : lanes_) {
      out.push_back(libkineto::ResourceInfo{key.second, key.second, key.first, name});
    }
    return out;
  }

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return nullptr; }

  void pushCorrelationId(uint64_t id) override { nsimCorrelationPush(id); }
  void popCorrelationId() override {
    if (nsimCorrelationPop() != NSIM_SUCCESS) nsimGetLastError();
  }

 private:
  void lane(int device, int32_t resource, const std::string& name) {
    devices_.insert(device);
    lanes_.emplace(std::make_pair(device, resource), name);
  }

  void emit_device(libkineto::ActivityLogger& logger,
                   const libkineto::getLinkedActivityCallback& linked_of, int device) {
    size_t n = 0;
    if (nsimTimelineGetCount(device, &n) != NSIM_SUCCESS || n == 0) return;
    std::vector<nsimTimelineRecord> records(n);
    size_t written = 0;
    if (nsimTimelineGetRecords(device, records.data(), n, &written) != NSIM_SUCCESS) return;
    records.resize(written);
    struct QueueClock {
      int64_t host_end = 0;  // placed end of the queue's last record
      double sim_end = 0;    // its simulated end
    };
    std::map<uint64_t, QueueClock> clocks;
    for (const nsimTimelineRecord& r : records) {
      if (r.host_ns < start_ns_ || r.host_ns > stop_ns_) continue;
      QueueClock& qc = clocks[r.queue_id];
      const auto dur = std::llround(r.end_ns - r.start_ns);  // the trace resolves ns
      int64_t start = r.host_ns;
      if (qc.host_end) {
        start = std::max(start, qc.host_end + static_cast<int64_t>(std::max(0.0, r.start_ns - qc.sim_end)));
      }
      qc.host_end = start + dur;
      qc.sim_end = r.end_ns;
      emit_record(logger, linked_of, r, start, dur);
    }
  }

  void emit_record(libkineto::ActivityLogger& logger,
                   const libkineto::getLinkedActivityCallback& linked_of, const nsimTimelineRecord& r,
                   int64_t start, int64_t dur) {
    const char* name = nsimGetName(r.name_id);
    const std::string op = name ? name : "#" + std::to_string(r.name_id);
    const std::string activity_name = op + " [" + model_tag(r.model) + "]";
    const auto queue_lane = static_cast<int32_t>(r.queue_id);
    lane(r.device, queue_lane, "queue " + std::to_string(r.queue_id));
    const libkineto::ITraceActivity* linked =
        r.correlation_id ? linked_of(static_cast<int32_t>(r.correlation_id)) : nullptr;

    libkineto::GenericTraceActivity act(span(), ActivityType::CONCURRENT_KERNEL, activity_name);
    if (r.kind == NSIM_LAUNCH_MEMCPY) act.activityType = ActivityType::GPU_MEMCPY;
    if (r.kind == NSIM_LAUNCH_MEMSET) act.activityType = ActivityType::GPU_MEMSET;
    act.startTime = start;
    act.endTime = start + dur;
    act.id = static_cast<int32_t>(r.correlation_id);
    act.device = r.device;
    act.resource = queue_lane;
    act.threadId = queue_lane;
    act.linked = linked;
    act.addMetadata("device", r.device);
    act.addMetadata("stream", static_cast<int64_t>(r.queue_id));
    act.addMetadata("correlation", static_cast<int64_t>(r.correlation_id));
    act.addMetadataQuoted("op", op);
    act.addMetadataQuoted("model", model_name(r.model));
    act.addMetadataQuoted("dtype class", dtype_class_name(r.dtype_class));
    act.addMetadata("flops", r.flops);
    act.addMetadata("bytes read", r.bytes_read);
    act.addMetadata("bytes written", r.bytes_written);
    act.addMetadata("simulated start ns", r.start_ns);
    act.addMetadata("simulated duration ns", r.end_ns - r.start_ns);
    if (r.detail_id && nsimGetName(r.detail_id)) {
      act.addMetadataQuoted("detail", nsimGetName(r.detail_id));
    }
    if (linked) {
      // The launch on the op's thread, at the host time the record was placed: the arrow's tail.
      const uint32_t flow = ++flow_id_;
      libkineto::GenericTraceActivity launch(span(), ActivityType::PRIVATEUSE1_RUNTIME,
                                             "neuronLaunch");
      launch.startTime = std::max(linked->timestamp(), r.host_ns - 1000);
      launch.endTime = std::max(launch.startTime, r.host_ns);
      // Linked to the op like the kernel, so that Python nests it under the op instead of
      // attaching the kernel's time to it a second time.
      launch.linked = linked;
      launch.device = static_cast<int32_t>(linked->deviceId());
      launch.resource = static_cast<int32_t>(linked->resourceId());
      launch.threadId = launch.resource;
      launch.flow.id = flow;
      launch.flow.type = kLinkAsyncCpuGpu;
      launch.flow.start = 1;
      launch.addMetadata("correlation", static_cast<int64_t>(r.correlation_id));
      launch.log(logger);
      act.flow.id = flow;
      act.flow.type = kLinkAsyncCpuGpu;
      act.flow.start = 0;
    }
    act.log(logger);
    if (r.model != NSIM_MODEL_KERNEL_SCHEDULE) return;
    // Engine lanes: each engine's busy time of the schedule. Unlinked annotations, so the op's
    // NEURON time counts the kernel once.
    for (int e = 0; e < NSIM_ENGINE_COUNT; ++e) {
      const double busy = r.engine_busy_ns[e];
      if (busy <= 0) continue;
      const int32_t engine_lane = kEngineLaneBase + e;
      lane(r.device, engine_lane, kEngineNames[e]);
      libkineto::GenericTraceActivity eng(span(), ActivityType::GPU_USER_ANNOTATION,
                                          std::string(kEngineNames[e]) + " busy: " + op);
      eng.startTime = start;
      eng.endTime = start + std::min(dur, static_cast<int64_t>(busy));
      eng.device = r.device;
      eng.resource = engine_lane;
      eng.threadId = engine_lane;
      eng.addMetadata("busy ns", busy);
      eng.addMetadata("correlation", static_cast<int64_t>(r.correlation_id));
      eng.log(logger);
    }
  }

  int64_t start_ns_ = 0;
  int64_t stop_ns_ = 0;
  uint32_t flow_id_ = 0x4e000000;  // apart from the ids Kineto gives host flows
  std::vector<std::string> errors_;
  std::set<int> devices_;
  std::map<std::pair<int, int32_t>, std::string> lanes_;
};

class NeuronActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<ActivityType>& availableActivities() const override { return types_; }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<ActivityType>& types, const libkineto::Config& config) override {
    // CPU-only sessions are offered the PrivateUse1 runtime types as well; device activity is
    // what ProfilerActivity.PrivateUse1 asks for.
    if (!types.count(ActivityType::CONCURRENT_KERNEL)) return nullptr;
    return std::make_unique<Session>();
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t, int64_t, const std::set<ActivityType>& types, const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  std::string name_ = "neuron";
  std::set<ActivityType> types_{ActivityType::CONCURRENT_KERNEL, ActivityType::GPU_MEMCPY,
                                ActivityType::GPU_MEMSET, ActivityType::GPU_USER_ANNOTATION,
                                ActivityType::PRIVATEUSE1_RUNTIME};
};

}  // namespace
}  // namespace torch_neuron

using NeuronActivityProfiler = torch_neuron::NeuronActivityProfiler;
REGISTER_PRIVATEUSE1_PROFILER(NeuronActivityProfiler);
