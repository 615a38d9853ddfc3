// The phase split of conv_phases.h. Phase channel (c, py, px) is channel (c·2 + py)·2 + px.
#include "ops/conv/conv_phases.h"

#include <cstring>

namespace nnasm {

constexpr int64_t MAX_CHANNELS = 4;

ConvGeom phase_geometry(const ConvGeom& g) {
  ConvGeom p = g;
  p.c = 4 * g.cg();
  p.kh = (g.kh + 1) / 2, p.kw = (g.kw + 1) / 2;
  p.h = g.ho + p.kh - 1, p.w = g.wo + p.kw - 1;
  p.sh = p.sw = 1, p.ph = p.pw = 0, p.dh = p.dw = 1, p.groups = 1;
  return p;
}

bool phases_apply(const ConvGeom& g) {
  return g.sh == 2 && g.sw == 2 && g.dh == 1 && g.dw == 1 && g.groups == 1 && g.c <= MAX_CHANNELS && g.kh >= 2 &&
         g.kw >= 2 && direct_conv_applies(phase_geometry(g));
}

void phase_split_input(const ConvGeom& g, const DirectConv& d, const float* x, float* xp) {
  std::memset(xp, 0, static_cast<size_t>(d.padded_floats()) * sizeof(float));
  const int64_t hp = d.hp(), rs = d.rs(), cols = (g.wo - 1) + d.kw;  // phase columns the taps read
  for (int64_t c = 0; c < g.c; ++c)
    for (int64_t py = 0; py < 2; ++py)
      for (int64_t px = 0; px < 2; ++px) {
        float* plane = xp + ((c * 2 + py) * 2 + px) * hp * rs;
        for (int64_t y = 0; y < hp; ++y) {
          const int64_t iy = 2 * y + py - g.ph;
          if (iy < 0 || iy >= g.h) continue;
          const float* row = x + (c * g.h + iy) * g.w;
          float* out = plane + y * rs;
          for (int64_t xx = 0; xx < cols; ++xx) {
            const int64_t ix = 2 * xx + px - g.pw;
            if (ix >= 0 && ix < g.w) out[xx] = row[ix];
          }
        }
      }
}

void phase_split_weights(const ConvGeom& g, const float* w, int64_t o0, int64_t count, float* wp) {
  const int64_t kh = (g.kh + 1) / 2, kw = (g.kw + 1) / 2;
  std::memset(wp, 0, static_cast<size_t>(count * 4 * g.c * kh * kw) * sizeof(float));
  for (int64_t o = 0; o < count; ++o)
    for (int64_t c = 0; c < g.c; ++c)
      for (int64_t i = 0; i < g.kh; ++i)
        for (int64_t j = 0; j < g.kw; ++j) {
          const int64_t phase = (c * 2 + i % 2) * 2 + j % 2;
          wp[((o * 4 * g.c + phase) * kh + i / 2) * kw + j / 2] = w[((o0 + o) * g.c + c) * g.kh * g.kw + i * g.kw + j];
        }
}

}  // namespace nnasm
