// The engine's one random generator: splitmix64, small and the same on every platform and
// standard library (std::normal_distribution is not), so one seed reproduces a whole run —
// initialization, shuffling, dropout masks, tensor ids.
#pragma once
#include <cmath>
#include <cstdint>

namespace nnasm {

class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() { return mix(s_ += GOLDEN); }
  // splitmix64's output function: a bijection that scrambles every bit of z into every bit of
  // the result. Counter-based draws (DROPOUT's mask: element i's bits are mix(stream + i·GOLDEN))
  // use it directly, so any element can be drawn without the ones before it.
  static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * MIX_MUL1;
    z = (z ^ (z >> 27)) * MIX_MUL2;
    return z ^ (z >> 31);
  }
  // mix's multipliers, named for the generated code that computes it (ops/random/dropout_jit.cpp).
  static constexpr uint64_t MIX_MUL1 = 0xbf58476d1ce4e5b9ULL, MIX_MUL2 = 0x94d049bb133111ebULL;
  static constexpr uint64_t GOLDEN = 0x9e3779b97f4a7c15ULL;
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Standard normal (Box–Muller).
  double normal() {
    double u1 = uniform(), u2 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  // Uniform in [0, n), n > 0.
  uint64_t below(uint64_t n) { return next() % n; }

 private:
  uint64_t s_;
};

}  // namespace nnasm
