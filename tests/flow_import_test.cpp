// Tests of the Myelin flow reader and importer (serialize/flow/): flow files built byte by byte
// (tests/flow_writer.h) at every version the reader knows, imported, run, and compared with plain
// loops; every unsupported operation reported in one pass while the rest imports and runs; every
// prefix of a valid file and one file per kind of malformed field refused with a message naming
// the byte offset and what was being read.
#include "serialize/flow/flow_import.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <random>

#include "engine/executor.h"
#include "serialize/listing.h"
#include "tests/flow_writer.h"
#include "tests/temp_dir_test.h"

namespace nnasm {
namespace {

std::vector<float> random_values(size_t n, uint32_t seed, float lo = -1, float hi = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

std::string mlp_bytes(int version) {
  return flow_bytes(flow_mlp_spec(version, random_values(20, 1), random_values(5, 2), random_values(15, 3),
                                  random_values(3, 4)));
}

// A flow imported into a program of its own, prepared when the import worked.
struct Imported {
  Context ctx;
  Program p{ctx};
  ImportReport report;
  Status status;
  std::unique_ptr<Executor> ex;

  void set(const std::string& name, const std::vector<float>& v) {
    Tensor* t = ex->tensor(name);
    ASSERT_NE(t, nullptr) << name;
    ASSERT_EQ(static_cast<size_t>(t->numel()), v.size()) << name;
    std::copy(v.begin(), v.end(), t->f32());
  }
  std::vector<float> get(const std::string& name) const {
    Tensor* t = ex->tensor(name);
    if (!t) return {};
    return std::vector<float>(t->f32(), t->f32() + t->numel());
  }
  bool has_note(const std::string& fragment) const {
    for (const std::string& n : report.notes)
      if (n.find(fragment) != std::string::npos) return true;
    return false;
  }
};

std::unique_ptr<Imported> import_flow(const std::string& bytes, const FlowImportOptions& o = {}) {
  auto m = std::make_unique<Imported>();
  m->status = flow_import_bytes(bytes, "test.flow", &m->p, &m->report, o);
  if (!m->status) return m;
  Result<std::unique_ptr<Executor>> ex = Executor::prepare(m->p);
  if (!ex) {
    m->status = ex.status();
    return m;
  }
  m->ex = std::move(ex.value());
  return m;
}

std::vector<std::string> output_names(const Program& p) {
  std::vector<std::string> v;
  for (TensorId id : p.outputs()) v.push_back(p.desc(id).name);
  return v;
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-5 * (1 + std::fabs(want[i]))) << what << " [" << i << "]";
}

// The MLP of flow_mlp_spec in plain loops, in double: the hidden layer and the softmax.
void mlp_by_hand(const std::vector<float>& x, size_t rows, const std::vector<float>& w0, const std::vector<float>& b0,
                 const std::vector<float>& w1, const std::vector<float>& b1, std::vector<double>* hidden,
                 std::vector<double>* y) {
  hidden->assign(rows * 5, 0);
  y->assign(rows * 3, 0);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t j = 0; j < 5; ++j) {
      double s = b0[j];
      for (size_t i = 0; i < 4; ++i) s += double(x[r * 4 + i]) * w0[i * 5 + j];
      (*hidden)[r * 5 + j] = std::max(s, 0.0);
    }
    double z[3], zmax = -INFINITY, sum = 0;
    for (size_t k = 0; k < 3; ++k) {
      z[k] = b1[k];
      for (size_t j = 0; j < 5; ++j) z[k] += (*hidden)[r * 5 + j] * w1[j * 3 + k];
      zmax = std::max(zmax, z[k]);
    }
    for (size_t k = 0; k < 3; ++k) sum += std::exp(z[k] - zmax);
    for (size_t k = 0; k < 3; ++k) (*y)[r * 3 + k] = std::exp(z[k] - zmax) / sum;
  }
}

class FlowVersions : public ::testing::TestWithParam<int> {};

