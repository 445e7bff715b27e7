// Timeline queries and the Chrome trace export.
#include <cstdio>
#include <string>
#include <vector>

#include "error.h"
#include "names.h"
#include "runtime.h"

using namespace nsim;

namespace {

const char* launch_kind_name(uint32_t kind) {
  switch (kind) {
    case NSIM_LAUNCH_KERNEL: return "kernel";
    case NSIM_LAUNCH_FALLBACK: return "fallback";
    case NSIM_LAUNCH_COLLECTIVE: return "collective";
    case NSIM_LAUNCH_MEMCPY: return "memcpy";
    case NSIM_LAUNCH_MEMSET: return "memset";
    case NSIM_LAUNCH_HOST_FUNC: return "host_func";
  }
  return "unknown";
}

const char* cost_model_name(uint32_t model) {
  switch (model) {
    case NSIM_MODEL_UNSPECIFIED: return "unspecified";
    case NSIM_MODEL_KERNEL_SCHEDULE: return "kernel_schedule";
    case NSIM_MODEL_ROOFLINE: return "roofline";
    case NSIM_MODEL_HOST_ROUND_TRIP: return "host_round_trip";
    case NSIM_MODEL_COPY: return "copy";
    case NSIM_MODEL_INTERCONNECT: return "interconnect";
  }
  return "unknown";
}

void append_json_string(std::string* out, const char* s) {
  out->push_back('"');
  for (; *s; ++s) {
    const unsigned char c = static_cast<unsigned char>(*s);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
    } else if (c < 0x20) {
      char buf[8];
      snprintf(buf, sizeof buf, "\\u%04x", c);
      out->append(buf);
    } else {
      out->push_back(static_cast<char>(c));
    }
  }
  out->push_back('"');
}

std::vector<nsimTimelineRecord> snapshot(Device* d) {
  std::lock_guard<std::mutex> lock(d->mu);
  std::vector<nsimTimelineRecord> records(d->timeline.count());
  d->timeline.copy_out(records.data(), records.size());
  return records;
}

}  // namespace

extern "C" {

NSIM_API nsimError nsimTimelineSetEnabled(int enabled) {
  Runtime* rt = runtime_or_error("nsimTimelineSetEnabled");
  if (!rt) return runtime_unavailable();
  rt->timeline_enabled.store(enabled != 0);
  return NSIM_SUCCESS;
}

NSIM_API nsimError nsimTimelineGetCount(int device, size_t* count) {
  Runtime* rt = runtime_or_error("nsimTimelineGetCount");
  if (!rt) return runtime_unavailable();
  Device* d = device_or_error(rt, "nsimTimelineGetCount", device);
  if (!d) return NSIM_ERROR_INVALID_DEVICE;
  if (!count) return set_error(NSIM_ERROR_INVALID_VALUE, "nsimTimelineGetCount: count is NULL");
  std::lock_guard<std::mutex> lock(d->mu);
  *count = d->timeline.count();
  return NSIM_SUCCESS;
}

NSIM_API nsimError nsimTimelineGetRecords(int device, nsimTimelineRecord* out, size_t capacity,
                                          size_t* written) {
  Runtime* rt = runtime_or_error("nsimTimelineGetRecords");
  if (!rt) return runtime_unavailable();
  Device* d = device_or_error(rt, "nsimTimelineGetRecords", device);
  if (!d) return NSIM_ERROR_INVALID_DEVICE;
  if (!written || (!out && capacity)) {
    return set_error(NSIM_ERROR_INVALID_VALUE,
                     "nsimTimelineGetRecords: written is NULL, or out is NULL with capacity %zu",
                     capacity);
  }
  std::lock_guard<std::mutex> lock(d->mu);
  *written = d->timeline.copy_out(out, capacity);
  return NSIM_SUCCESS;
}

NSIM_API nsimError nsimTimelineClear(int device) {
  Runtime* rt = runtime_or_error("nsimTimelineClear");
  if (!rt) return runtime_unavailable();
  if (device == -1) {
    for (auto& d : rt->devices) {
      std::lock_guard<std::mutex> lock(d->mu);
      d->timeline.clear();
    }
    return NSIM_SUCCESS;
  }
  Device* d = device_or_error(rt, "nsimTimelineClear", device);
  if (!d) return NSIM_ERROR_INVALID_DEVICE;
  std::lock_guard<std::mutex> lock(d->mu);
  d->timeline.clear();
  return NSIM_SUCCESS;
}

NSIM_API nsimError nsimTimelineExportChromeTrace(const char* path) {
  Runtime* rt = runtime_or_error("nsimTimelineExportChromeTrace");
  if (!rt) return runtime_unavailable();
  if (!path) return set_error(NSIM_ERROR_INVALID_VALUE, "nsimTimelineExportChromeTrace: path is NULL");
  FILE* f = fopen(path, "w");
  if (!f) {
    return set_error(NSIM_ERROR_INVALID_VALUE,
                     "nsimTimelineExportChromeTrace: cannot open '%s' for writing", path);
  }
  std::string out = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[";
  bool first = true;
  char buf[512];
  for (auto& dev : rt->devices) {
    Device* d = dev.get();
    snprintf(buf, sizeof buf,
             "%s{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,"
             "\"args\":{\"name\":\"neuron:%d (%s core %d)\"}}",
             first ? "" : ",", d->index, d->index, d->props.profile, d->props.logical_core);
    out += buf;
    first = false;
    for (const nsimTimelineRecord& r : snapshot(d)) {
      const char* name = name_of(r.name_id);
      out += ",{\"ph\":\"X\",\"name\":";
      append_json_string(&out, name ? name : "(unregistered name)");
      // Chrome trace timestamps are microseconds.
      snprintf(buf, sizeof buf,
               ",\"pid\":%d,\"tid\":%llu,\"ts\":%.3f,\"dur\":%.3f,"
               "\"args\":{\"kind\":\"%s\",\"bytes\":%llu,\"model\":\"%s\",\"flops\":%.17g,"
               "\"bytes_read\":%.17g,\"bytes_written\":%.17g,\"correlation\":%llu}}",
               r.device, static_cast<unsigned long long>(r.queue_id), r.start_ns / 1e3,
               (r.end_ns - r.start_ns) / 1e3, launch_kind_name(r.kind),
               static_cast<unsigned long long>(r.bytes), cost_model_name(r.model), r.flops,
               r.bytes_read, r.bytes_written, static_cast<unsigned long long>(r.correlation_id));
      out += buf;
      if (r.detail_id) {
        out.pop_back();
        out.pop_back();
        out += ",\"detail\":";
        append_json_string(&out, name_of(r.detail_id) ? name_of(r.detail_id) : "");
        out += "}}";
      }
    }
    if (out.size() > (1u << 22)) {
      fwrite(out.data(), 1, out.size(), f);
      out.clear();
    }
  }
  out += "]}\n";
  const bool ok = fwrite(out.data(), 1, out.size(), f) == out.size();
  if (fclose(f) != 0 || !ok) {
    return set_error(NSIM_ERROR_INVALID_VALUE,
                     "nsimTimelineExportChromeTrace: writing '%s' failed (disk full?)", path);
  }
  return NSIM_SUCCESS;
}

}  // extern "C"
