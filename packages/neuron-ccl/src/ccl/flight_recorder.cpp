#include "flight_recorder.h"

#include <cstdio>

namespace neuron_ccl {

FlightRecorder::FlightRecorder(size_t capacity) : ring_(capacity ? capacity : 1) {}

double FlightRecorder::now_ms() const {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
}

size_t FlightRecorder::record(uint64_t seq, const std::string& op, const std::string& detail) {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t slot = next_;
  ring_[slot] = {seq, op, detail, kStarted, now_ms(), 0};
  next_ = (next_ + 1) % ring_.size();
  ++total_;
  return slot;
}

void FlightRecorder::finish(size_t slot, State state) {
  std::lock_guard<std::mutex> lock(mu_);
  ring_[slot].state = state;
  ring_[slot].end_ms = now_ms();
}

std::string FlightRecorder::dump(const std::string& header) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out = header + "\n";
  const size_t n = total_ < ring_.size() ? total_ : ring_.size();
  const size_t first = (next_ + ring_.size() - n) % ring_.size();
  static const char* kStates[] = {"STARTED", "completed", "FAILED"};
  for (size_t i = 0; i < n; ++i) {
    const Entry& e = ring_[(first + i) % ring_.size()];
    char line[512];
    std::snprintf(line, sizeof line, "  #%-6llu %-16s %-9s t=%.3f..%.3f ms  %s\n",
                  static_cast<unsigned long long>(e.seq), e.op.c_str(), kStates[e.state],
                  e.start_ms, e.state == kStarted ? e.start_ms : e.end_ms, e.detail.c_str());
    out += line;
  }
  return out;
}

}  // namespace neuron_ccl