TEST_P(FlowVersions, TwoLayerMlpMatchesLoops) {
  const int version = GetParam();
  const std::vector<float> w0 = random_values(20, 1), b0 = random_values(5, 2), w1 = random_values(15, 3),
                           b1 = random_values(3, 4);
  FlowImportOptions o;
  o.batch = 3;
  auto m = import_flow(flow_bytes(flow_mlp_spec(version, w0, b0, w1, b1)), o);
  ASSERT_TRUE(m->status) << m->status.message();
  EXPECT_TRUE(m->report.complete());
  EXPECT_EQ(m->report.nodes, 6u);
  EXPECT_EQ(m->report.imported, 6u);
  // The connector's variable is an output too: another cell reads it.
  EXPECT_EQ(output_names(m->p), (std::vector<std::string>{"layer0_Relu_0", "output"}));
  EXPECT_TRUE(m->has_note("variable 'layer0/W' is @layer0_W")) << fmt::format("{}", fmt::join(m->report.notes, "\n"));
  EXPECT_TRUE(m->has_note("input %input: batch dimensions (-1) of [-1,4] set to 3"));
  // Learnable weights (a flag from version 5) are params; before that every weight is a constant.
  const Role want = version >= 5 ? Role::PARAM : Role::CONST;
  for (const char* w : {"layer0_W", "layer0_b", "layer1_W", "layer1_b"}) EXPECT_EQ(m->p.desc(m->p.find(w)).role, want) << w;

  const std::vector<float> x = random_values(12, 5, -2, 2);
  m->set("input", x);
  m->ex->run();
  std::vector<double> hidden, y;
  mlp_by_hand(x, 3, w0, b0, w1, b1, &hidden, &y);
  expect_close(m->get("output"), y, "output");
  expect_close(m->get("layer0_Relu_0"), hidden, "hidden");
}

INSTANTIATE_TEST_SUITE_P(Flow, FlowVersions, ::testing::Values(3, 4, 5, 6));

// The imported program is a program like any other: its listing reads back to the same listing.
TEST(FlowImport, ListingOfAnImportedProgramRoundTrips) {
  auto m = import_flow(mlp_bytes(6));
  ASSERT_TRUE(m->status) << m->status.message();
  const std::string text = program_print(m->p);
  Context ctx;
  Program q(ctx);
  ASSERT_TRUE(program_parse(text, "imported.nnasm", &q));
  EXPECT_EQ(program_print(q), text);
}

TEST(FlowImport, WeightsAsParamsMakesEveryFloatConstantAParam) {
  FlowImportOptions o;
  o.weights_as_params = true;
  auto m = import_flow(mlp_bytes(3), o);
  ASSERT_TRUE(m->status) << m->status.message();
  EXPECT_EQ(m->p.desc(m->p.find("layer1_W")).role, Role::PARAM);
}

// One operation on inputs a and b, [2,3] each, output y; `ints` adds an int32 constant "k".
FlowSpec one_op_spec(int version, const std::string& type, size_t n_in, const std::vector<int32_t>& y_shape,
                     const FlowAttrs& attrs = {}) {
  FlowSpec f;
  f.version = version;
  f.vars = {{"a", "float32", {2, 3}}, {"b", "float32", {2, 3}}, {"y", "float32", y_shape}};
  std::vector<std::string> in = {"a", "b"};
  in.resize(n_in);
  f.ops = {{"op", type, in, {"y"}, attrs}};
  f.funcs = {{"f", {"op"}}};
  return f;
}

TEST(FlowImport, ElementwiseOpsMatchLoops) {
  struct Case {
    const char* type;
    std::function<double(double, double)> fn;
    size_t n_in;
  };
  const Case cases[] = {
      {"Add", [](double a, double b) { return a + b; }, 2},     {"BiasAdd", [](double a, double b) { return a + b; }, 2},
      {"Sub", [](double a, double b) { return a - b; }, 2},     {"Mul", [](double a, double b) { return a * b; }, 2},
      {"Div", [](double a, double b) { return a / b; }, 2},     {"Maximum", [](double a, double b) { return std::max(a, b); }, 2},
      {"Minimum", [](double a, double b) { return std::min(a, b); }, 2},
      {"Neg", [](double a, double) { return -a; }, 1},           {"Abs", [](double a, double) { return std::fabs(a); }, 1},
      {"Exp", [](double a, double) { return std::exp(a); }, 1},  {"Log", [](double a, double) { return std::log(a); }, 1},
      {"Sqrt", [](double a, double) { return std::sqrt(a); }, 1}, {"Square", [](double a, double) { return a * a; }, 1},
      {"Relu", [](double a, double) { return std::max(a, 0.0); }, 1},
      {"Tanh", [](double a, double) { return std::tanh(a); }, 1},
      {"Sigmoid", [](double a, double) { return 1 / (1 + std::exp(-a)); }, 1},
      {"Identity", [](double a, double) { return a; }, 1},
  };
  for (const Case& c : cases) {
    auto m = import_flow(flow_bytes(one_op_spec(6, c.type, c.n_in, {2, 3})));
    ASSERT_TRUE(m->status) << c.type << ": " << m->status.message();
    EXPECT_TRUE(m->report.complete()) << c.type;
    // Positive inputs for Log and Sqrt, away from 0 for Div.
    const std::vector<float> a = random_values(6, 7, 0.5f, 2), b = random_values(6, 8, 0.5f, 2);
    m->set("a", a);
    if (c.n_in == 2) m->set("b", b);
    m->ex->run();
    std::vector<double> want;
    for (size_t i = 0; i < 6; ++i) want.push_back(c.fn(a[i], b[i]));
    expect_close(m->get("y"), want, c.type);
  }
}

