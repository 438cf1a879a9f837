// A small seeded generator with the same sequence on every platform (the standard library's
// distributions are implementation-defined), so a seed printed by the tool replays anywhere.
#pragma once

#include <cmath>
#include <cstdint>

namespace epigemm_cli {

class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}

  // splitmix64.
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1).
  double uniform() { return double(next() >> 11) * 0x1.0p-53; }
  double uniform(double low, double high) { return low + (high - low) * uniform(); }
  // Uniform integer in [0, n).
  uint64_t below(uint64_t n) { return next() % n; }
  // Standard normal (Box-Muller).
  double normal() {
    const double u1 = 1.0 - uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t state_;
};

}  // namespace epigemm_cli
