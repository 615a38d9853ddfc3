// The ONNX importer's mappings of losses, indexing and masking ops onto compositions of existing
// instructions (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss with weights and an ignored
// label, GatherElements, Trilu, Hardmax, Shrink, Tan, Cosh, EyeLike, ReduceProd, Dropout's mask),
// each on a small model built in code and checked against a plain loop written here; the
// recurrent layers (LSTM, RNN) against loops too, and what their mapping refuses.
#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/executor.h"
#include "serialize/onnx/onnx_import.h"
#include "tests/onnx/imported.h"
#include "tests/onnx/model_builder.h"

namespace nnasm {
namespace {

using B = OnnxModelBuilder;
using F = std::vector<float>;

// Imports `m` and runs it on `inputs` (f32, by name); false, with a failed expectation, when
// either step fails.
bool import_and_run(const B& m, const std::map<std::string, F>& inputs, Imported* r,
                    const std::map<std::string, std::vector<int32_t>>& int_inputs = {}) {
  r->status = onnx_import(m.bytes(), "m.onnx", {}, &r->p, &r->report);
  EXPECT_TRUE(r->status.is_ok()) << r->status.message() << "\n  " << fmt::format("{}", fmt::join(r->report.problems, "\n  "));
  if (!r->status) return false;
  Result<std::unique_ptr<Executor>> ex = Executor::prepare(r->p);
  EXPECT_TRUE(ex.is_ok()) << ex.status().message();
  if (!ex) return false;
  for (const auto& [n, v] : inputs) std::copy(v.begin(), v.end(), r->ctx.at(r->p.find(n)).f32());
  for (const auto& [n, v] : int_inputs) std::copy(v.begin(), v.end(), r->ctx.at(r->p.find(n)).i32());
  (*ex)->run();
  return true;
}

F values(const Imported& r, const std::string& name) {
  const Tensor& t = r.ctx.at(r.p.find(name));
  return F(t.f32(), t.f32() + t.numel());
}

void expect_near(const F& got, const F& want, float tol = 1e-5f) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol * (1 + std::fabs(want[i]))) << "element " << i;
}

F ramp(size_t n, float scale = 0.37f, float offset = -1.1f) {
  F v(n);
  for (size_t i = 0; i < n; ++i) v[i] = offset + scale * static_cast<float>((i * 5) % 7) - 0.03f * static_cast<float>(i);
  return v;
}

// NegativeLogLikelihoodLoss on [N=2, C=3, d=2] log-probabilities with INT64 targets given at run
// time, class weights and an ignored class, reduced none, sum and mean; SoftmaxCrossEntropyLoss
// the same after a log-softmax over the classes.
TEST(OnnxOpsImport, NllAndSoftmaxCrossEntropyWithWeightsAndAnIgnoredClass) {
  constexpr int N = 2, C = 3, D = 2;
  const F lp = ramp(N * C * D), w = {0.5f, 2, 1.25f};
  const std::vector<int32_t> t = {2, 1, 0, 2};  // [N, D]; class 1 is ignored
  B m(13);
  m.input("lp", {N, C, D}).input("t", {N, D}, onnx::TensorProto::INT64).initializer("w", {C}, w);
  m.output("none").output("sum").output("mean").output("sce").output("sce_lp");
  for (const char* r : {"none", "sum", "mean"}) {
    onnx::NodeProto& node = m.node("NegativeLogLikelihoodLoss", {"lp", "t", "w"}, {r});
    B::attr(node, "reduction", std::string(r));
    B::attr(node, "ignore_index", int64_t(1));
  }
  onnx::NodeProto& sce = m.node("SoftmaxCrossEntropyLoss", {"lp", "t", "w"}, {"sce", "sce_lp"});
  B::attr(sce, "ignore_index", int64_t(1));
  Imported r;
  ASSERT_TRUE(import_and_run(m, {{"lp", lp}}, &r, {{"t", t}}));

  auto loss = [&](const F& logp) {
    F none;
    double sum = 0, weights = 0;
    for (int n = 0; n < N; ++n)
      for (int d = 0; d < D; ++d) {
        const int c = t[n * D + d];
        const double wc = c == 1 ? 0 : w[c];
        none.push_back(static_cast<float>(-wc * logp[(n * C + c) * D + d]));
        sum += none.back();
        weights += wc;
      }
    return std::make_tuple(none, static_cast<float>(sum), static_cast<float>(sum / weights));
  };
  const auto [none, sum, mean] = loss(lp);
  expect_near(values(r, "none"), none);
  expect_near(values(r, "sum"), {sum});
  expect_near(values(r, "mean"), {mean});
  F logp(lp.size());
  for (int n = 0; n < N; ++n)
    for (int d = 0; d < D; ++d) {
      double s = 0;
      for (int c = 0; c < C; ++c) s += std::exp(lp[(n * C + c) * D + d]);
      for (int c = 0; c < C; ++c) logp[(n * C + c) * D + d] = static_cast<float>(lp[(n * C + c) * D + d] - std::log(s));
    }
  expect_near(values(r, "sce_lp"), logp);
  expect_near(values(r, "sce"), {std::get<2>(loss(logp))});
}