TEST(FlowImport, MatMulTransposesSoftmaxAxisAndBroadcasting) {
  FlowSpec f;
  f.vars = {{"a", "float32", {3, 2}}, {"b", "float32", {4, 3}}, {"y", "float32", {2, 4}},
            {"bias", "float32", {4}, f32_bytes({1, -1, 0.5f, 2})}, {"z", "float32", {2, 4}},
            {"s", "float32", {2, 4}}};
  f.ops = {{"mm", "MatMul", {"a", "b"}, {"y"}, {{"transpose_a", "true"}, {"transpose_b", "1"}}},
           {"add", "Add", {"y", "bias"}, {"z"}, {}},
           {"sm", "Softmax", {"z"}, {"s"}, {{"axis", "0"}}}};
  f.funcs = {{"f", {"mm", "add", "sm"}}};
  auto m = import_flow(flow_bytes(f));
  ASSERT_TRUE(m->status) << m->status.message();
  const std::vector<float> a = random_values(6, 9), b = random_values(12, 10);
  m->set("a", a);
  m->set("b", b);
  m->ex->run();
  // y = aᵀ·bᵀ: y[i][j] = Σ_k a[k][i]·b[j][k]; s = softmax over axis 0 of y + bias.
  const float bias[] = {1, -1, 0.5f, 2};
  std::vector<double> z(8), s(8);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) {
      double acc = 0;
      for (int k = 0; k < 3; ++k) acc += double(a[k * 2 + i]) * b[j * 3 + k];
      z[i * 4 + j] = acc + bias[j];
    }
  for (int j = 0; j < 4; ++j) {
    const double mx = std::max(z[j], z[4 + j]);
    const double sum = std::exp(z[j] - mx) + std::exp(z[4 + j] - mx);
    for (int i = 0; i < 2; ++i) s[i * 4 + j] = std::exp(z[i * 4 + j] - mx) / sum;
  }
  expect_close(m->get("s"), s, "s");
}

TEST(FlowImport, ConcatV2JoinsAlongTheAxisInput) {
  for (int version : {3, 6}) {
    FlowSpec f;
    f.version = version;
    f.vars = {{"a", "float32", {2, 3}}, {"b", "float32", {2, 2}}, {"axis", "int32", {}, i32_bytes({-1})},
              {"c", "float32", {2, 5}}};
    f.ops = {{"cat", "ConcatV2", {"a", "b", "axis"}, {"c"}, {{"N", "2"}, {"Tidx", "int32"}}}};
    f.funcs = {{"f", {"cat"}}};
    auto m = import_flow(flow_bytes(f));
    ASSERT_TRUE(m->status) << m->status.message();
    EXPECT_TRUE(m->report.complete());
    const std::vector<float> a = random_values(6, 11), b = random_values(4, 12);
    m->set("a", a);
    m->set("b", b);
    m->ex->run();
    std::vector<double> want;
    for (int r = 0; r < 2; ++r) {
      for (int k = 0; k < 3; ++k) want.push_back(a[r * 3 + k]);
      for (int k = 0; k < 2; ++k) want.push_back(b[r * 2 + k]);
    }
    expect_close(m->get("c"), want, "c");
  }
}

TEST(FlowImport, ReshapeFromAShapeInputOrTheOutputShape) {
  FlowSpec f;
  f.vars = {{"x", "float32", {2, 6}}, {"shape", "int64", {2}, std::string("\x03\0\0\0\0\0\0\0\xff\xff\xff\xff\xff\xff\xff\xff", 16)},
            {"r", "float32", {3, 4}}, {"q", "float32", {-1, 12}}};
  f.ops = {{"reshape", "Reshape", {"x", "shape"}, {"r"}, {}}, {"flat", "Reshape", {"r"}, {"q"}, {}}};
  f.funcs = {{"f", {"reshape", "flat"}}};
  auto m = import_flow(flow_bytes(f));
  ASSERT_TRUE(m->status) << m->status.message();
  EXPECT_TRUE(m->report.complete()) << m->report.problems[0];
  EXPECT_EQ(m->p.desc(m->p.find("r")).type.shape, (Shape{3, 4}));
  EXPECT_EQ(m->p.desc(m->p.find("q")).type.shape, (Shape{1, 12}));
  const std::vector<float> x = random_values(12, 13);
  m->set("x", x);
  m->ex->run();
  expect_close(m->get("q"), std::vector<double>(x.begin(), x.end()), "q");
}

