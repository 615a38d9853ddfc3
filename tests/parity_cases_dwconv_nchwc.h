// Parity cases of DWCONV2D_NCHWC. A fragment of tests/ops_parity_test.cpp, included inside its
// namespace after its convolution cases (it uses ParityRun, sum_tol and linear_acts). The oracle
// is tests/nchwc_dwconv_naive.h's NCHW loop, the operands packed by the test; the channel counts
// of the sweep are the bias's, at both block sizes (b = 16 below AVX-512 runs the reference).
// tests/nchwc_dwconv_test.cpp runs more geometries at every level explicitly.

// One case on blocks of b with linear_acts()[a] fused (a < 0: none, the default immediates).
void dwconv2d_nchwc_case(ParityRun& r, const DwCase& k, int64_t b, int a) {
  const int64_t cb = dw_blocks(k.c, b), ho = k.ho(), wo = k.wo();
  const HostTensor x = random_f32(Shape{k.n, k.c, k.h, k.w}, r.rng());
  const HostTensor w = random_f32(Shape{k.c, 1, k.kh, k.kw}, r.rng());
  const HostTensor bias = random_f32(Shape{k.c}, r.rng());
  std::vector<double> want, mag;
  dw_naive(k, x.v, w.v, k.bias ? bias.v : std::vector<double>{}, &want, &mag);  // k.act is none
  const Shape ys{k.n, cb, ho, wo, b};
  const Tolerance st = sum_tol(k.kh * k.kw + 1);
  Expected e{HostTensor{TensorType{DType::F32, ys}, {}}, {}, a < 0 ? st : Tolerance{st.atol + 1e-6, 1.2 * st.rtol + 1e-6}};
  for (int64_t i = 0; i < count_of(ys); ++i) {
    const std::vector<int64_t> at = unravel(i, ys);  // n, block, oy, ox, lane
    const int64_t c = at[1] * b + at[4];
    const size_t src = static_cast<size_t>(((at[0] * k.c + c) * ho + at[2]) * wo + at[3]);
    const double z = c < k.c ? want[src] : 0;  // padding lanes: zeros in, act(0) out
    e.t.v.push_back(a < 0 ? z : linear_acts()[a].f(z));
    e.mag.push_back(c < k.c ? mag[src] : 0);
  }
  std::vector<ImmArg> imms = {imm_ints("stride", {k.sh, k.sw}), imm_ints("pad", {k.ph, k.pw}),
                              imm_ints("dilation", {k.dh, k.dw})};
  if (a >= 0) imms.insert(imms.end(), {imm_enum("act", linear_acts()[a].name), imm_f("act_alpha", linear_acts()[a].alpha)});
  const HostTensor xp{TensorType{DType::F32, Shape{k.n, cb, k.h, k.w, b}}, dw_pack_activations(x.v, k.n, k.c, k.h, k.w, b)};
  const HostTensor wp{TensorType{DType::F32, Shape{cb, k.kh, k.kw, b}}, dw_pack_weights(w.v, k.c, k.kh, k.kw, b)};
  if (k.bias) r.check({xp, wp, bias}, imms, e);
  else r.check({xp, wp}, imms, e);
}

void cases_dwconv2d_nchwc(ParityRun& r) {
  struct Case {
    DwCase k;
    int64_t b;
  };
  const Case cases[] = {
      {{1, 1, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, true, "none"}, 8},
      {{2, 7, 9, 7, 3, 3, 2, 2, 1, 1, 1, 1, true, "none"}, 8},
      {{1, 15, 7, 7, 5, 5, 1, 1, 2, 2, 1, 1, true, "none"}, 16},
      {{1, 16, 14, 14, 3, 3, 1, 1, 1, 1, 1, 1, false, "none"}, 16},
      {{1, 17, 13, 11, 3, 3, 1, 2, 2, 0, 2, 1, true, "none"}, 8},
      {{2, 33, 6, 17, 3, 3, 2, 1, 1, 1, 1, 1, true, "none"}, 16},
  };
  for (const Case& c : cases) dwconv2d_nchwc_case(r, c.k, c.b, -1);
  // Each activation on one of the cases.
  for (size_t a = 0; a < linear_acts().size(); ++a) {
    const Case& c = cases[a % std::size(cases)];
    dwconv2d_nchwc_case(r, c.k, c.b, static_cast<int>(a));
  }
}
