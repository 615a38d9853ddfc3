// Numpy-style broadcasting for reference kernels: walks the output in row-major order and yields
// the matching offsets into each input (stride 0 along broadcast dimensions). No allocation.
#pragma once
#include <array>
#include <cstdint>

#include "isa/shape.h"

namespace nnasm {

// K operands, each broadcast to `out`.
template <int K>
class BroadcastWalkN {
 public:
  using Offsets = std::array<int64_t, K>;
  // Every in[k] broadcasts to `out` (see broadcast_shapes).
  BroadcastWalkN(const Shape& out, const std::array<const Shape*, K>& in) : out_(out) {
    for (int i = 0; i < out.rank; ++i)
      for (int k = 0; k < K; ++k) s_[i][k] = stride_of(*in[k], i - (out.rank - in[k]->rank), out.dims[i]);
  }

  // Calls f(out_index, offsets, n, steps) once per row of the innermost dimension: operand k's
  // elements of the row are at offsets[k] + j·steps[k] for j < n.
  template <typename F>
  void for_each_row(F&& f) const {
    const int r = out_.rank;
    Offsets off{};
    if (r == 0) {
      f(int64_t{0}, off, int64_t{1}, Offsets{});
      return;
    }
    const int64_t inner = out_.dims[r - 1];
    const int64_t outer = out_.numel() / inner;
    std::array<int64_t, MAX_RANK> idx{};
    int64_t o = 0;
    for (int64_t row = 0; row < outer; ++row) {
      f(o, off, inner, s_[r - 1]);
      o += inner;
      // Advance the multi-index over the outer dimensions.
      for (int d = r - 2; d >= 0; --d) {
        for (int k = 0; k < K; ++k) off[k] += s_[d][k];
        if (++idx[d] < out_.dims[d]) break;
        for (int k = 0; k < K; ++k) off[k] -= s_[d][k] * out_.dims[d];
        idx[d] = 0;
      }
    }
  }

 private:
  // Row-major stride of `s` at axis `ax`, or 0 where the axis is missing or broadcast.
  static int64_t stride_of(const Shape& s, int ax, int64_t out_dim) {
    if (ax < 0 || (s.dims[ax] == 1 && out_dim != 1)) return 0;
    return s.stride(ax);
  }
  Shape out_;
  std::array<Offsets, MAX_RANK> s_{};
};

// The two-operand walk of the binary kernels.
class BroadcastWalk {
 public:
  // `out` is the broadcast of `a` and `b` (see broadcast_shapes).
  BroadcastWalk(const Shape& out, const Shape& a, const Shape& b) : w_(out, {&a, &b}) {}
  // Calls f(out_index, a_offset, b_offset) for every output element.
  template <typename F>
  void for_each(F&& f) const {
    for_each_row([&](int64_t o, int64_t oa, int64_t ob, int64_t n, int64_t ia, int64_t ib) {
      for (int64_t j = 0; j < n; ++j) f(o + j, oa + j * ia, ob + j * ib);
    });
  }

  // Calls f(out_index, a_offset, b_offset, n, a_step, b_step) once per row of the innermost
  // dimension, so kernels can give the common unit-stride and stride-0 rows their own loops.
  template <typename F>
  void for_each_row(F&& f) const {
    w_.for_each_row([&](int64_t o, const BroadcastWalkN<2>::Offsets& off, int64_t n,
                        const BroadcastWalkN<2>::Offsets& step) { f(o, off[0], off[1], n, step[0], step[1]); });
  }

 private:
  BroadcastWalkN<2> w_;
};

}  // namespace nnasm