TEST(FlowImport, TransposeAndReductions) {
  FlowSpec f;
  f.vars = {{"x", "float32", {2, 3}}, {"t", "float32", {3, 2}}, {"rows", "float32", {2, 1}}, {"m", "float32", {}}};
  f.ops = {{"t", "Transpose", {"x"}, {"t"}, {{"perm", "[1, 0]"}}},
           {"rows", "Sum", {"x"}, {"rows"}, {{"axis", "1"}, {"keepdims", "true"}}},
           {"m", "Max", {"t"}, {"m"}, {}}};
  f.funcs = {{"f", {"t", "rows", "m"}}};
  auto m = import_flow(flow_bytes(f));
  ASSERT_TRUE(m->status) << m->status.message();
  EXPECT_TRUE(m->report.complete());
  const std::vector<float> x = random_values(6, 14);
  m->set("x", x);
  m->ex->run();
  expect_close(m->get("t"), {x[0], x[3], x[1], x[4], x[2], x[5]}, "t");
  expect_close(m->get("rows"), {double(x[0]) + x[1] + x[2], double(x[3]) + x[4] + x[5]}, "rows");
  expect_close(m->get("m"), {*std::max_element(x.begin(), x.end())}, "m");
}

// The shape ops one after the other, as a real model chains them; the op left out (Erf) makes its
// input an output.
TEST_P(FlowVersions, ShapeOpsChainAndTheOpLeftOutExposesItsInput) {
  const std::vector<float> table = {10, -20, 30, 0.5f};
  auto m = import_flow(flow_bytes(flow_shapes_spec(GetParam(), table)));
  ASSERT_TRUE(m->status) << m->status.message();
  EXPECT_EQ(m->report.problems, (std::vector<std::string>{"op 'odd' (type Erf): not supported"}));
  EXPECT_EQ(m->report.imported, 7u);
  EXPECT_EQ(output_names(m->p), (std::vector<std::string>{"rows", "top", "copy"}));
  EXPECT_NE(m->p.find("top_reshape"), NO_TENSOR);  // Max of everything: RESHAPE to one axis first
  const std::vector<float> x = random_values(6, 16);
  m->set("x", x);
  m->ex->run();
  // xr is xᵀ [3,2] reshaped to [2,3]: element k of it is xᵀ[k / 2][k % 2] = x[k % 2][k / 2].
  std::vector<double> rows(2, 0);
  double top = -INFINITY;
  for (int r = 0; r < 2; ++r) {
    for (int c = 0; c < 3; ++c) {
      const int k = r * 3 + c;
      const double v = x[(k % 2) * 3 + k / 2];
      rows[r] += v;
      top = std::max(top, v);
    }
    for (int c = 0; c < 2; ++c) {
      rows[r] += table[r * 2 + c];
      top = std::max(top, double(table[r * 2 + c]));
    }
  }
  expect_close(m->get("rows"), rows, "rows");
  expect_close(m->get("copy"), rows, "copy");
  expect_close(m->get("top"), {top}, "top");
}

// Reference stands for a weight it names (in Myelin, of another cell); Identity copies.
TEST(FlowImport, ReferenceAndIdentity) {
  for (int version : {4, 5}) {
    FlowSpec f;
    f.version = version;
    const std::vector<float> w = random_values(6, 15);
    f.vars = {{"instance", "resource", {}, "", FLOW_SPEC_REF},
              {"shared/W", "float32", {3, 2}, f32_bytes(w)},
              {"w_ref", "float32", {3, 2}, "", FLOW_SPEC_REF},
              {"w_out", "float32", {3, 2}, "", FLOW_SPEC_REF},
              {"x", "float32", {1, 3}},
              {"y", "float32", {1, 2}},
              {"z", "float32", {1, 2}}};
    f.ops = {{"ref", "Reference", {"instance"}, {"w_ref"}, {{"var", "shared/W"}}},
             {"ref2", "Reference", {"instance"}, {"w_out"}, {{"var", "shared/W"}}},
             {"mm", "MatMul", {"x", "w_ref"}, {"y"}, {}},
             {"id", "Identity", {"y"}, {"z"}, {}}};
    f.funcs = {{"f", {"ref", "ref2", "mm", "id"}}};
    auto m = import_flow(flow_bytes(f));
    ASSERT_TRUE(m->status) << m->status.message();
    EXPECT_TRUE(m->report.complete());
    EXPECT_EQ(m->report.imported, 4u);
    // The reference nobody reads is an output: a copy of the weight.
    EXPECT_EQ(output_names(m->p), (std::vector<std::string>{"z", "w_out"}));
    EXPECT_EQ(m->p.find("instance"), NO_TENSOR);  // the instance is never read
    const std::vector<float> x = {0.5f, -1, 2};
    m->set("x", x);
    m->ex->run();
    std::vector<double> want(2, 0);
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 3; ++k) want[j] += double(x[k]) * w[k * 2 + j];
    expect_close(m->get("z"), want, "z");
    expect_close(m->get("w_out"), std::vector<double>(w.begin(), w.end()), "w_out");
  }
}

