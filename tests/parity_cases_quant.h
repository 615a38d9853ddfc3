// Parity cases of QUANTIZE and DEQUANTIZE. A fragment of tests/ops_parity_test.cpp, included
// inside its namespace after its helpers (ParityRun, elementwise_shapes, EXACT) and before
// parity_table(), which names the cases_* functions below. The expectations follow ONNX's
// definitions in double (the f32 quotient is the double one rounded to float: double rounding is
// harmless for a division of floats), with numpy's rint for the halves, written here.
#pragma once

struct QuantAxisCase {
  Shape x;
  int64_t axis;  // 1 is left to the default
};

std::vector<QuantAxisCase> quant_axis_cases() {
  return {{Shape{3, 5, 7}, 0},  {Shape{3, 5, 7}, 1},  {Shape{3, 5, 7}, -1}, {Shape{2, 3, 4, 5}, 1},
          {Shape{2, 17, 33}, 1}, {Shape{16, 1}, 0},   {Shape{1, 15, 1}, 1}, {Shape{65, 70}, 0},
          {Shape{65, 70}, -1},  {Shape{2, 1031}, -1}, {Shape{7}, 0}};
}

double quant_lo(DType t) { return t == DType::I8 ? -128 : 0; }
double quant_hi(DType t) { return t == DType::I8 ? 127 : 255; }

HostTensor random_ints(DType t, const Shape& s, std::mt19937& rng, double lo, double hi) {
  std::uniform_int_distribution<int64_t> u(static_cast<int64_t>(lo), static_cast<int64_t>(hi));
  HostTensor h{TensorType{t, s}, {}};
  for (int64_t i = 0; i < count_of(s); ++i) h.v.push_back(static_cast<double>(u(rng)));
  return h;
}

// Scales in [0.01, 0.05], every third a power of two (so that x below can sit on exact halves).
HostTensor random_scales(const Shape& s, std::mt19937& rng) {
  HostTensor h = random_f32(s, rng, 0.01, 0.05);
  for (size_t i = 0; i < h.v.size(); i += 3) h.v[i] = 1.0 / 32;
  return h;
}

// The channel of flat element i: 0 per tensor, else i's index along `axis` (computed from
// scratch: no normalize_axis).
int64_t quant_channel(const Shape& x, const HostTensor& scale, int64_t axis, int64_t i) {
  if (count_of(scale.type.shape) == 1) return 0;
  const int64_t a = axis < 0 ? axis + x.rank : axis;
  return unravel(i, x)[static_cast<size_t>(a)];
}

double quantize_d(double x, double scale, double zp, DType t) {
  const double q = std::nearbyint(static_cast<double>(static_cast<float>(x / scale)));
  if (std::isnan(q)) return zp;
  return std::min(quant_hi(t), std::max(quant_lo(t), q + zp));
}

// x spans the saturation on both sides (|x / scale| up to 800); every fifth element sits on a
// half of a power-of-two scale, a tie.
void quantize_case(ParityRun& r, const Shape& xs, const HostTensor& scale, int64_t axis, DType t) {
  HostTensor x = random_f32(xs, r.rng(), -8, 8);
  const HostTensor zp = random_ints(t, scale.type.shape, r.rng(), quant_lo(t), quant_hi(t));
  for (int64_t i = 0; i < count_of(xs); ++i) {
    const double s = scale.v[static_cast<size_t>(quant_channel(xs, scale, axis, i))];
    if (i % 5 == 2) x.v[i] = static_cast<float>(s * (std::floor(x.v[i] / s) + 0.5));
  }
  Expected e{HostTensor{TensorType{t, xs}, {}}, {}, EXACT};
  for (int64_t i = 0; i < count_of(xs); ++i) {
    const size_t c = static_cast<size_t>(quant_channel(xs, scale, axis, i));
    e.t.v.push_back(quantize_d(x.v[i], scale.v[c], zp.v[c], t));
  }
  std::vector<ImmArg> imms;
  if (axis != 1) imms.push_back(imm_i("axis", axis));
  r.check({x, scale, zp}, imms, e);
}

