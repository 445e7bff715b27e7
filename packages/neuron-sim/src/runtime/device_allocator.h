// Best-fit sub-allocator over one device's address range, with coalescing of free blocks.
// Offsets are relative to the device's base address.
#ifndef NEURON_SIM_RUNTIME_DEVICE_ALLOCATOR_H
#define NEURON_SIM_RUNTIME_DEVICE_ALLOCATOR_H

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

namespace nsim {

class DeviceAllocator {
 public:
  struct Block {
    uint64_t offset = 0;
    uint64_t size = 0;      // requested bytes
    uint64_t reserved = 0;  // bytes taken from the range (aligned)
  };
  struct Stats {
    uint64_t capacity = 0, in_use = 0, largest_free = 0;
  };
  enum class FreeStatus { kFreed, kAlreadyFreed, kInterior, kUnallocated };

  explicit DeviceAllocator(uint64_t capacity);

  // Returns false (no space) when no free block fits; `size` must be > 0.
  bool allocate(uint64_t size, Block* out);
  // On kFreed, *block is the released block; on kInterior, the allocation containing offset.
  FreeStatus release(uint64_t offset, Block* block);
  bool find(uint64_t offset, Block* out);  // the live allocation containing offset
  // Lock-free-of-blocking variant for the fault handler: false if the lock is busy.
  bool try_find(uint64_t offset, Block* out, bool* busy);
  Stats stats();
  uint64_t capacity() const { return capacity_; }

 private:
  bool find_locked(uint64_t offset, Block* out) const;
  void insert_free(uint64_t offset, uint64_t size);
  void erase_free(std::map<uint64_t, uint64_t>::iterator it);

  const uint64_t capacity_;
  std::mutex mu_;
  std::map<uint64_t, uint64_t> free_by_addr_;         // offset -> size
  std::multimap<uint64_t, uint64_t> free_by_size_;    // size -> offset
  std::map<uint64_t, Block> live_;                    // offset -> block
  uint64_t in_use_ = 0;
  // Bases freed recently, to tell "already freed" apart from "never allocated".
  static constexpr size_t kRecentFrees = 256;
  std::array<uint64_t, kRecentFrees> recent_frees_{};
  size_t recent_next_ = 0, recent_count_ = 0;
};

}  // namespace nsim

#endif