TEST(FlowImport, UnsupportedOpsAreAllListedAndTheRestRuns) {
  FlowSpec f;
  f.vars = {{"x", "float32", {2, 2}}, {"a", "float32", {2, 2}}, {"b", "float32", {2, 2}}, {"c", "float32", {2, 2}},
            {"d", "float32", {2, 2}}, {"e", "float32", {2, 2}}, {"w64", "float64", {2, 2}, std::string(32, '\0')},
            {"g", "float32", {2, 2}}, {"h", "float32", {3, 3}}};
  f.ops = {{"a", "Relu", {"x"}, {"a"}, {}},
           {"b", "Erf", {"a"}, {"b"}, {}},              // unsupported: b becomes an input
           {"c", "Conv2D", {"x"}, {"c"}, {}},           // unsupported
           {"d", "Tanh", {"b"}, {"d"}, {}},
           {"e", "Add", {"a", "x"}, {"e"}, {}},
           {"g", "MatMul", {"x", "w64"}, {"g"}, {}},    // float64 weights
           {"h", "MatMul", {"x", "x"}, {"h"}, {}}};     // the file says [3,3], MATMUL makes [2,2]
  f.funcs = {{"f", {"a", "b", "c", "d", "e", "g", "h"}}};
  auto m = import_flow(flow_bytes(f));
  ASSERT_TRUE(m->status) << m->status.message();
  EXPECT_EQ(m->report.nodes, 7u);
  EXPECT_EQ(m->report.imported, 3u);
  ASSERT_EQ(m->report.problems.size(), 4u) << fmt::format("{}", fmt::join(m->report.problems, "\n"));
  EXPECT_EQ(m->report.problems[0], "op 'b' (type Erf): not supported");
  EXPECT_EQ(m->report.problems[1], "op 'c' (type Conv2D): not supported");
  EXPECT_EQ(m->report.problems[2],
            "op 'g' (type MatMul): input 1 'w64': float64 has no nnasm element type (only float32 and int32 have)");
  EXPECT_EQ(m->report.problems[3], "op 'h' (type MatMul): output 'h' is float32[3,3] in the file, but MATMUL makes f32[2,2]");
  EXPECT_TRUE(m->has_note("input %b: computed by operation 'b', which was left out"));
  // Nothing of the operations left out stays in the program: no tensor g, h or w64.
  for (const char* gone : {"g", "h", "w64", "c"}) EXPECT_EQ(m->p.find(gone), NO_TENSOR) << gone;
  // 'a' is read by an operation left out, so it is an output: the caller can compute 'b' from it.
  EXPECT_EQ(output_names(m->p), (std::vector<std::string>{"a", "d", "e"}));
  const std::vector<float> x = {-1, 2, 0.5f, -0.25f}, b = {0.1f, -0.2f, 0.3f, 3};
  m->set("x", x);
  m->set("b", b);
  m->ex->run();
  std::vector<double> a, d, e;
  for (int i = 0; i < 4; ++i) {
    a.push_back(std::max(0.f, x[i]));
    d.push_back(std::tanh(double(b[i])));
    e.push_back(a[i] + x[i]);
  }
  expect_close(m->get("a"), a, "a");
  expect_close(m->get("d"), d, "d");
  expect_close(m->get("e"), e, "e");
}

TEST(FlowImport, OperationsAreOrderedByTheirInputsAndCyclesReported) {
  FlowSpec f;
  f.vars = {{"x", "float32", {2}}, {"a", "float32", {2}}, {"b", "float32", {2}}, {"p", "float32", {2}},
            {"q", "float32", {2}}};
  f.ops = {{"b", "Exp", {"a"}, {"b"}, {}},  // listed before what computes its input
           {"a", "Neg", {"x"}, {"a"}, {}},
           {"p", "Abs", {"q"}, {"p"}, {}},
           {"q", "Abs", {"p"}, {"q"}, {}}};
  f.funcs = {{"f", {"b", "a", "p", "q"}}};
  auto m = import_flow(flow_bytes(f));
  ASSERT_TRUE(m->status) << m->status.message();
  EXPECT_EQ(m->report.imported, 2u);
  ASSERT_EQ(m->report.problems.size(), 2u);
  EXPECT_EQ(m->report.problems[0], "op 'p' (type Abs): it depends on its own result (a cycle in the function)");
  m->set("x", {1, -2});
  m->ex->run();
  expect_close(m->get("b"), {std::exp(-1.0), std::exp(2.0)}, "b");
}