// GatherElements with known (negative too) indices reads data[index][j] along axis 0; Trilu keeps
// the upper or lower triangle from diagonal k, and an infinity outside it still gives 0.
TEST(OnnxOpsImport, GatherElementsAndTriluMatchLoops) {
  const F x = ramp(12);  // [3, 4]
  F inf_x = x;
  inf_x[8] = INFINITY;  // row 2, column 0: below the diagonal
  B m(14);
  m.input("x", {3, 4}).initializer_i64("idx", {2, 4}, {0, -1, 2, 1, 2, 0, -3, 1}).initializer_i64("k", {}, {1});
  m.output("g").output("up").output("low");
  m.node("GatherElements", {"x", "idx"}, {"g"});
  m.node("Trilu", {"x", "k"}, {"up"});
  B::attr(m.node("Trilu", {"x"}, {"low"}), "upper", int64_t(0));
  Imported r;
  ASSERT_TRUE(import_and_run(m, {{"x", inf_x}}, &r));
  const int idx[8] = {0, -1, 2, 1, 2, 0, -3, 1};
  F g, up, low;
  for (int k = 0; k < 8; ++k) g.push_back(inf_x[((idx[k] + 3) % 3) * 4 + k % 4]);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) {
      up.push_back(j - i >= 1 ? inf_x[i * 4 + j] : 0);
      low.push_back(j - i <= 0 ? inf_x[i * 4 + j] : 0);
    }
  EXPECT_EQ(values(r, "g"), g);
  EXPECT_EQ(values(r, "up"), up);
  EXPECT_EQ(values(r, "low"), low);
}

// Hardmax marks the first maximum of each row; Shrink, Tan, Cosh as their formulas; EyeLike is a
// constant; ReduceProd the product; Dropout's mask in inference is all true.
TEST(OnnxOpsImport, HardmaxShrinkTanCoshEyeLikeReduceProdMatchLoops) {
  const F x = {1, 3, 3, -2, 0.5f, -1.75f, 2, 2};  // [2, 4], ties in both rows
  B m(13);
  m.input("x", {2, 4}).output("hard").output("shrink").output("tan").output("cosh").output("eye").output("prod");
  m.output("mask", onnx::TensorProto::BOOL);
  m.node("Hardmax", {"x"}, {"hard"});
  onnx::NodeProto& shrink = m.node("Shrink", {"x"}, {"shrink"});
  B::attr(shrink, "lambd", 1.5f);
  B::attr(shrink, "bias", 0.25f);
  m.node("Tan", {"x"}, {"tan"});
  m.node("Cosh", {"x"}, {"cosh"});
  B::attr(m.node("EyeLike", {"x"}, {"eye"}), "k", int64_t(1));
  B::attr(m.node("ReduceProd", {"x"}, {"prod"}), "axes", std::vector<int64_t>{1});
  m.node("Dropout", {"x"}, {"dropped", "mask"});
  Imported r;
  ASSERT_TRUE(import_and_run(m, {{"x", x}}, &r));
  F hard(8, 0), shrunk, tan, cosh, eye, prod = {1, 1};
  for (int i = 0; i < 2; ++i) {
    int best = 0;
    for (int j = 1; j < 4; ++j)
      if (x[i * 4 + j] > x[i * 4 + best]) best = j;
    hard[i * 4 + best] = 1;
    for (int j = 0; j < 4; ++j) {
      const float v = x[i * 4 + j];
      shrunk.push_back(v < -1.5f ? v + 0.25f : v > 1.5f ? v - 0.25f : 0);
      tan.push_back(std::tan(v));
      cosh.push_back(std::cosh(v));
      eye.push_back(j - i == 1);
      prod[i] *= v;
    }
  }
  EXPECT_EQ(values(r, "hard"), hard);
  expect_near(values(r, "shrink"), shrunk);
  expect_near(values(r, "tan"), tan);
  expect_near(values(r, "cosh"), cosh);
  EXPECT_EQ(values(r, "eye"), eye);
  expect_near(values(r, "prod"), prod);
  EXPECT_EQ(values(r, "mask"), F(8, 1));
}

