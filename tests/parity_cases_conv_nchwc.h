// Parity cases of CONV2D_NCHWC (included by ops_parity_test.cpp): the contract's sum written out
// over the blocked operands' indices, over every lane, the padding lanes of x and w holding
// random values too (the op defines all of y's lanes from all of theirs), at b = 8 and 16, with
// each fused activation on some of the cases, some cases with a residual r (added before the
// activation, its padding lanes random too). groups must be 1: a case with 2 is refused.
// tests/conv_nchwc_test.cpp checks the op against a convolution over plain NCHW data instead.

struct NchwcConvCase {
  int64_t n, cb, h, w, ob, kh, kw;
  std::vector<int64_t> stride, pad, dilation;
  int64_t o;  // the bias's length; 0: no bias
  int64_t b;
  bool residual = false;  // a last input r shaped as y, added before the activation
};

void cases_conv2d_nchwc(ParityRun& r) {
  const NchwcConvCase cases[] = {
      {1, 1, 7, 7, 1, 3, 3, {1, 1}, {1, 1}, {1, 1}, 7, 8},
      {2, 2, 15, 9, 2, 3, 3, {2, 2}, {1, 1}, {1, 1}, 17, 16},
      {1, 3, 5, 33, 2, 1, 1, {1, 1}, {0, 0}, {1, 1}, 16, 8},
      {1, 1, 16, 16, 3, 5, 5, {1, 2}, {2, 0}, {2, 1}, 33, 16},
      {1, 2, 1, 1, 1, 1, 1, {1, 1}, {0, 0}, {1, 1}, 0, 16},
      {2, 1, 6, 7, 2, 3, 3, {2, 1}, {3, 3}, {1, 1}, 15, 8},
      {1, 1, 7, 7, 1, 3, 3, {1, 1}, {1, 1}, {1, 1}, 7, 8, true},
      {2, 2, 9, 5, 2, 3, 3, {2, 1}, {1, 1}, {1, 1}, 0, 16, true},
      {1, 3, 5, 33, 3, 1, 1, {1, 1}, {0, 0}, {1, 1}, 0, 8, true},
      {1, 1, 1, 1, 1, 1, 1, {1, 1}, {0, 0}, {1, 1}, 16, 16, true},
      {1, 2, 13, 11, 2, 5, 5, {1, 2}, {2, 2}, {1, 1}, 17, 16, true},
      {1, 1, 3, 3, 1, 3, 3, {1, 1}, {1, 1}, {1, 1}, 0, 8, true},
  };
  for (int a = -1; a < static_cast<int>(linear_acts().size()); ++a)
    for (size_t ci = 0; ci < std::size(cases); ++ci) {
      const NchwcConvCase& c = cases[ci];
      if (a >= 0 && ci % 2 != static_cast<size_t>(a) % 2) continue;  // each activation on half the cases
      const int64_t b = c.b;
      const HostTensor x = random_f32(shape_of({c.n, c.cb, c.h, c.w, b}), r.rng());
      const HostTensor w = random_f32(shape_of({c.ob, c.cb, c.kh, c.kw, b, b}), r.rng());
      const HostTensor bias = random_f32(Shape{std::max<int64_t>(c.o, 1)}, r.rng());
      const int64_t ho = conv_out(c.h, c.kh, c.stride[0], c.pad[0], c.dilation[0]);
      const int64_t wo = conv_out(c.w, c.kw, c.stride[1], c.pad[1], c.dilation[1]);
      const Shape ys = shape_of({c.n, c.ob, ho, wo, b});
      const HostTensor res = c.residual ? random_f32(ys, r.rng()) : HostTensor{};
      Expected e{HostTensor{TensorType{DType::F32, ys}, {}}, {}, {}};
      for (int64_t yi = 0; yi < count_of(ys); ++yi) {
        const std::vector<int64_t> at = unravel(yi, ys);  // n, ob, oy, ox, co
        const int64_t channel = at[1] * b + at[4];
        double s = channel < c.o ? bias.v[channel] : 0, mag = std::fabs(s);
        for (int64_t cb = 0; cb < c.cb; ++cb)
          for (int64_t i = 0; i < c.kh; ++i)
            for (int64_t j = 0; j < c.kw; ++j) {
              const int64_t iy = at[2] * c.stride[0] - c.pad[0] + i * c.dilation[0];
              const int64_t ix = at[3] * c.stride[1] - c.pad[1] + j * c.dilation[1];
              if (iy < 0 || iy >= c.h || ix < 0 || ix >= c.w) continue;
              for (int64_t l = 0; l < b; ++l) {
                const double t = w.v[ravel({at[1], cb, i, j, l, at[4]}, w.type.shape)] *
                                 x.v[ravel({at[0], cb, iy, ix, l}, x.type.shape)];
                s += t;
                mag += std::fabs(t);
              }
            }
        if (c.residual) {
          s += res.v[yi];
          mag += std::fabs(res.v[yi]);
        }
        e.t.v.push_back(a < 0 ? s : linear_acts()[a].f(s));
        e.mag.push_back(mag);
      }
      const Tolerance st = sum_tol(c.cb * b * c.kh * c.kw + 2);
      e.tol = a < 0 ? st : Tolerance{st.atol + 1e-6, 1.2 * st.rtol + 1e-6};
      std::vector<ImmArg> imms = {imm_ints("stride", c.stride), imm_ints("pad", c.pad), imm_ints("dilation", c.dilation)};
      if (a >= 0) imms.insert(imms.end(), {imm_enum("act", linear_acts()[a].name), imm_f("act_alpha", linear_acts()[a].alpha)});
      std::vector<HostTensor> in = {x, w};
      if (c.o) in.push_back(bias);
      if (c.residual) {
        in.push_back(res);
        imms.push_back(imm_b("residual", true));
      }
      r.check(in, imms, e);
    }
  const HostTensor x = random_f32(shape_of({1, 1, 5, 5, 8}), r.rng());
  const HostTensor w = random_f32(shape_of({1, 1, 3, 3, 8, 8}), r.rng());
  r.check_rejected({x, w}, {imm_i("groups", 2)}, "groups must be 1");
  r.check_rejected({x, w, random_f32(shape_of({1, 1, 5, 5, 8}), r.rng())}, {imm_b("residual", true)},
                   "must be shaped as the output");
}
