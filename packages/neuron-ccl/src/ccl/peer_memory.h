// Single-copy access to peers' device memory on one host.
//
// neuron_sim backs each device's memory with a memfd mapped at the device's host alias range
// (see neuron_sim's address_space.cpp). A rank publishes, per device, its pid and the number of
// the descriptor of that memfd; a peer opens /proc/<pid>/fd/<n>, which yields the same memfd,
// and maps it once. A device buffer is then named across processes by (device, offset), and
// every later collective on any buffer of that device reuses the one mapping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace neuron_ccl {

struct DeviceRegion {
  int device = -1;
  int fd = -1;            // this process's descriptor of the memfd
  uintptr_t alias_base = 0;  // host alias address of memfd offset 0
  uint64_t size = 0;
};

// Where a local device pointer lives: its device and the offset in that device's memfd.
struct RemoteRef {
  int32_t device = -1;
  uint64_t offset = 0;
};

inline bool overlaps(const void* a, size_t an, const void* b, size_t bn) {
  const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return an && bn && x < y + bn && y < x + an;
}

class LocalMemory {
 public:
  // Finds the memfd of every device of this process. Throws Error on failure.
  void discover();
  const std::vector<DeviceRegion>& regions() const { return regions_; }
  // Throws Error(kInvalidArgument) naming `what` unless [ptr, ptr+bytes) is live device memory.
  RemoteRef locate(const void* ptr, size_t bytes, const char* what) const;
  // Host alias of a local device pointer (validated by locate()).
  static void* alias(const void* ptr);

 private:
  std::vector<DeviceRegion> regions_;
};

class PeerMemory {
 public:
  ~PeerMemory();
  // Records where a peer's memfds are; nothing is mapped until first use.
  void add_peer(int rank, int pid, const std::vector<std::pair<int, uint64_t>>& fd_and_size);
  // Host address of (rank, ref) in this process. Maps the peer's memfd on first use.
  char* resolve(int rank, const RemoteRef& ref, size_t bytes);

 private:
  struct Mapping {
    int pid = 0;
    int remote_fd = -1;  // the descriptor number in the peer process
    int fd = -1;         // ours, once opened
    uint64_t size = 0;
    char* base = nullptr;
  };
  std::mutex mu_;
  std::map<std::pair<int, int>, Mapping> maps_;  // (rank, device)
};

}  // namespace neuron_ccl