// Resize linear (half_pixel, PyTorch's bilinear without align_corners) and cubic (align_corners)
// on an NCHW image, up in H and down in W, against loops written from the formulas: the source
// coordinate, the taps around it clamped to the edge, their weights.
TEST(OnnxOpsImport, ResizeLinearAndCubicAsTheFormulasSay) {
  constexpr int H = 5, W = 7, OH = 8, OW = 3;
  const F x = ramp(2 * H * W);
  B m(13);
  m.input("x", {1, 2, H, W}).initializer_i64("sizes", {4}, {1, 2, OH, OW});
  m.output("lin").output("cub");
  onnx::NodeProto& lin = m.node("Resize", {"x", "", "", "sizes"}, {"lin"});
  B::attr(lin, "mode", std::string("linear"));
  onnx::NodeProto& cub = m.node("Resize", {"x", "", "", "sizes"}, {"cub"});
  B::attr(cub, "mode", std::string("cubic"));
  B::attr(cub, "coordinate_transformation_mode", std::string("align_corners"));
  Imported r;
  ASSERT_TRUE(import_and_run(m, {{"x", x}}, &r));

  // Weights of the input elements along an axis of `in` for output `y` of `out`.
  auto linear = [](int y, int in, int out) {
    std::vector<double> w(in, 0.0);
    const double s = static_cast<double>(out) / in, src = (y + 0.5) / s - 0.5, f = std::floor(src);
    auto clamp = [&](double i) { return static_cast<int>(std::min(std::max(i, 0.0), in - 1.0)); };
    w[clamp(f)] += 1 - (src - f);
    w[clamp(f + 1)] += src - f;
    return w;
  };
  auto cubic = [](int y, int in, int out) {
    std::vector<double> w(in, 0.0);
    const double src = out == 1 ? 0 : y * (in - 1.0) / (out - 1.0), f = std::floor(src), t = src - f, A = -0.75;
    auto k = [&](double d) {  // Keys' cubic convolution kernel
      d = std::fabs(d);
      return d <= 1 ? ((A + 2) * d - (A + 3)) * d * d + 1 : d < 2 ? ((A * d - 5 * A) * d + 8 * A) * d - 4 * A : 0;
    };
    for (int j = -1; j <= 2; ++j) w[static_cast<int>(std::min(std::max(f + j, 0.0), in - 1.0))] += k(j - t);
    return w;
  };
  for (const auto& [name, f] : {std::pair<const char*, std::function<std::vector<double>(int, int, int)>>{"lin", linear},
                                {"cub", cubic}}) {
    F want;
    for (int c = 0; c < 2; ++c)
      for (int oy = 0; oy < OH; ++oy)
        for (int ox = 0; ox < OW; ++ox) {
          const std::vector<double> wy = f(oy, H, OH), wx = f(ox, W, OW);
          double v = 0;
          for (int iy = 0; iy < H; ++iy)
            for (int ix = 0; ix < W; ++ix) v += wy[iy] * wx[ix] * x[(c * H + iy) * W + ix];
          want.push_back(static_cast<float>(v));
        }
    SCOPED_TRACE(name);
    expect_near(values(r, name), want, 1e-5f);
  }
}