TEST(FlowImport, NamesAreRespelledDeterministicallyWithANoteEach) {
  FlowSpec f;
  f.vars = {{"a_b", "float32", {2}}, {"a/b", "float32", {2}}, {"1st:0", "float32", {2}}, {"y", "float32", {2}}};
  f.ops = {{"y", "Add", {"a/b", "1st:0"}, {"y"}, {}}, {"z", "Add", {"y", "a_b"}, {"y2"}, {}}};
  f.vars.push_back({"y2", "float32", {2}});
  f.funcs = {{"f", {"y", "z"}}};
  auto m = import_flow(flow_bytes(f));
  ASSERT_TRUE(m->status) << m->status.message();
  EXPECT_NE(m->p.find("a_b"), NO_TENSOR);  // a valid name keeps itself ...
  EXPECT_NE(m->p.find("a_b_2"), NO_TENSOR);  // ... and a respelled one never takes it
  EXPECT_TRUE(m->has_note("variable 'a/b' is %a_b_2"));
  EXPECT_TRUE(m->has_note("variable '1st:0' is %_1st_0"));
  EXPECT_EQ(m->report.notes.size(), 2u);
}

TEST(FlowImport, LearnableWithoutDataIsAZeroParam) {
  FlowSpec f;
  f.vars = {{"x", "float32", {1, 2}}, {"w", "float32", {2, 2}, "", FLOW_SPEC_LEARNABLE}, {"y", "float32", {1, 2}}};
  f.ops = {{"mm", "MatMul", {"x", "w"}, {"y"}, {}}};
  f.funcs = {{"f", {"mm"}}};
  auto m = import_flow(flow_bytes(f));
  ASSERT_TRUE(m->status) << m->status.message();
  EXPECT_EQ(m->p.desc(m->p.find("w")).role, Role::PARAM);
  EXPECT_TRUE(m->has_note("param @w: learnable but without values in the file, initialized with zeros"));
  m->set("x", {1, 2});
  m->ex->run();
  expect_close(m->get("y"), {0, 0}, "y");
}

TEST(FlowImport, ChoosesTheFunctionByName) {
  FlowSpec f = one_op_spec(6, "Neg", 1, {2, 3});
  f.vars.push_back({"z", "float32", {2, 3}});
  f.ops.push_back({"abs", "Abs", {"a"}, {"z"}, {}});
  f.funcs.push_back({"second", {"abs"}});
  FlowImportOptions o;
  o.function = "second";
  auto m = import_flow(flow_bytes(f), o);
  ASSERT_TRUE(m->status) << m->status.message();
  EXPECT_EQ(output_names(m->p), (std::vector<std::string>{"z"}));
  o.function = "third";
  auto missing = import_flow(flow_bytes(f), o);
  EXPECT_EQ(missing->status.message(), "test.flow: error: the flow has no function 'third' (it has 'f', 'second')");
  f.funcs.clear();
  auto none = import_flow(flow_bytes(f));
  EXPECT_EQ(none->status.message(), "test.flow: error: the flow has no functions to import");
}

TEST(FlowImport, RefusesBadOptionsAndBigPrograms) {
  const std::string bytes = flow_bytes(one_op_spec(6, "Neg", 1, {2, 3}));
  FlowImportOptions o;
  o.batch = 0;
  EXPECT_NE(import_flow(bytes, o)->status.message().find("the batch size must be at least 1, not 0"), std::string::npos);
  o.batch = 1;
  o.max_program_bytes = 100;
  EXPECT_NE(import_flow(bytes, o)->status.message().find("over the limit of 100"), std::string::npos);
  Context ctx;
  Program p(ctx);
  ImportReport r;
  ASSERT_TRUE(flow_import_bytes(bytes, "a.flow", &p, &r));
  EXPECT_NE(flow_import_bytes(bytes, "a.flow", &p, &r).message().find("not empty"), std::string::npos);
}

class FlowFileTest : public TempDirTest {};

TEST_F(FlowFileTest, ImportsAFileWithinTheSizeLimit) {
  const std::string path = put("m.flow", flow_bytes(one_op_spec(5, "Relu", 1, {2, 3})));
  Context ctx;
  Program p(ctx);
  ImportReport r;
  ASSERT_TRUE(flow_import_file(path, &p, &r)) << "";
  EXPECT_EQ(r.imported, 1u);
  FlowImportOptions o;
  o.max_file_bytes = 10;
  Context ctx2;
  Program q(ctx2);
  const Status s = flow_import_file(path, &q, &r, o);
  EXPECT_NE(s.message().find("over the limit of 10"), std::string::npos) << s.message();
  EXPECT_NE(flow_import_file(path + ".missing", &q, &r).message().find("cannot read"), std::string::npos);
}

// --- malformed files ---

std::string read_error(const std::string& bytes) {
  Flow f;
  const Status s = flow_read(bytes, "bad.flow", &f);
  return s ? std::string() : s.message();
}

#define EXPECT_FLOW_ERROR(bytes, fragment)                      \
  do {                                                          \
    const std::string msg_ = read_error(bytes);                 \
    EXPECT_EQ(msg_.rfind("bad.flow: byte ", 0), 0u) << msg_;    \
    EXPECT_NE(msg_.find(fragment), std::string::npos) << msg_;  \
  } while (0)

