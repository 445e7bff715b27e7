#include "error.h"

#include <cstdarg>
#include <cstdio>

namespace nsim {
namespace {
thread_local nsimError t_last_error = NSIM_SUCCESS;
thread_local std::string t_last_message;
}  // namespace

nsimError set_error(nsimError err, const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  t_last_error = err;
  t_last_message = buf;
  return err;
}

std::string format_bytes(uint64_t bytes) {
  static const char* const kUnits[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  char buf[96];
  if (bytes < 1024) {
    snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(bytes));
    return buf;
  }
  double v = static_cast<double>(bytes);
  int unit = 0;
  while (v >= 1024.0 && unit < 6) {
    v /= 1024.0;
    ++unit;
  }
  snprintf(buf, sizeof buf, "%.2f %s (%llu bytes)", v, kUnits[unit],
           static_cast<unsigned long long>(bytes));
  return buf;
}

}  // namespace nsim

extern "C" {

NSIM_API const char* nsimGetErrorName(nsimError err) {
  switch (err) {
    case NSIM_SUCCESS: return "NSIM_SUCCESS";
    case NSIM_ERROR_NOT_INITIALIZED: return "NSIM_ERROR_NOT_INITIALIZED";
    case NSIM_ERROR_INVALID_VALUE: return "NSIM_ERROR_INVALID_VALUE";
    case NSIM_ERROR_INVALID_DEVICE: return "NSIM_ERROR_INVALID_DEVICE";
    case NSIM_ERROR_OUT_OF_MEMORY: return "NSIM_ERROR_OUT_OF_MEMORY";
    case NSIM_ERROR_INVALID_POINTER: return "NSIM_ERROR_INVALID_POINTER";
    case NSIM_ERROR_INVALID_COPY: return "NSIM_ERROR_INVALID_COPY";
    case NSIM_ERROR_INVALID_QUEUE: return "NSIM_ERROR_INVALID_QUEUE";
    case NSIM_ERROR_INVALID_EVENT: return "NSIM_ERROR_INVALID_EVENT";
    case NSIM_ERROR_NOT_READY: return "NSIM_ERROR_NOT_READY";
    case NSIM_ERROR_LAUNCH_FAILED: return "NSIM_ERROR_LAUNCH_FAILED";
    case NSIM_ERROR_DEVICE_LOST: return "NSIM_ERROR_DEVICE_LOST";
    case NSIM_ERROR_TIMING_DISABLED: return "NSIM_ERROR_TIMING_DISABLED";
    case NSIM_ERROR_CONFIG: return "NSIM_ERROR_CONFIG";
    case NSIM_ERROR_FORKED_CHILD: return "NSIM_ERROR_FORKED_CHILD";
  }
  return "NSIM_ERROR_UNKNOWN";
}

NSIM_API const char* nsimGetLastErrorMessage(void) { return nsim::t_last_message.c_str(); }

NSIM_API nsimError nsimGetLastError(void) {
  nsimError err = nsim::t_last_error;
  nsim::t_last_error = NSIM_SUCCESS;
  nsim::t_last_message.clear();
  return err;
}

}  // extern "C"