// GatherND (batch_dims 1, tuples of one index selecting rows, negative indices) and Compress (with
// an axis, and flat without one), indices and condition known at import time, against loops.
TEST(OnnxOpsImport, GatherNdAndCompressWithKnownIndices) {
  constexpr int A = 2, R = 3, C = 4;
  const F x = ramp(A * R * C);
  B m(13);
  m.input("x", {A, R, C}).initializer_i64("idx", {A, 2, 1}, {2, -3, 0, 1});
  m.initializer_bool("keep", {3}, {true, false, true}).initializer_bool("flat", {5}, {false, true, true, false, true});
  m.output("nd").output("rows").output("all");
  B::attr(m.node("GatherND", {"x", "idx"}, {"nd"}), "batch_dims", int64_t(1));
  B::attr(m.node("Compress", {"x", "keep"}, {"rows"}), "axis", int64_t(-2));
  m.node("Compress", {"x", "flat"}, {"all"});
  Imported r;
  ASSERT_TRUE(import_and_run(m, {{"x", x}}, &r));
  const int idx[A][2] = {{2, 0}, {0, 1}};  // -3 is row 0
  F nd, rows, all;
  for (int a = 0; a < A; ++a)
    for (int t = 0; t < 2; ++t)
      for (int c = 0; c < C; ++c) nd.push_back(x[(a * R + idx[a][t]) * C + c]);
  for (int a = 0; a < A; ++a)
    for (int row : {0, 2})
      for (int c = 0; c < C; ++c) rows.push_back(x[(a * R + row) * C + c]);
  for (int k : {1, 2, 4}) all.push_back(x[k]);
  expect_near(values(r, "nd"), nd, 0);
  expect_near(values(r, "rows"), rows, 0);
  expect_near(values(r, "all"), all, 0);
}


double sigmoid(double v) { return 1 / (1 + std::exp(-v)); }

// An LSTM node as PyTorch leaves none out but a hand-written model may: bidirectional, batch first
// (layout 1), no B, initial_h without initial_c, sequence lengths given at run time (INT32), Y and
// Y_c wanted but not Y_h. Against a loop in double written from ONNX's definition: gates i, o, f,
// c; direction 1 runs from each sequence's last step; Y is 0 past a sequence's length.
TEST(OnnxOpsImport, LstmBidirectionalBatchFirstWithLengthsMatchesALoop) {
  constexpr int N = 3, T = 4, I = 2, H = 3, D = 2;
  const F x = ramp(N * T * I), w = ramp(D * 4 * H * I, 0.21f, -0.6f), rw = ramp(D * 4 * H * H, 0.13f, -0.4f);
  const F h0 = ramp(N * D * H, 0.3f, -0.5f);
  const std::vector<int32_t> lens = {4, 2, 1};
  B m(14);
  m.input("x", {N, T, I}).input("lens", {N}, onnx::TensorProto::INT32).input("h0", {N, D, H});
  m.initializer("W", {D, 4 * H, I}, w).initializer("R", {D, 4 * H, H}, rw);
  m.output("y").output("yc");
  onnx::NodeProto& node = m.node("LSTM", {"x", "W", "R", "", "lens", "h0"}, {"y", "", "yc"}, "lstm");
  B::attr(node, "direction", std::string("bidirectional"));
  B::attr(node, "hidden_size", int64_t(H));
  B::attr(node, "layout", int64_t(1));
  Imported r;
  ASSERT_TRUE(import_and_run(m, {{"x", x}, {"h0", h0}}, &r, {{"lens", lens}}));

  F y(N * T * D * H, 0), yc(N * D * H);
  for (int d = 0; d < D; ++d)
    for (int b = 0; b < N; ++b) {
      std::vector<double> h(h0.begin() + (b * D + d) * H, h0.begin() + (b * D + d + 1) * H), c(H, 0.0);
      for (int s = 0; s < lens[b]; ++s) {
        const int t = d == 0 ? s : lens[b] - 1 - s;
        std::vector<double> a(4 * H, 0.0);
        for (int g = 0; g < 4 * H; ++g) {
          for (int k = 0; k < I; ++k) a[g] += w[(d * 4 * H + g) * I + k] * x[(b * T + t) * I + k];
          for (int k = 0; k < H; ++k) a[g] += rw[(d * 4 * H + g) * H + k] * h[k];
        }
        for (int j = 0; j < H; ++j) {
          c[j] = sigmoid(a[2 * H + j]) * c[j] + sigmoid(a[j]) * std::tanh(a[3 * H + j]);
          h[j] = sigmoid(a[H + j]) * std::tanh(c[j]);
          y[((b * T + t) * D + d) * H + j] = static_cast<float>(h[j]);
        }
      }
      for (int j = 0; j < H; ++j) yc[(b * D + d) * H + j] = static_cast<float>(c[j]);
    }
  expect_near(values(r, "y"), y);
  expect_near(values(r, "yc"), yc);
}

