// Parity cases and shape errors of the NCHW shape ops: FLATTEN, UPSAMPLE_NEAREST and
// GLOBAL_AVGPOOL. A fragment of tests/ops_parity_test.cpp, included inside its namespace after its
// helpers (ParityRun, random_of, EXACT, sum_tol) and before parity_table(), which names the
// cases_* functions below. Expectations are naive loops over output indices, written here.
#pragma once

void cases_flatten(ParityRun& r) {
  struct Case {
    Shape in;
    int64_t axis;  // 1 is left to the default
    DType dt;
  };
  const Case cases[] = {
      {Shape{2, 3, 4}, 1, DType::F32},         {Shape{2, 3, 4}, 0, DType::F32},
      {Shape{2, 3, 4}, 3, DType::F32},         {Shape{2, 3, 4}, -1, DType::F32},
      {Shape{2, 3, 4, 5}, -4, DType::F32},     {Shape(), 0, DType::F32},
      {Shape{7}, 1, DType::F32},               {Shape{15, 16}, 1, DType::F32},
      {Shape{17, 33}, -1, DType::F32},         {Shape{5, 4, 10, 10}, 1, DType::F32},
      {Shape{1, 2, 1, 3, 1, 2}, 3, DType::F32}, {Shape{2, 7, 3, 5}, 2, DType::I32},
      {Shape{1, 1031}, 1, DType::I32},
  };
  for (const Case& c : cases) {
    const HostTensor x = random_of(c.dt, c.in, r.rng());
    const int64_t axis = c.axis < 0 ? c.axis + c.in.rank : c.axis;
    int64_t rows = 1, cols = 1;
    for (int d = 0; d < c.in.rank; ++d) (d < axis ? rows : cols) *= c.in.dims[d];
    Expected e{HostTensor{TensorType{c.dt, shape_of({rows, cols})}, x.v}, {}, EXACT};
    std::vector<ImmArg> imms;
    if (c.axis != 1) imms.push_back(imm_i("axis", c.axis));
    r.check({x}, imms, e);
  }
}

void cases_upsample_nearest(ParityRun& r) {
  struct Case {
    Shape in;
    std::vector<int64_t> scale;  // [2,2] is left to the default
    DType dt;
  };
  const Case cases[] = {
      {Shape{2, 3, 5, 7}, {2, 2}, DType::F32},  {Shape{1, 1, 1, 1}, {1, 1}, DType::F32},
      {Shape{1, 1, 3, 5}, {1, 1}, DType::F32},  {Shape{1, 1, 4, 4}, {3, 1}, DType::F32},
      {Shape{1, 1, 1, 17}, {1, 4}, DType::F32}, {Shape{1, 3, 1, 11}, {2, 3}, DType::F32},
      {Shape{1, 1, 1, 1}, {5, 7}, DType::F32},  {Shape{2, 4, 17, 15}, {2, 3}, DType::F32},
      {Shape{1, 2, 7, 5}, {3, 2}, DType::I32},  {Shape{1, 1, 16, 33}, {2, 2}, DType::I32},
  };
  for (const Case& c : cases) {
    const HostTensor x = random_of(c.dt, c.in, r.rng());
    const int64_t sh = c.scale[0], sw = c.scale[1];
    const Shape ys = shape_of({c.in.dims[0], c.in.dims[1], c.in.dims[2] * sh, c.in.dims[3] * sw});
    Expected e{HostTensor{TensorType{c.dt, ys}, {}}, {}, EXACT};
    for (int64_t f = 0; f < count_of(ys); ++f) {
      const std::vector<int64_t> o = unravel(f, ys);
      e.t.v.push_back(x.v[ravel({o[0], o[1], o[2] / sh, o[3] / sw}, c.in)]);
    }
    std::vector<ImmArg> imms;
    if (c.scale != std::vector<int64_t>{2, 2}) imms.push_back(imm_ints("scale", c.scale));
    r.check({x}, imms, e);
  }
}

const std::vector<Shape>& global_avgpool_shapes() {
  static const std::vector<Shape> shapes = {Shape{1, 1, 1, 1}, Shape{1, 7, 1, 1},  Shape{2, 3, 5, 7},
                                            Shape{1, 1, 15, 1}, Shape{1, 2, 4, 4}, Shape{3, 1, 1, 17},
                                            Shape{1, 1, 33, 16}, Shape{2, 3, 33, 31}};
  return shapes;
}

