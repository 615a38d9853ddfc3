// Parity cases and shape errors of the indexing and selection ops: GATHER, GATHER_BWD and WHERE.
// A fragment of
// tests/ops_parity_test.cpp, included inside its namespace after its helpers (ParityRun,
// random_of, broadcast_ref, EXACT, sum_tol) and before parity_table(), which names the cases_* functions below.
// Expectations are naive loops over output indices, written here.
#pragma once

// i32 indices for an axis of length n: mostly in range, negative ones among them, and (with
// `wild`) some out of range on either side.
HostTensor random_indices(const Shape& s, int64_t n, bool wild, std::mt19937& rng) {
  std::uniform_int_distribution<int64_t> in_range(-n, n - 1), out(n, n + 3);
  HostTensor t{TensorType{DType::I32, s}, {}};
  for (int64_t i = 0; i < count_of(s); ++i) {
    int64_t v = in_range(rng);
    if (wild && i % 5 == 3) v = i % 2 ? out(rng) : -out(rng) - 1;
    t.v.push_back(static_cast<double>(v));
  }
  return t;
}

struct GatherCase {
  Shape data, indices;
  int64_t axis;  // 0 is left to the default
  DType dt;
  bool wild;  // out-of-range indices among them
};

std::vector<GatherCase> gather_cases() {
  return {
      {Shape{7, 16}, Shape{15}, 0, DType::F32, false},        // an embedding: rows of 16
      {Shape{33, 17}, Shape{2, 3}, 0, DType::F32, true},      // a batch of token ids
      {Shape{1, 7}, Shape{1}, 0, DType::F32, false},
      {Shape{16}, Shape{17}, 0, DType::F32, true},            // rows of one element
      {Shape{5}, Shape(), 0, DType::F32, false},              // a scalar index drops the axis
      {Shape{3, 15}, Shape{4}, 1, DType::F32, true},
      {Shape{2, 33, 5}, Shape{7}, -2, DType::F32, true},
      {Shape{2, 3, 4, 5}, Shape{2, 2}, 2, DType::F32, false},
      {Shape{2, 3, 4}, Shape(), -1, DType::F32, false},
      {Shape{1031, 3}, Shape{1031}, 0, DType::F32, true},     // large
      {Shape{70, 65}, Shape{33}, 1, DType::F32, false},
      {Shape{2, 1, 3}, Shape{1, 2, 1, 2}, 1, DType::F32, false},  // rank 6 out
      {Shape{9, 4}, Shape{6}, 0, DType::I32, true},
      {Shape{3, 16}, Shape{2, 3}, -1, DType::I32, false},
  };
}

// GATHER's y for `data` and indices `idx`, written out: zeros for out-of-range indices.
HostTensor gather_naive(const HostTensor& data, const HostTensor& idx, int axis) {
  const Shape& d = data.type.shape;
  const Shape& q = idx.type.shape;
  std::vector<int64_t> yd(d.dims.begin(), d.dims.begin() + axis);
  yd.insert(yd.end(), q.dims.begin(), q.dims.begin() + q.rank);
  yd.insert(yd.end(), d.dims.begin() + axis + 1, d.dims.begin() + d.rank);
  const Shape ys = shape_of(yd);
  HostTensor y{TensorType{data.type.dtype, ys}, {}};
  for (int64_t f = 0; f < count_of(ys); ++f) {
    const std::vector<int64_t> o = unravel(f, ys);
    std::vector<int64_t> qi(o.begin() + axis, o.begin() + axis + q.rank);
    int64_t r = static_cast<int64_t>(idx.v[ravel(qi, q)]);
    if (r < 0) r += d.dims[axis];
    if (r < 0 || r >= d.dims[axis]) {
      y.v.push_back(0);
      continue;
    }
    std::vector<int64_t> di(o.begin(), o.begin() + axis);
    di.push_back(r);
    di.insert(di.end(), o.begin() + axis + q.rank, o.end());
    y.v.push_back(data.v[ravel(di, d)]);
  }
  return y;
}

void cases_gather(ParityRun& r) {
  for (const GatherCase& c : gather_cases()) {
    const int axis = axis_ref(c.axis, c.data.rank);
    const HostTensor data = random_of(c.dt, c.data, r.rng());
    const HostTensor idx = random_indices(c.indices, c.data.dims[axis], c.wild, r.rng());
    std::vector<ImmArg> imms;
    if (c.axis != 0) imms.push_back(imm_i("axis", c.axis));
    r.check({data, idx}, imms, Expected{gather_naive(data, idx, axis), {}, EXACT});
  }
}