// RNN with Relu, reverse, sequence lengths known at import time that are all the whole sequence
// (so the instruction reads none): against a loop.
TEST(OnnxOpsImport, RnnReluReverseMatchesALoop) {
  constexpr int T = 3, N = 2, I = 3, H = 2;
  const F x = ramp(T * N * I), w = ramp(H * I, 0.25f, -0.3f), rw = ramp(H * H, 0.2f, -0.2f), bias = ramp(2 * H, 0.1f, 0.05f);
  B m(13);
  m.input("x", {T, N, I}).initializer("W", {1, H, I}, w).initializer("R", {1, H, H}, rw).initializer("B", {1, 2 * H}, bias);
  m.initializer_i64("lens", {N}, {T, T});
  m.output("y").output("yh");
  onnx::NodeProto& node = m.node("RNN", {"x", "W", "R", "B", "lens"}, {"y", "yh"}, "rnn");
  B::attr(node, "direction", std::string("reverse"));
  B::attr_strings(node, "activations", {"Relu"});
  Imported r;
  ASSERT_TRUE(import_and_run(m, {{"x", x}}, &r));
  ASSERT_EQ(r.p.code().size(), 1u);
  EXPECT_EQ(r.p.code()[0].in.size(), 4u) << "lengths that are all T are left out";

  F y(T * N * H), yh(N * H);
  for (int b = 0; b < N; ++b) {
    std::vector<double> h(H, 0.0);
    for (int t = T - 1; t >= 0; --t) {
      std::vector<double> a(H);
      for (int j = 0; j < H; ++j) {
        a[j] = bias[j] + bias[H + j];
        for (int k = 0; k < I; ++k) a[j] += w[j * I + k] * x[(t * N + b) * I + k];
        for (int k = 0; k < H; ++k) a[j] += rw[j * H + k] * h[k];
      }
      for (int j = 0; j < H; ++j) h[j] = std::max(a[j], 0.0);
      for (int j = 0; j < H; ++j) y[(t * N + b) * H + j] = static_cast<float>(h[j]);
    }
    for (int j = 0; j < H; ++j) yh[b * H + j] = static_cast<float>(h[j]);
  }
  expect_near(values(r, "y"), y);
  expect_near(values(r, "yh"), yh);
}

