// Counter-based random numbers: Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel Random
// Numbers: As Easy as 1, 2, 3", SC'11), the generator CUDA's default generator uses.
//
// Element e of a random op's output is a pure function of (seed, offset + e): its numbers come
// from the counter (offset + e, draw) under the key seed, where draw counts the 128-bit blocks
// the element has consumed (one for every distribution but the rejection samplers). So values
// do not depend on thread count or partitioning, and a draw started at offset + k equals the
// tail of the draw started at offset -- what DTensor's offset-based RNG tracker relies on.
#pragma once

#include <cmath>
#include <cstdint>

namespace torch_neuron::philox {

struct Block {
  uint32_t w[4];
};

inline Block philox4x32_10(uint64_t counter_lo, uint64_t counter_hi, uint64_t key) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;  // round multipliers
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;  // key schedule increments
  uint32_t c0 = uint32_t(counter_lo), c1 = uint32_t(counter_lo >> 32);
  uint32_t c2 = uint32_t(counter_hi), c3 = uint32_t(counter_hi >> 32);
  uint32_t k0 = uint32_t(key), k1 = uint32_t(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t(kMul0) * c0, p1 = uint64_t(kMul1) * c2;
    const uint32_t n0 = uint32_t(p1 >> 32) ^ c1 ^ k0, n2 = uint32_t(p0 >> 32) ^ c3 ^ k1;
    c1 = uint32_t(p1);
    c3 = uint32_t(p0);
    c0 = n0;
    c2 = n2;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return Block{{c0, c1, c2, c3}};
}

// 53 random bits as a double in [0, 1).
inline double unit_double(uint32_t hi, uint32_t lo) {
  return double(((uint64_t(hi) << 32) | lo) >> 11) * (1.0 / 9007199254740992.0);
}

// A standard normal from u_open in (0, 1] (under the log) and u in [0, 1) (Box-Muller).
inline double box_muller(double u_open, double u) {
  return std::sqrt(-2.0 * std::log(u_open)) * std::cos(2.0 * M_PI * u);
}

// The random numbers of one output element.
class ElementStream {
 public:
  ElementStream(uint64_t seed, uint64_t counter) : seed_(seed), counter_(counter) {}

  // The element's first block: what the single-block distributions use.
  Block first() const { return philox4x32_10(counter_, 0, seed_); }

  // Uniform double in [0, 1), two per block.
  double uniform() {
    if (used_ == 4) refill();
    const double u = unit_double(block_.w[used_], block_.w[used_ + 1]);
    used_ += 2;
    return u;
  }
  // Uniform double in (0, 1]: safe under log.
  double uniform_open_zero() { return 1.0 - uniform(); }
  double normal() {
    const double u_open = uniform_open_zero();
    return box_muller(u_open, uniform());
  }

 private:
  void refill() {
    block_ = philox4x32_10(counter_, draw_++, seed_);
    used_ = 0;
  }
  uint64_t seed_, counter_, draw_ = 0;
  Block block_{};
  int used_ = 4;
};

}  // namespace torch_neuron::philox
