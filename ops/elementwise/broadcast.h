// Numpy-style broadcasting for reference kernels: walks the output in row-major order and yields
// the matching offsets into each input (stride 0 along broadcast dimensions). No allocation.
#pragma once
#include <array>
#include <cstdint>

#include "engine/shape.h"

namespace nnasm {

class BroadcastWalk {
 public:
  // `out` is the broadcast of `a` and `b` (see broadcast_shapes).
  BroadcastWalk(const Shape& out, const Shape& a, const Shape& b) : out_(out) {
    for (int i = 0; i < out.rank; ++i) {
      sa_[i] = stride_of(a, i - (out.rank - a.rank), out.dims[i]);
      sb_[i] = stride_of(b, i - (out.rank - b.rank), out.dims[i]);
    }
  }
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
    const int r = out_.rank;
    if (r == 0) {
      f(0, 0, 0, 1, 0, 0);
      return;
    }
    const int64_t inner = out_.dims[r - 1], ia = sa_[r - 1], ib = sb_[r - 1];
    const int64_t outer = out_.numel() / inner;
    std::array<int64_t, MAX_RANK> idx{};
    int64_t oa = 0, ob = 0, o = 0;
    for (int64_t k = 0; k < outer; ++k) {
      f(o, oa, ob, inner, ia, ib);
      o += inner;
      // Advance the multi-index over the outer dimensions.
      for (int d = r - 2; d >= 0; --d) {
        oa += sa_[d];
        ob += sb_[d];
        if (++idx[d] < out_.dims[d]) break;
        oa -= sa_[d] * out_.dims[d];
        ob -= sb_[d] * out_.dims[d];
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
  std::array<int64_t, MAX_RANK> sa_{}, sb_{};
};

}  // namespace nnasm
