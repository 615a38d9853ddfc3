// Seeded initializers (zeros … he_normal), drawing from jit/rng.h so one seed gives the same
// model everywhere.
#include "engine/init.h"

#include <cmath>

#include <xxhash.h>

#include "isa/bf16.h"
#include "jit/rng.h"

namespace nnasm {

void fan_in_out(const Shape& s, double* fan_in, double* fan_out) {
  if (s.rank <= 1) {
    *fan_in = *fan_out = s.rank ? static_cast<double>(s[0]) : 1.0;
  } else if (s.rank == 2) {
    *fan_in = static_cast<double>(s[0]);
    *fan_out = static_cast<double>(s[1]);
  } else {
    double rf = 1;
    for (int i = 2; i < s.rank; ++i) rf *= static_cast<double>(s[i]);
    *fan_in = static_cast<double>(s[1]) * rf;
    *fan_out = static_cast<double>(s[0]) * rf;
  }
}

void init_tensor(Tensor& t, uint64_t seed) {
  const TensorDesc& d = t.desc;
  const int64_t n = t.numel();
  Rng rng(seed ^ XXH3_64bits(d.name.data(), d.name.size()));
  double fi, fo;
  fan_in_out(d.type.shape, &fi, &fo);
  auto value = [&](int64_t i) -> double {
    if (!d.values.empty()) return d.values[i];
    switch (d.init.kind) {
      case InitKind::NONE:
      case InitKind::ZEROS: return 0;
      case InitKind::ONES: return 1;
      case InitKind::CONSTANT: return d.init.a;
      case InitKind::UNIFORM: return d.init.a + (d.init.b - d.init.a) * rng.uniform();
      case InitKind::NORMAL: return d.init.a + d.init.b * rng.normal();
      case InitKind::XAVIER_UNIFORM: return std::sqrt(6.0 / (fi + fo)) * (2 * rng.uniform() - 1);
      case InitKind::XAVIER_NORMAL: return std::sqrt(2.0 / (fi + fo)) * rng.normal();
      case InitKind::HE_UNIFORM: return std::sqrt(6.0 / fi) * (2 * rng.uniform() - 1);
      case InitKind::HE_NORMAL: return std::sqrt(2.0 / fi) * rng.normal();
    }
    return 0;
  };
  // The reduced types hold what Program::declare let through (integers in range, no random
  // draws for i8/u8); clamping keeps a value that bypassed it from being undefined behaviour.
  auto clamped = [](double v, double lo, double hi) { return std::isnan(v) ? 0 : v < lo ? lo : v > hi ? hi : v; };
  if (d.type.dtype == DType::I32) {
    for (int64_t i = 0; i < n; ++i) t.i32()[i] = static_cast<int32_t>(value(i));
  } else if (d.type.dtype == DType::BF16) {
    // Drawn as an f32 param would be, then rounded: one seed gives the same numbers in both types.
    uint16_t* h = static_cast<uint16_t*>(t.storage());
    for (int64_t i = 0; i < n; ++i) h[i] = bf16_from_f32(static_cast<float>(value(i)));
  } else if (d.type.dtype == DType::I8) {
    int8_t* q = static_cast<int8_t*>(t.storage());
    for (int64_t i = 0; i < n; ++i) q[i] = static_cast<int8_t>(clamped(value(i), -128, 127));
  } else if (d.type.dtype == DType::U8) {
    uint8_t* q = static_cast<uint8_t*>(t.storage());
    for (int64_t i = 0; i < n; ++i) q[i] = static_cast<uint8_t>(clamped(value(i), 0, 255));
  } else {
    for (int64_t i = 0; i < n; ++i) t.f32()[i] = static_cast<float>(value(i));
  }
}

}  // namespace nnasm
