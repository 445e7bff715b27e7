// The last N operations of one communicator on this rank, printed when an operation fails so
// that the ranks' records can be lined up (same sequence number = same collective).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace neuron_ccl {

class FlightRecorder {
 public:
  enum State { kStarted, kCompleted, kFailed };
  struct Entry {
    uint64_t seq = 0;
    std::string op;
    std::string detail;  // dtype, count, root, reduce op, algorithm
    State state = kStarted;
    double start_ms = 0, end_ms = 0;  // host time since the communicator was created
  };

  explicit FlightRecorder(size_t capacity);
  size_t record(uint64_t seq, const std::string& op, const std::string& detail);
  void finish(size_t slot, State state);
  std::string dump(const std::string& header) const;

 private:
  double now_ms() const;
  mutable std::mutex mu_;
  std::vector<Entry> ring_;
  size_t next_ = 0, total_ = 0;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

}  // namespace neuron_ccl
