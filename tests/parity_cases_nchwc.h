// Parity cases of the blocked channel layout's ops (TO_NCHWC, TO_NCHW, CONV_WEIGHTS_NCHWC),
// included by tests/ops_parity_test.cpp inside its namespace, after ParityRun and its helpers.
// The expectations come from tests/nchwc_naive.h; every op here moves values, so they must match
// exactly. tests/nchwc_test.cpp runs the reorders at every JIT level by name.
#pragma once

namespace nchwc_parity {

struct MapCase {
  int64_t n, h, w;
};

// Channels around both blocks (1, b − 1, b, b + 1, 2b + 1, 2b + 3) on odd maps.
constexpr int64_t CHANNELS[] = {1, 7, 9, 15, 16, 17, 33, 35};
constexpr MapCase MAPS[] = {{1, 1, 1}, {2, 3, 5}, {1, 7, 7}, {2, 13, 11}};

Shape blocked_shape(int64_t n, int64_t c, int64_t h, int64_t w, int64_t b) {
  return Shape{n, nchwc_naive_blocks(c, b), h, w, b};
}

}  // namespace nchwc_parity

void cases_to_nchwc(ParityRun& r) {
  using namespace nchwc_parity;
  for (int64_t b : {8, 16})
    for (int64_t c : CHANNELS)
      for (const MapCase& m : MAPS) {
        const HostTensor x = random_f32(Shape{m.n, c, m.h, m.w}, r.rng());
        const Expected e{HostTensor{TensorType{DType::F32, blocked_shape(m.n, c, m.h, m.w, b)},
                                    naive_to_nchwc(x.v, m.n, c, m.h * m.w, b)},
                         {}, EXACT};
        std::vector<ImmArg> imms;
        if (b != 16 || c % 2) imms.push_back(imm_i("block", b));  // the default, left out or written
        r.check({x}, imms, e);
      }
}

void cases_to_nchw(ParityRun& r) {
  using namespace nchwc_parity;
  for (int64_t b : {8, 16})
    for (int64_t c : CHANNELS)
      for (const MapCase& m : MAPS) {
        // The padding lanes hold values too (a fused activation may leave them nonzero).
        const HostTensor x = random_f32(blocked_shape(m.n, c, m.h, m.w, b), r.rng());
        const Expected e{HostTensor{TensorType{DType::F32, Shape{m.n, c, m.h, m.w}}, naive_to_nchw(x.v, m.n, c, m.h * m.w, b)},
                         {}, EXACT};
        r.check({x}, {imm_i("channels", c)}, e);
      }
}

void cases_conv_weights_nchwc(ParityRun& r) {
  struct W {
    int64_t o, c, kh, kw;
  };
  for (int64_t b : {8, 16}) {
    for (const W& s : {W{1, 1, 1, 1}, W{7, 3, 3, 3}, W{16, 17, 1, 1}, W{33, 15, 3, 1}, W{35, 33, 3, 3}, W{8, 9, 1, 5}}) {
      const HostTensor w = random_f32(Shape{s.o, s.c, s.kh, s.kw}, r.rng());
      const int64_t ob = nchwc_naive_blocks(s.o, b), cb = nchwc_naive_blocks(s.c, b);
      const Expected e{HostTensor{TensorType{DType::F32, Shape{ob, cb, s.kh, s.kw, b, b}},
                                  naive_pack_dense(w.v, s.o, s.c, s.kh * s.kw, b)},
                       {}, EXACT};
      r.check({w}, {imm_i("block", b), imm_b("depthwise", false)}, e);
    }
    for (const W& s : {W{1, 1, 3, 3}, W{7, 1, 1, 1}, W{17, 1, 3, 3}, W{33, 1, 5, 5}, W{16, 1, 3, 1}}) {
      const HostTensor w = random_f32(Shape{s.o, 1, s.kh, s.kw}, r.rng());
      const Expected e{HostTensor{TensorType{DType::F32, Shape{nchwc_naive_blocks(s.o, b), s.kh, s.kw, b}},
                                  naive_pack_depthwise(w.v, s.o, s.kh * s.kw, b)},
                       {}, EXACT};
      r.check({w}, {imm_i("block", b), imm_b("depthwise", true)}, e);
    }
  }
}
