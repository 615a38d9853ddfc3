// What BATCHNORM2D and BATCHNORM2D_BWD share: the geometry of x (channels on axis 1, everything
// after it one contiguous plane per image and channel), the operand checks, and the per-channel
// statistics both kernels compute the same way, so the backward recomputes exactly the forward's.
#pragma once
#include <cmath>
#include <cstdint>

#include "ops/op.h"

namespace nnasm {

struct BnGeom {
  int64_t n = 0, c = 0, plane = 0;  // x is [n, c, plane...]
  int64_t count() const { return n * plane; }  // values per channel
  int64_t at(int64_t img, int64_t ch) const { return (img * c + ch) * plane; }  // start of one plane
};

inline BnGeom bn_geom(const Shape& x) {
  BnGeom g;
  g.n = x[0];
  g.c = x[1];
  g.plane = 1;
  for (int d = 2; d < x.rank; ++d) g.plane *= x[d];
  return g;
}

// x: f32 of rank ≥ 2; the inputs `per_channel` f32[C] with C = x's axis 1. `what` names them.
Status bn_check(const Instruction& ins, const std::vector<TensorType>& in, const std::vector<int>& per_channel,
                const std::vector<const char*>& what);

// Mean and biased variance of channel `ch` of x over the batch and the plane, in double (two
// passes: the mean, then the squared deviations).
inline void bn_batch_stats(const float* x, const BnGeom& g, int64_t ch, double* mean, double* var) {
  double s = 0;
  for (int64_t i = 0; i < g.n; ++i) {
    const float* p = x + g.at(i, ch);
    for (int64_t j = 0; j < g.plane; ++j) s += p[j];
  }
  const double m = s / static_cast<double>(g.count());
  double q = 0;
  for (int64_t i = 0; i < g.n; ++i) {
    const float* p = x + g.at(i, ch);
    for (int64_t j = 0; j < g.plane; ++j) {
      const double d = p[j] - m;
      q += d * d;
    }
  }
  *mean = m;
  *var = q / static_cast<double>(g.count());
}

// The statistics channel `ch` is normalized with: the batch's when training, else the running
// ones.
inline void bn_stats(const float* x, const BnGeom& g, int64_t ch, bool training, const float* rmean, const float* rvar,
                     double* mean, double* var) {
  if (training) {
    bn_batch_stats(x, g, ch, mean, var);
  } else {
    *mean = rmean[ch];
    *var = rvar[ch];
  }
}

// The JIT kernels of BATCHNORM2D (backward_pass false) and BATCHNORM2D_BWD, and the scratch
// both need (ops/norm/batchnorm_jit.cpp). A null kernel for an empty x.
Result<std::shared_ptr<const JitKernel>> bn_jit(const JitRequest& r, KernelCache& cache, bool backward_pass);
size_t bn_jit_scratch(const Instruction& ins, const TensorType* in, const TensorType* out);

// Input k of a kernel's arguments as floats.
inline const float* bn_in(const KernelArgs* a, int k) { return static_cast<const float*>(a->in[k]); }

// 1/√(var + eps), in double.
inline double bn_rstd(double var, double eps) { return 1.0 / std::sqrt(var + eps); }

}  // namespace nnasm