void poke_i32(std::string* s, size_t at, int32_t v) {
  std::string b;
  put_le(&b, static_cast<uint32_t>(v), 4);
  s->replace(at, 4, b);
}

TEST(FlowRead, EveryTruncationIsAnErrorNamingItsOffset) {
  for (int version : {3, 4, 5, 6}) {
    const std::string bytes = mlp_bytes(version);
    Flow whole;
    ASSERT_TRUE(flow_read(bytes, "bad.flow", &whole)) << version;
    for (size_t n = 0; n < bytes.size(); ++n) {
      const std::string msg = read_error(bytes.substr(0, n));
      // "bad.flow: byte N: error: ...", N within what is left of the file.
      ASSERT_EQ(msg.rfind("bad.flow: byte ", 0), 0u) << "version " << version << ", " << n << " bytes: " << msg;
      ASSERT_LE(std::stoull(msg.substr(15)), n) << msg;
      ASSERT_NE(msg.find(": error: "), std::string::npos) << msg;
      Context ctx;
      Program p(ctx);
      ImportReport r;
      ASSERT_FALSE(flow_import_bytes(bytes.substr(0, n), "bad.flow", &p, &r));
    }
  }
}

TEST(FlowRead, ReadsEverySection) {
  Flow f;
  const std::string bytes = mlp_bytes(6);
  ASSERT_TRUE(flow_read(bytes, "m.flow", &f));
  EXPECT_EQ(f.version, 6);
  ASSERT_EQ(f.vars.size(), 11u);
  EXPECT_EQ(f.vars[1].name, "layer0/W");
  EXPECT_EQ(f.vars[1].dtype, FlowDType::FLOAT32);
  EXPECT_TRUE(f.vars[1].learnable());
  EXPECT_EQ(f.vars[1].data.size(), 80u);
  EXPECT_EQ(*flow_attr(f.vars[1].attrs, "init"), "uniform");
  EXPECT_EQ(f.vars[0].shape, (std::vector<int64_t>{-1, 4}));
  // Operations name values by variable, alias, or the operation that computes them.
  EXPECT_EQ(f.ops[4].inputs[0], 8u);
  EXPECT_EQ(f.ops[5].inputs[0], 9u);
  EXPECT_EQ(f.find_var("layer0/Relu"), 5u);
  EXPECT_EQ(f.funcs[0].ops.size(), 6u);
  ASSERT_EQ(f.cnxs.size(), 1u);
  EXPECT_EQ(f.cnxs[0].links, (std::vector<size_t>{5}));
  ASSERT_EQ(f.blobs.size(), 1u);
  EXPECT_EQ(f.blobs[0].data, "ab");
  // A reference before version 5 is a '&' before the type.
  FlowSpec old;
  old.version = 3;
  old.vars = {{"r", "float32", {2}, "", FLOW_SPEC_REF}};
  ASSERT_TRUE(flow_read(flow_bytes(old), "old.flow", &f));
  EXPECT_EQ(f.vars[0].flags, uint32_t(FLOW_VAR_REF));
  EXPECT_EQ(f.vars[0].dtype, FlowDType::FLOAT32);
}

TEST(FlowRead, HeaderErrors) {
  std::string bytes = mlp_bytes(6);
  EXPECT_FLOW_ERROR("flw", "byte 0: error: header: magic: 4 bytes needed, 3 left");
  std::string bad_magic = bytes;
  bad_magic[1] = 'X';
  EXPECT_FLOW_ERROR(bad_magic, "byte 0: error: header: magic: not a flow file");
  for (int v : {2, 7, -1}) {
    std::string b = bytes;
    poke_i32(&b, 4, v);
    EXPECT_FLOW_ERROR(b, fmt::format("byte 4: error: header: version: {} is not supported (this reader knows 3 to 6)", v));
  }
  std::string trailing = bytes + "x";
  EXPECT_FLOW_ERROR(trailing, fmt::format("byte {}: error: end: trailing bytes: 1 bytes after the last section", bytes.size()));
}

TEST(FlowRead, CountsAndLengthsAreCheckedBeforeAllocating) {
  // Version 3: magic, version, the variable count at byte 8, then the first variable, "input":
  // name length at 12 (and 5 bytes), alias count at 21, type length at 25 ("float32"), rank at
  // 36, dimensions at 40 and 44, data size at 48.
  const struct {
    size_t at;
    int32_t value;
    const char* fragment;
  } cases[] = {
      {8, 0x7fffffff, "byte 8: error: variables: variable count: 2147483647 entries of at least 24 bytes need"},
      {8, -3, "byte 8: error: variables: variable count: -3 is negative"},
      {12, 0x7ffffff0, "byte 12: error: variable 0: name: length 2147483632 runs past the end of the file"},
      {12, -1, "byte 12: error: variable 0: name: length -1 is negative"},
      {21, 1 << 30, "byte 21: error: variable 0 ('input'): alias count: 1073741824 entries of at least 4 bytes"},
      {36, 1 << 29, "byte 36: error: variable 0 ('input'): rank: 536870912 entries"},
      {44, -2, "byte 44: error: variable 0 ('input'): dimension 1: -2 (only -1, the batch size, may be negative)"},
      {52, 0x7fffffff, "byte 48: error: variable 0 ('input'): data size: 9223372036854775807 bytes, but"},
  };
  const std::string bytes = mlp_bytes(3);
  for (const auto& c : cases) {
    std::string b = bytes;
    poke_i32(&b, c.at, c.value);
    if (c.at == 52) poke_i32(&b, 48, -1);  // the u64 data size 0x7fffffffffffffff
    EXPECT_FLOW_ERROR(b, c.fragment);
  }
}