void cases_quantize(ParityRun& r) {
  for (DType t : {DType::I8, DType::U8}) {
    for (const Shape& s : elementwise_shapes()) {
      quantize_case(r, s, random_scales(Shape(), r.rng()), 1, t);
      quantize_case(r, s, random_scales(Shape{1}, r.rng()), -1, t);
    }
    for (const QuantAxisCase& c : quant_axis_cases()) {
      const int64_t a = c.axis < 0 ? c.axis + c.x.rank : c.axis;
      quantize_case(r, c.x, random_scales(Shape{c.x[static_cast<int>(a)]}, r.rng()), c.axis, t);
    }
  }
}

void dequantize_case(ParityRun& r, const Shape& xs, const HostTensor& scale, int64_t axis, DType t) {
  const bool wide = t == DType::I32;
  const HostTensor x = wide ? random_i32(xs, r.rng()) : random_ints(t, xs, r.rng(), quant_lo(t), quant_hi(t));
  const HostTensor zp = random_ints(t, scale.type.shape, r.rng(), wide ? -1000 : quant_lo(t), wide ? 1000 : quant_hi(t));
  Expected e{HostTensor{TensorType{DType::F32, xs}, {}}, {}, EXACT};
  for (int64_t i = 0; i < count_of(xs); ++i) {
    const size_t c = static_cast<size_t>(quant_channel(xs, scale, axis, i));
    // The difference rounded to f32 first (exact for 8 bits), then the f32 product.
    const float d = static_cast<float>(x.v[i] - zp.v[c]);
    e.t.v.push_back(static_cast<float>(static_cast<double>(d) * scale.v[c]));
  }
  std::vector<ImmArg> imms;
  if (axis != 1) imms.push_back(imm_i("axis", axis));
  r.check({x, scale, zp}, imms, e);
}

void cases_dequantize(ParityRun& r) {
  for (DType t : {DType::I8, DType::U8, DType::I32}) {
    for (const Shape& s : elementwise_shapes()) {
      dequantize_case(r, s, random_scales(Shape(), r.rng()), 1, t);
      dequantize_case(r, s, random_scales(Shape{1}, r.rng()), 0, t);
    }
    for (const QuantAxisCase& c : quant_axis_cases()) {
      const int64_t a = c.axis < 0 ? c.axis + c.x.rank : c.axis;
      dequantize_case(r, c.x, random_scales(Shape{c.x[static_cast<int>(a)]}, r.rng()), c.axis, t);
    }
  }
}

// LINEAR_BF16 on LINEAR's sizes, without and with each activation, against
// tests/linear_bf16_naive.h (x rounded to bf16, the exact products summed in double) and
// LINEAR's activations in double.
void cases_linear_bf16(ParityRun& r) {
  for (int a = -1; a < static_cast<int>(linear_acts().size()); ++a) {
    for (const LinearCase& c : linear_cases()) {
      std::vector<int64_t> xd = c.rows;
      xd.push_back(c.in);
      const HostTensor x = random_f32(shape_of(xd), r.rng());
      const HostTensor w = random_bf16(Shape{c.in, c.out}, r.rng(), -1, 1);
      const HostTensor b = random_f32(Shape{c.out}, r.rng());
      std::vector<ImmArg> imms;
      std::function<double(double)> f = [](double z) { return z; };
      if (a >= 0) {
        imms = {imm_enum("act", linear_acts()[a].name), imm_f("act_alpha", linear_acts()[a].alpha)};
        f = linear_acts()[a].f;
      }
      r.check({x, w, b}, imms, naive_linear_bf16(x, w, b, f));
    }
  }
}

// LINEAR_WEIGHTS_I8 and LINEAR_I8 on LINEAR's sizes against tests/linear_i8_naive.h: the packing
// exactly, the product without and with each activation, both x_scale modes.
void cases_linear_weights_i8(ParityRun& r) {
  for (const LinearCase& c : linear_cases()) {
    const HostTensor w = random_i8(Shape{c.in, c.out}, r.rng());
    const std::vector<HostTensor> p = naive_pack_i8(w);
    r.check_all({w}, {}, {Expected{p[0], {}, EXACT}, Expected{p[1], {}, EXACT}});
  }
}