// What a recurrent node's mapping refuses, each a problem naming the node: a hidden_size W and R
// do not have, W and R of different hidden sizes, a known sequence length above T, an activation
// other than the defaults, clip, input_forget, activation_alpha.
TEST(OnnxOpsImport, RecurrentNodesRefuseWhatTheInstructionsDoNotCompute) {
  constexpr int T = 5, N = 2, I = 3;
  auto problems = [](const B& m) {
    Imported r;
    r.status = onnx_import(m.bytes(), "m.onnx", {}, &r.p, &r.report);
    EXPECT_FALSE(r.status.is_ok());
    return r.report.problems;
  };
  // A model of one `op` node with hidden size h in W and hr in R; `edit` adds attributes.
  auto model = [&](const char* op, int gates, int h, int hr, const std::function<void(onnx::NodeProto&)>& edit,
                   std::vector<std::string> extra_in = {}) {
    B m(14);
    m.input("x", {T, N, I}).initializer("W", {1, gates * h, I}, F(gates * h * I, 0.1f));
    m.initializer("R", {1, gates * hr, hr}, F(gates * hr * hr, 0.1f));
    m.initializer_i64("lens", {N}, {3, 7});
    m.output("y");
    std::vector<std::string> in = {"x", "W", "R"};
    in.insert(in.end(), extra_in.begin(), extra_in.end());
    edit(m.node(op, in, {"y"}, "rec"));
    return m;
  };
  const auto none = [](onnx::NodeProto&) {};
  using P = std::vector<std::string>;
  EXPECT_EQ(problems(model("GRU", 3, 4, 4, [](onnx::NodeProto& n) { B::attr(n, "hidden_size", int64_t(5)); })),
            P{"node 'rec' (op GRU, opset 14): W is [1,12,3]; expected [num_directions, 3·hidden_size, input_size] with "
              "hidden_size 5 = [1,15,3]"});
  EXPECT_EQ(problems(model("LSTM", 4, 4, 5, none)),
            P{"node 'rec' (op LSTM, opset 14): W is [1,16,3]; expected [num_directions, 4·hidden_size, input_size] with "
              "hidden_size 5 (from R) = [1,20,3]"});
  EXPECT_EQ(problems(model("RNN", 1, 4, 4, none, {"", "lens"})),
            P{"node 'rec' (op RNN, opset 14): sequence_lens holds 7 for sequence 1, outside [0, seq_length = 5]"});
  EXPECT_EQ(problems(model("RNN", 1, 4, 4, [](onnx::NodeProto& n) { B::attr_strings(n, "activations", {"LeakyRelu"}); })),
            P{"node 'rec' (op RNN, opset 14): activation 'LeakyRelu' (function 1 of activations) is not supported: RNN "
              "takes Tanh or Relu per direction"});
  EXPECT_EQ(problems(model("LSTM", 4, 4, 4, [](onnx::NodeProto& n) { B::attr_strings(n, "activations", {"Sigmoid", "Tanh", "Relu"}); })),
            P{"node 'rec' (op LSTM, opset 14): activation 'Relu' (function 3 of activations) is not supported: LSTM "
              "takes Sigmoid, Tanh, Tanh per direction"});
  EXPECT_EQ(problems(model("LSTM", 4, 4, 4, [](onnx::NodeProto& n) { B::attr(n, "clip", 3.0f); })),
            P{"node 'rec' (op LSTM, opset 14): clip 3 is not supported (the cell state is not clipped)"});
  EXPECT_EQ(problems(model("LSTM", 4, 4, 4, [](onnx::NodeProto& n) { B::attr(n, "input_forget", int64_t(1)); })),
            P{"node 'rec' (op LSTM, opset 14): input_forget=1 (coupled input and forget gates) is not supported"});
  EXPECT_EQ(problems(model("GRU", 3, 4, 4, [](onnx::NodeProto& n) { B::attr_floats(n, "activation_alpha", {0.5f}); })),
            P{"node 'rec' (op GRU, opset 14): attribute 'activation_alpha' is not supported (only the default activations)"});
  // Operands of the wrong rank or type are problems too, never a crash.
  B bad(14);
  bad.input("x", {T, N, I}).input("x2", {T, I}).input("lens", {N});
  bad.initializer("W", {1, 4, I}, F(4 * I, 0.1f)).initializer("R", {1, 4, 1}, F(4, 0.1f)).initializer("R2", {1, 4}, F(4, 0.1f));
  bad.output("y").output("y2").output("y3");
  bad.node("LSTM", {"x2", "W", "R"}, {"y"}, "flat_x");
  bad.node("LSTM", {"x", "W", "R2"}, {"y2"}, "flat_r");
  bad.node("LSTM", {"x", "W", "R", "", "lens"}, {"y3"}, "float_lens");
  EXPECT_EQ(problems(bad),
            (P{"node 'flat_x' (op LSTM, opset 14): X is [5,3]; expected rank 3, [seq_length, batch_size, input_size]",
               "node 'flat_r' (op LSTM, opset 14): R is [1,4]; expected rank 3, [num_directions, 4·hidden_size, hidden_size]",
               "node 'float_lens' (op LSTM, opset 14): sequence_lens is FLOAT; expected INT32 (or another integer type)"}));
}

}  // namespace
}  // namespace nnasm