TEST(FlowRead, FieldErrorsNameTheArtifact) {
  FlowSpec f = one_op_spec(6, "Neg", 1, {2, 3});
  FlowSpec bad = f;
  bad.vars[0].type = "float33";
  EXPECT_FLOW_ERROR(flow_bytes(bad), "error: variable 0 ('a'): type: unknown element type 'float33'");
  bad = f;
  bad.vars[1].data = f32_bytes({1, 2, 3, 4, 5});
  EXPECT_FLOW_ERROR(flow_bytes(bad), "error: variable 1 ('b'): data: 20 bytes, but float32[2,3] needs 24");
  bad = f;
  bad.vars[1].data = f32_bytes({1, 2, 3, 4, 5, 6});
  bad.vars[1].shape = {1 << 30, 1 << 30};
  EXPECT_FLOW_ERROR(flow_bytes(bad), "error: variable 1 ('b'): data: 24 bytes, but float32[1073741824,1073741824] needs 4611686018427387904");
  bad.vars[1].shape = {1 << 30, 1 << 30, 1 << 30};
  EXPECT_FLOW_ERROR(flow_bytes(bad), "data: 24 bytes, but float32[1073741824,1073741824,1073741824] needs more than 2^64");
  bad = f;
  bad.vars[1].data = f32_bytes({1, 2, 3, 4, 5, 6});
  bad.vars[1].shape = {-1, 3};
  EXPECT_FLOW_ERROR(flow_bytes(bad), "variable 1 ('b'): data: 24 bytes of data for the shape [-1,3], whose batch dimension");
  bad = f;
  bad.ops[0].in = {"nowhere"};
  EXPECT_FLOW_ERROR(flow_bytes(bad), "error: operation 0 ('op'): input 0: nothing is named 'nowhere'");
  bad = f;
  bad.funcs[0].ops = {"op", "ghost"};
  EXPECT_FLOW_ERROR(flow_bytes(bad), "error: function 0 ('f'): operation 1: nothing is named 'ghost'");
  bad = f;
  bad.cnxs = {{"c\x01", {"a", "zz"}}};
  EXPECT_FLOW_ERROR(flow_bytes(bad), "error: connector 0 ('c\\x01'): link 1: nothing is named 'zz'");
}

// Import-time checks of what the reader lets through: integer inputs, attributes, arities.
TEST(FlowImport, MappingErrorsNameTheOperation) {
  FlowSpec f;
  f.vars = {{"x", "float32", {2, 2}}, {"fshape", "float32", {1}, f32_bytes({4})}, {"y", "float32", {4}},
            {"z", "float32", {2, 2}}, {"s", "float32", {2, 2}}, {"u", "float32", {2, 2}}, {"v", "float32", {2, 2}}};
  f.ops = {{"y", "Reshape", {"x", "fshape"}, {"y"}, {}},
           {"z", "Softmax", {"x"}, {"z"}, {{"axis", "one"}}},
           {"s", "Add", {"x"}, {"s"}, {}},
           {"u", "Transpose", {"x"}, {"u"}, {{"perm", "[1;0]"}}},
           {"v", "Reference", {"x"}, {"v"}, {{"var", "nope"}}}};
  f.funcs = {{"f", {"y", "z", "s", "u", "v"}}};
  auto m = import_flow(flow_bytes(f));
  ASSERT_TRUE(m->status) << m->status.message();
  EXPECT_EQ(m->report.imported, 0u);
  EXPECT_EQ(m->report.problems,
            (std::vector<std::string>{
                "op 'y' (type Reshape): input 1 'fshape': must be a constant of int32 or int64 values, is float32",
                "op 'z' (type Softmax): attribute axis is 'one', not an integer",
                "op 's' (type Add): takes 2 inputs, got 1",
                "op 'u' (type Transpose): attribute perm is '[1;0]', not a list of integers",
                "op 'v' (type Reference): its 'var' attribute names no variable: 'nope'"}));
  EXPECT_TRUE(m->p.tensors().empty());
}

}  // namespace
}  // namespace nnasm