void cases_linear_i8(ParityRun& r) {
  for (int a = -1; a < static_cast<int>(linear_acts().size()); ++a) {
    int n = 0;
    for (const LinearCase& c : linear_cases()) {
      std::vector<int64_t> xd = c.rows;
      xd.push_back(c.in);
      const HostTensor x = random_f32(shape_of(xd), r.rng());
      const HostTensor w = random_i8(Shape{c.in, c.out}, r.rng());
      const std::vector<HostTensor> p = naive_pack_i8(w);
      const HostTensor s = random_f32(Shape{n % 2 ? 1 : c.out}, r.rng(), 0.001, 0.02);
      const HostTensor b = random_f32(Shape{c.out}, r.rng());
      const bool tensor = n++ % 3 == 1;
      std::vector<ImmArg> imms;
      std::function<float(float)> f = [](float z) { return z; };
      // LINEAR's activations in double, within their few ulps of the kernels' f32 ones.
      Tolerance tol = EXACT;
      if (a >= 0) {
        imms = {imm_enum("act", linear_acts()[a].name), imm_f("act_alpha", linear_acts()[a].alpha)};
        const std::function<double(double)> g = linear_acts()[a].f;
        f = [g](float z) { return static_cast<float>(g(z)); };
        tol = Tolerance{1e-6, 1e-5};
      }
      if (tensor) imms.push_back(imm_enum("x_scale", "tensor"));
      r.check({x, p[0], p[1], s, b}, imms, naive_linear_i8(x, w, s, b, tensor, f, tol));
    }
  }
}

// CONV_WEIGHTS_I8 and CONV2D_I8 on CONV2D's ungrouped cases against tests/conv_i8_naive.h: the
// packing exactly, the convolution without and with each activation, both x_scale modes, with
// and without bias; groups other than 1 refused.
void cases_conv_weights_i8(ParityRun& r) {
  const Shape shapes[] = {Shape{1, 1, 3, 3}, Shape{4, 3, 3, 3},   Shape{7, 15, 1, 1},
                          Shape{16, 17, 3, 3}, Shape{33, 5, 5, 5}, Shape{3, 2, 7, 1}};
  for (const Shape& s : shapes) {
    const HostTensor w = random_i8(s, r.rng());
    const std::vector<HostTensor> p = naive_pack_conv_i8(w);
    r.check_all({w}, {}, {Expected{p[0], {}, EXACT}, Expected{p[1], {}, EXACT}});
  }
}

void cases_conv2d_i8(ParityRun& r) {
  int n = 0;
  for (int a = -1; a < static_cast<int>(linear_acts().size()); ++a) {
    for (size_t ci = 0; ci < conv_cases().size(); ++ci) {
      const ConvCase& c = conv_cases()[ci];
      if (c.groups != 1) continue;
      if (a >= 0 && ci % 3 != static_cast<size_t>(a) % 3) continue;  // each activation on a third of the cases
      const HostTensor x = random_f32(Shape{c.n, c.c, c.h, c.w}, r.rng());
      const HostTensor w = random_i8(Shape{c.o, c.c, c.kh, c.kw}, r.rng());
      const std::vector<HostTensor> p = naive_pack_conv_i8(w);
      const HostTensor s = random_f32(Shape{n % 2 ? 1 : c.o}, r.rng(), 0.001, 0.02);
      const bool bias = n % 4 != 3, tensor = n % 3 == 1;
      ++n;
      const HostTensor b = bias ? random_f32(Shape{c.o}, r.rng()) : HostTensor{TensorType{DType::F32, Shape{c.o}}, {}};
      std::vector<ImmArg> imms = conv_imms(c);
      std::function<float(float)> f = [](float z) { return z; };
      Tolerance tol = EXACT;
      if (a >= 0) {
        imms.insert(imms.end(), {imm_enum("act", linear_acts()[a].name), imm_f("act_alpha", linear_acts()[a].alpha)});
        const std::function<double(double)> g = linear_acts()[a].f;
        f = [g](float z) { return static_cast<float>(g(z)); };
        tol = Tolerance{1e-6, 1e-5};
      }
      if (tensor) imms.push_back(imm_enum("x_scale", "tensor"));
      const ConvI8Geom g{c.stride[0], c.stride[1], c.pad[0], c.pad[1], c.dilation[0], c.dilation[1]};
      const Expected e = naive_conv2d_i8(x, w, s, b, g, tensor, f, tol);
      if (bias) r.check({x, p[0], p[1], s, b}, imms, e);
      else r.check({x, p[0], p[1], s}, imms, e);
    }
  }
  const HostTensor x = random_f32(Shape{1, 4, 6, 6}, r.rng());
  const std::vector<HostTensor> p = naive_pack_conv_i8(random_i8(Shape{2, 2, 3, 3}, r.rng()));
  r.check_rejected({x, p[0], p[1], random_f32(Shape{2}, r.rng())}, {imm_i("groups", 2)}, "groups must be 1");
}