// GLOBAL_AVGPOOL of x [N, C, H, W]: each plane's mean, with the mean of its |x| as the magnitude.
Expected global_avgpool_expected(const HostTensor& x) {
  const Shape& s = x.type.shape;
  const int64_t len = s.dims[2] * s.dims[3];
  Expected e{HostTensor{TensorType{DType::F32, shape_of({s.dims[0], s.dims[1], 1, 1})}, {}}, {}, sum_tol(len)};
  for (int64_t n = 0; n < s.dims[0]; ++n)
    for (int64_t c = 0; c < s.dims[1]; ++c) {
      double acc = 0, mag = 0;
      for (int64_t h = 0; h < s.dims[2]; ++h)
        for (int64_t w = 0; w < s.dims[3]; ++w) {
          const double v = x.v[ravel({n, c, h, w}, s)];
          acc += v;
          mag += std::fabs(v);
        }
      e.t.v.push_back(acc / static_cast<double>(len));
      e.mag.push_back(mag / static_cast<double>(len));
    }
  return e;
}

void cases_global_avgpool(ParityRun& r) {
  for (const Shape& s : global_avgpool_shapes()) {
    const HostTensor x = random_f32(s, r.rng());
    r.check({x}, {}, global_avgpool_expected(x));
  }
}

TEST(OpShapeErrors, FlattenUpsampleGlobalAvgPool) {
  const auto f32 = [](std::initializer_list<int64_t> d) { return TensorType{DType::F32, Shape(d)}; };
  EXPECT_TRUE(append_fails(Opcode::FLATTEN, {f32({2, 3})}, {imm_i("axis", 3)},
                           {"FLATTEN: axis 3 is out of range for operand 1 (f32[2,3])", "allowed -2..2"}));
  EXPECT_TRUE(append_fails(Opcode::FLATTEN, {f32({2, 3})}, {imm_i("axis", -3)}, {"FLATTEN: axis -3", "f32[2,3]"}));
  EXPECT_TRUE(append_fails(Opcode::FLATTEN, {f32({})}, {}, {"FLATTEN: axis 1", "f32[]", "allowed 0..0"}));
  EXPECT_TRUE(append_fails(Opcode::UPSAMPLE_NEAREST, {f32({2, 3, 4})}, {},
                           {"UPSAMPLE_NEAREST: input operand 1 (f32[2,3,4]) must be NCHW (rank 4)"}));
  EXPECT_TRUE(append_fails(Opcode::UPSAMPLE_NEAREST, {f32({1, 2, 3, 4})}, {imm_ints("scale", {2})},
                           {"UPSAMPLE_NEAREST: scale must have 2 entries [h, w], got [2]"}));
  EXPECT_TRUE(append_fails(Opcode::UPSAMPLE_NEAREST, {f32({1, 2, 3, 4})}, {imm_ints("scale", {0, 2})},
                           {"UPSAMPLE_NEAREST: scale [0,2] must be whole numbers from 1"}));
  EXPECT_TRUE(append_fails(Opcode::UPSAMPLE_NEAREST, {f32({1, 2, 3, 4})}, {imm_ints("scale", {2, -1})},
                           {"UPSAMPLE_NEAREST: scale [2,-1]"}));
  EXPECT_TRUE(append_fails(Opcode::UPSAMPLE_NEAREST, {f32({2, 3, 64, 64})}, {imm_ints("scale", {65536, 65536})},
                           {"UPSAMPLE_NEAREST: operand 1 (f32[2,3,64,64]) scaled by [65536,65536] exceeds"}));
  EXPECT_TRUE(append_fails(Opcode::GLOBAL_AVGPOOL, {f32({3, 4})}, {},
                           {"GLOBAL_AVGPOOL: input operand 1 (f32[3,4]) must be NCHW (rank 4)"}));
  EXPECT_TRUE(append_fails(Opcode::GLOBAL_AVGPOOL, {TensorType{DType::I32, Shape{1, 2, 3, 4}}}, {},
                           {"GLOBAL_AVGPOOL: operand 1 (i32[1,2,3,4]) must be f32"}));
}