void cases_gather_bwd(ParityRun& r) {
  for (const GatherCase& c : gather_cases()) {
    if (c.dt != DType::F32) continue;
    const int axis = axis_ref(c.axis, c.data.rank);
    const HostTensor data = random_f32(c.data, r.rng());  // only its shape counts
    const HostTensor idx = random_indices(c.indices, c.data.dims[axis], c.wild, r.rng());
    // dy shaped as GATHER's y; scattered back by walking every position of it.
    const HostTensor dy = random_f32(gather_naive(data, idx, axis).type.shape, r.rng());
    const Shape& ys = dy.type.shape;
    const Shape& q = idx.type.shape;
    Expected e{HostTensor{data.type, std::vector<double>(data.v.size(), 0)}, std::vector<double>(data.v.size(), 0),
               sum_tol(count_of(q))};
    for (int64_t f = 0; f < count_of(ys); ++f) {
      const std::vector<int64_t> o = unravel(f, ys);
      std::vector<int64_t> qi(o.begin() + axis, o.begin() + axis + q.rank);
      int64_t row = static_cast<int64_t>(idx.v[ravel(qi, q)]);
      if (row < 0) row += c.data.dims[axis];
      if (row < 0 || row >= c.data.dims[axis]) continue;
      std::vector<int64_t> di(o.begin(), o.begin() + axis);
      di.push_back(row);
      di.insert(di.end(), o.begin() + axis + q.rank, o.end());
      e.t.v[ravel(di, c.data)] += dy.v[f];
      e.mag[ravel(di, c.data)] += std::fabs(dy.v[f]);
    }
    std::vector<ImmArg> imms;
    if (c.axis != 0) imms.push_back(imm_i("axis", c.axis));
    r.check({dy, idx, data}, imms, e);
  }
}

// Out-of-range indices, and indices at the limits of i32, never reach outside the data.
TEST(OpSpecialValues, GatherOutOfRangeIndicesGiveZeros) {
  const HostTensor data = host(DType::F32, Shape{3, 2}, {1, 2, 3, 4, 5, 6});
  const HostTensor idx = host(DType::I32, Shape{6}, {2, -1, 3, -4, 2147483647.0, -2147483648.0});
  EXPECT_TRUE(matches(Expected{host(DType::F32, Shape{6, 2}, {5, 6, 5, 6, 0, 0, 0, 0, 0, 0, 0, 0}), {}, EXACT},
                      run_op(Opcode::GATHER, {data, idx}, {})));
  const HostTensor dy = host(DType::F32, Shape{6, 2}, {1, 2, 10, 20, 100, 200, 7, 7, 7, 7, 7, 7});
  EXPECT_TRUE(matches(Expected{host(DType::F32, Shape{3, 2}, {0, 0, 0, 0, 11, 22}), {}, EXACT},
                      run_op(Opcode::GATHER_BWD, {dy, idx, data}, {})));
  // NaN payloads and i32 values are copied as bits.
  const HostTensor nan = host_f32({NaN, -INF, 1});
  const OpOutput y = run_op(Opcode::GATHER, {nan, host(DType::I32, Shape{2}, {0, 1})}, {});
  ASSERT_TRUE(y.status) << y.status.message();
  EXPECT_TRUE(std::isnan(y.v[0]));
  EXPECT_EQ(y.v[1], -INF);
}

TEST(OpShapeErrors, GatherAndGatherBwd) {
  const auto f32 = [](std::initializer_list<int64_t> d) { return TensorType{DType::F32, Shape(d)}; };
  const auto i32 = [](std::initializer_list<int64_t> d) { return TensorType{DType::I32, Shape(d)}; };
  EXPECT_TRUE(append_fails(Opcode::GATHER, {f32({3, 4}), f32({2})}, {},
                           {"GATHER: indices operand 2 (f32[2]) must be i32"}));
  EXPECT_TRUE(append_fails(Opcode::GATHER, {f32({3, 4}), i32({2})}, {imm_i("axis", 2)},
                           {"GATHER: axis 2 is out of range for operand 1 (f32[3,4])"}));
  EXPECT_TRUE(append_fails(Opcode::GATHER, {f32({}), i32({2})}, {}, {"GATHER", "f32[]"}));
  EXPECT_TRUE(append_fails(Opcode::GATHER, {f32({3, 4, 5}), i32({1, 1, 1, 1, 1})}, {imm_i("axis", 1)},
                           {"GATHER: operand 1 (f32[3,4,5]) indexed by i32[1,1,1,1,1] along axis 1 would have rank 7"}));
  EXPECT_TRUE(append_fails(Opcode::GATHER, {f32({2, 65536}), i32({65537})}, {},
                           {"GATHER: operand 1 (f32[2,65536]) indexed by i32[65537] exceeds"}));
  EXPECT_TRUE(append_fails(Opcode::GATHER_BWD, {f32({2, 4}), i32({2}), f32({3, 5})}, {},
                           {"GATHER_BWD: operand 1 (f32[2,4]) must be [2,5]"}));
  EXPECT_TRUE(append_fails(Opcode::GATHER_BWD, {f32({2, 4}), i32({2}), i32({3, 4})}, {},
                           {"GATHER_BWD", "operand 3 (i32[3,4])", "f32"}));
  EXPECT_TRUE(append_fails(Opcode::GATHER_BWD, {f32({2, 4}), f32({2}), f32({3, 4})}, {},
                           {"GATHER_BWD: indices operand 2 (f32[2]) must be i32"}));
}