// CONV_WEIGHTS_BF16 and CONV2D_BF16 on CONV2D's ungrouped sizes against tests/conv_bf16_naive.h:
// the transpose exactly; the convolution (wt from the naive transpose) without an activation and with each on a
// third of the cases, every third case without its bias; a grouped one refused.
void cases_conv_weights_bf16(ParityRun& r) {
  for (const ConvCase& c : conv_cases()) {
    const HostTensor w = random_bf16(Shape{c.o, c.c / c.groups, c.kh, c.kw}, r.rng(), -2, 2);
    r.check({w}, {}, Expected{transpose_conv_weight(w), {}, EXACT});
  }
  for (int64_t n : SWEEP) {  // the size sweep, as O and as C
    for (const Shape& s : {Shape{n, 1, 1, 1}, Shape{2, n, 1, 3}}) {
      const HostTensor w = random_bf16(s, r.rng(), -2, 2);
      r.check({w}, {}, Expected{transpose_conv_weight(w), {}, EXACT});
    }
  }
}

void cases_conv2d_bf16(ParityRun& r) {
  for (int a = -1; a < static_cast<int>(linear_acts().size()); ++a) {
    int n = 0;
    for (size_t ci = 0; ci < conv_cases().size(); ++ci) {
      const ConvCase& c = conv_cases()[ci];
      if (c.groups != 1) continue;
      if (a >= 0 && ci % 3 != static_cast<size_t>(a) % 3) continue;  // each activation on a third of the cases, as CONV2D's
      const HostTensor x = random_f32(Shape{c.n, c.c, c.h, c.w}, r.rng());
      const HostTensor w = random_bf16(Shape{c.o, c.c, c.kh, c.kw}, r.rng(), -1, 1);
      const bool bias = n++ % 3 != 2;
      const HostTensor b = bias ? random_f32(Shape{c.o}, r.rng()) : HostTensor{TensorType{DType::F32, Shape{c.o}}, {}};
      const ConvBf16Geom g{c.stride[0], c.stride[1], c.pad[0], c.pad[1], c.dilation[0], c.dilation[1]};
      std::vector<ImmArg> imms = conv_imms(c);
      std::function<double(double)> f = [](double z) { return z; };
      if (a >= 0) {
        imms.insert(imms.end(), {imm_enum("act", linear_acts()[a].name), imm_f("act_alpha", linear_acts()[a].alpha)});
        f = linear_acts()[a].f;
      }
      const HostTensor wt = transpose_conv_weight(w);
      if (bias) r.check({x, wt, b}, imms, naive_conv2d_bf16(x, w, b, g, f));
      else r.check({x, wt}, imms, naive_conv2d_bf16(x, w, b, g, f));
    }
  }
  // Grouped and depthwise convolutions stay f32 (CONV2D).
  const HostTensor x = random_f32(Shape{1, 4, 5, 5}, r.rng());
  r.check_rejected({x, random_bf16(Shape{2, 3, 3, 4}, r.rng(), -1, 1)}, {imm_i("groups", 2)}, "groups must be 1");
}
