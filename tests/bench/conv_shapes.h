// The CONV2D shapes of tests/bench/conv_bench.cpp, shared with the oneDNN baseline so that both
// rows name and size the same convolution.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace nnasm::baselines {

// y[1, o, h, w] = conv(x[1, c, h, w], w[o, c/groups, k, k]) + b, stride 1, pad (k−1)/2.
struct ConvShape {
  std::string name;
  int64_t c, o, h, w, k, pad, groups;
  double flops() const { return 2.0 * static_cast<double>(o * (c / groups) * k * k * h * w); }
};

inline const std::vector<ConvShape>& conv_shapes() {
  static const std::vector<ConvShape> s = {
      {"3to16_32x32_3x3", 3, 16, 32, 32, 3, 1, 1},
      {"16to16_16x16_3x3", 16, 16, 16, 16, 3, 1, 1},
      {"dw32_32x32_3x3", 32, 32, 32, 32, 3, 1, 32},
      {"64to64_13x13_3x3", 64, 64, 13, 13, 3, 1, 1},      // SqueezeNet's last expand 3×3
      {"64to16_55x55_1x1", 64, 16, 55, 55, 1, 0, 1},      // and its first squeeze 1×1
      {"256to256_14x14_3x3", 256, 256, 14, 14, 3, 1, 1},  // ResNet-18's stage 3
      {"512to512_7x7_3x3", 512, 512, 7, 7, 3, 1, 1},      // and stage 4
  };
  return s;
}

}  // namespace nnasm::baselines