// WHERE: cond, a, b broadcast together. cond f32 has zeros of both signs and NaN (true) among
// random values, or is i32 with zeros among small integers.
HostTensor random_cond(DType dt, const Shape& s, std::mt19937& rng) {
  std::uniform_int_distribution<int> pick(0, 5);
  HostTensor t{TensorType{dt, s}, {}};
  for (int64_t i = 0; i < count_of(s); ++i) {
    const int p = pick(rng);
    if (dt == DType::I32) t.v.push_back(p < 2 ? 0 : p - 3);  // 0, 0, 0, 1, 2, -1... as p varies
    else t.v.push_back(p == 0 ? 0.0 : p == 1 ? -0.0 : p == 2 ? NaN : static_cast<float>(p - 3.5));
  }
  return t;
}

void cases_where(ParityRun& r) {
  struct Case {
    Shape c, a, b;
    DType cond_dt, dt;
  };
  std::vector<Case> cases;
  for (const Shape& s : elementwise_shapes()) cases.push_back({s, s, s, DType::F32, DType::F32});
  const std::vector<Case> more = {
      {Shape{3, 1}, Shape{3, 4}, Shape{4}, DType::F32, DType::F32},
      {Shape{4}, Shape(), Shape{3, 4}, DType::F32, DType::F32},        // masked_fill: a scalar
      {Shape{2, 1, 16}, Shape{2, 7, 16}, Shape(), DType::F32, DType::F32},
      {Shape{1, 1, 17, 17}, Shape{2, 3, 17, 17}, Shape{1}, DType::I32, DType::F32},  // an attention mask
      {Shape{33}, Shape{33}, Shape{33}, DType::I32, DType::F32},
      {Shape{65, 70}, Shape{65, 1}, Shape{1, 70}, DType::F32, DType::F32},
      {Shape{15}, Shape{7, 15}, Shape{7, 1}, DType::F32, DType::I32},
      {Shape{1031}, Shape{1031}, Shape(), DType::I32, DType::I32},
      {Shape{2, 3, 1, 5}, Shape{3, 4, 1}, Shape{5}, DType::F32, DType::F32},
  };
  cases.insert(cases.end(), more.begin(), more.end());
  for (const Case& c : cases) {
    const HostTensor cond = random_cond(c.cond_dt, c.c, r.rng());
    const HostTensor a = random_of(c.dt, c.a, r.rng()), b = random_of(c.dt, c.b, r.rng());
    const Shape so = broadcast_ref(broadcast_ref(c.c, c.a), c.b);
    Expected e{HostTensor{TensorType{c.dt, so}, {}}, {}, EXACT};
    for (int64_t i = 0; i < count_of(so); ++i) {
      const std::vector<int64_t> idx = unravel(i, so);
      const double cv = cond.v[broadcast_offset(idx, 0, c.c)];
      e.t.v.push_back(cv != 0 ? a.v[broadcast_offset(idx, 0, c.a)] : b.v[broadcast_offset(idx, 0, c.b)]);
    }
    r.check({cond, a, b}, {}, e);
  }
}

TEST(OpSpecialValues, WhereConditionNaNIsTrueZerosFalse) {
  const HostTensor cond = host_f32({NaN, 0, -0.0, 1e-40, -INF, 2});
  const HostTensor a = host_f32({1, 2, 3, 4, 5, 6}), b = host_f32({-1, -2, -3, -4, -5, -6});
  EXPECT_TRUE(matches(Expected{host_f32({1, -2, -3, 4, 5, 6}), {}, EXACT}, run_op(Opcode::WHERE, {cond, a, b}, {})));
  const HostTensor ic = host(DType::I32, Shape{6}, {0, 1, -1, 2147483647.0, -2147483648.0, 0});
  EXPECT_TRUE(matches(Expected{host_f32({-1, 2, 3, 4, 5, -6}), {}, EXACT}, run_op(Opcode::WHERE, {ic, a, b}, {})));
}

TEST(OpShapeErrors, Where) {
  const auto f32 = [](std::initializer_list<int64_t> d) { return TensorType{DType::F32, Shape(d)}; };
  const auto i32 = [](std::initializer_list<int64_t> d) { return TensorType{DType::I32, Shape(d)}; };
  EXPECT_TRUE(append_fails(Opcode::WHERE, {f32({3, 4}), f32({5}), f32({4})}, {},
                           {"WHERE: operand 1 (f32[3,4]), operand 2 (f32[5]) and operand 3 (f32[4]) do not broadcast"}));
  EXPECT_TRUE(append_fails(Opcode::WHERE, {f32({3, 1}), f32({4}), f32({2, 2, 1})}, {}, {"WHERE", "do not broadcast"}));
  EXPECT_TRUE(append_fails(Opcode::WHERE, {i32({4}), f32({4}), i32({4})}, {},
                           {"WHERE: operand 2 (f32[4]) and operand 3 (i32[4]) must have one dtype"}));
}
