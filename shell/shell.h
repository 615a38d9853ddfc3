// The C++ front end. Shell functions record instructions into a Program; they never compute.
//
//   Context ctx;  Program p(ctx);  Graph g(p);
//   Var x = g.input("x", {1, 784});
//   Var y = softmax(relu(linear(x, 256)));
//   g.output(y, "y");
//   if (!g.status()) { ... g.status().message() ... }
//
// Every function takes the caller's source position as a defaulted last argument, so a shape
// error reads "model.cpp:12: error: ADD: operand 1 (f32[3,4]) does not broadcast with ...".
// Errors are sticky (as XLA's XlaBuilder): the first one is kept in the Graph, later calls become
// no-ops returning an invalid Var, and Graph::status() reports it. Outputs are always new tensors;
// inputs are never overwritten. A Graph and its Vars are used from one thread.
#pragma once
#include <initializer_list>
#include <string>
#include <vector>

#include "engine/context.h"
#include "isa/activation.h"
#include "isa/program.h"
#include "isa/status.h"

namespace nnasm {

// The caller's file and line, captured by default arguments (std::source_location's role in C++17).
struct Loc {
  const char* file;
  int line;
  static Loc here(const char* f = __builtin_FILE(), int l = __builtin_LINE()) { return {f, l}; }
};

class Graph;

// A handle to a tensor of a Graph's program. Cheap to copy.
class Var {
 public:
  Var() = default;
  Var(Graph* g, TensorId id) : g_(g), id_(id) {}
  bool valid() const { return g_ && id_ != NO_TENSOR; }
  Graph* graph() const { return g_; }
  TensorId id() const { return id_; }
  // Type and name as recorded; requires valid().
  const TensorType& type() const;
  const Shape& shape() const { return type().shape; }
  const std::string& name() const;

 private:
  Graph* g_ = nullptr;
  TensorId id_ = NO_TENSOR;
};

// A Var with the position of the expression that used it: operators cannot take defaulted
// arguments, but the implicit conversion to At can, and it runs at the caller's line.
struct At {
  Var v;
  Loc loc;
  At(Var var, Loc l = Loc::here()) : v(var), loc(l) {}  // NOLINT: implicit on purpose
};

struct LinearOptions {
  std::string name;  // params are @NAME.w and @NAME.b; empty: @wN and @bN
  InitSpec weight_init{InitKind::HE_NORMAL, 0, 0};
  InitSpec bias_init{InitKind::ZEROS, 0, 0};
  // Fused into the LINEAR: y = act(x·W + b); act_alpha is the activation's immediate (slope,
  // alpha, threshold, beta; it has no default of its own). See ops/linalg/linear.cpp for the
  // activations that have a gradient.
  Activation act = Activation::NONE;
  float act_alpha = 0;
};

struct Conv2dOptions {
  std::string name;  // params are @NAME.w and @NAME.b; empty: @wN and @bN
  std::vector<int64_t> stride{1, 1}, pad{0, 0}, dilation{1, 1};
  int64_t groups = 1;
  bool bias = true;
  InitSpec weight_init{InitKind::HE_NORMAL, 0, 0};  // fan-in = in/groups · kh · kw
  InitSpec bias_init{InitKind::ZEROS, 0, 0};
  Activation act = Activation::NONE;  // fused as LINEAR's
  float act_alpha = 0;
};

struct BatchNormOptions {
  // params @NAME.gamma (ones) and @NAME.beta (zeros), state @NAME.running_mean (zeros) and
  // @NAME.running_var (ones); empty NAME: bnN.
  std::string name;
  float eps = 1e-5f;
  float momentum = 0.1f;
};

// Options of lstm, gru and rnn, PyTorch's nn.LSTM, nn.GRU and nn.RNN (their `num_layers`,
// `bidirectional`, `batch_first`, GRU's reset gate and RNN's `nonlinearity`).
struct RecurrentOptions {
  // Layer K's params are @NAME.lK.w [D, G·H, I], @NAME.lK.r [D, G·H, H] and @NAME.lK.b
  // [D, 2·G·H] (W's biases, then R's), in ONNX's gate order (LSTM i,o,f,c; GRU z,r,h); with
  // `step`, its state is @NAME.lK.h (and @NAME.lK.c) [1, N, H]. Empty NAME: lstmN, gruN, rnnN.
  std::string name;
  int64_t layers = 1;          // stacked: layer K > 0 reads layer K−1's y
  bool bidirectional = false;  // D = 2: a second direction runs from the last step
  bool batch_first = false;    // x [N, T, I] and y [N, T, D·H] (ONNX's layout=1)
  // One time step per run: x is [N, I], y [N, H], and each layer's h (and c) is a state tensor,
  // zeros at first, that the op starts from and that ASSIGN writes back after the step, so the
  // next run continues the sequence (Executor::reset_state starts it over). Not bidirectional.
  bool step = false;
  bool linear_before_reset = true;              // GRU: r⊙(h·Rhᵀ + Rbh), as PyTorch's GRU
  Activation nonlinearity = Activation::TANH;  // RNN: TANH or RELU
};

// What lstm, gru and rnn return.
struct Recurrent {
  Var y;  // the last layer's h at every step: [T, N, D·H] ([N, T, D·H] batch_first); step: [N, H]
  Var h;  // every layer's last h, PyTorch's h_n: [layers·D, N, H] (layer-major, then direction)
  Var c;  // LSTM: every layer's last c, the same way (PyTorch's c_n); gru and rnn: invalid
};

class Graph {
 public:
  explicit Graph(Program& p) : p_(&p) {}
  Program& program() const { return *p_; }
  // The first error recorded, with the caller's file:line; ok if none.
  const Status& status() const { return status_; }

  Var input(const std::string& name, Shape shape, DType dtype = DType::F32, Loc loc = Loc::here());
  Var param(const std::string& name, Shape shape, InitSpec init = {InitKind::ZEROS, 0, 0}, Loc loc = Loc::here());
  // Persistent, not trained (running statistics, optimizer moments).
  Var state(const std::string& name, Shape shape, InitSpec init = {InitKind::ZEROS, 0, 0}, Loc loc = Loc::here());
  Var constant(const std::string& name, Shape shape, std::vector<double> values, DType dtype = DType::F32,
               Loc loc = Loc::here());
  // Marks `v` as a program output; a non-empty `name` renames it (e.g. "y" instead of "t7").
  void output(Var v, const std::string& name = "", Loc loc = Loc::here());

  // Records one instruction; `imm` sets immediates by schema key. Used by the shell functions.
  Var record(Opcode op, std::vector<Var> in, const std::vector<std::pair<std::string, Imm>>& imm, Loc loc);
  // The same for an op with several outputs: all of them (empty after an error).
  std::vector<Var> record_outputs(Opcode op, std::vector<Var> in, const std::vector<std::pair<std::string, Imm>>& imm,
                                  Loc loc);
  // Records ASSIGN dst, src -> dst: dst (a state tensor) takes src's value in place, for the
  // instructions after it and the next run; returns dst.
  Var assign(Var dst, Var src, Loc loc = Loc::here());
  // Records the error unless one is already kept; returns an invalid Var.
  Var fail(const Status& s, Loc loc);

 private:
  Program* p_;
  Status status_;
};

// Linear algebra
Var matmul(At a, Var b, bool trans_a = false, bool trans_b = false);
// y = act(x·W + b) with W [in, out] and b [out] created as params, in inferred from x; act and
// act_alpha from opt (default none).
Var linear(At x, int64_t out_features, const LinearOptions& opt = {});
Var linear(At x, Var w, Var b, Activation act = Activation::NONE, float act_alpha = 0);
// y = act(x·W + b) in int8 (LINEAR_I8, docs/quantization.md): w_i8 i8[in, out] (a param or
// constant, packed once by LINEAR_WEIGHTS_I8 in the derive section), scale f32[out] or [1] its
// per-output scale, b f32[out]; x quantized to u8 per row (`tensor_scale`: per tensor) in the kernel.
Var linear_i8(At x, Var w_i8, Var scale, Var b, Activation act = Activation::NONE, float act_alpha = 0,
              bool tensor_scale = false);

// Convolution (NCHW): y = act(conv(x, W) + b) with W [out, in/groups, kh, kw] and b [out]
// created as params, in inferred from x.
Var conv2d(At x, int64_t out_channels, std::vector<int64_t> kernel, const Conv2dOptions& opt = {});
// The same with given weights and bias (an invalid Var b: no bias); opt's geometry, groups and
// activation apply, its names, inits and `bias` do not.
Var conv2d(At x, Var w, Var b, const Conv2dOptions& opt = {});
// The same with a bf16 weight (CONV2D_BF16, docs/quantization.md): w_bf16 bf16[out, in, kh, kw] (a
// param or constant, transposed once by CONV_WEIGHTS_BF16 in the derive section); opt as above
// (groups 1 only).
Var conv2d_bf16(At x, Var w_bf16, Var b, const Conv2dOptions& opt = {});
// y = act(conv(x, W) + b) in int8 (CONV2D_I8, docs/quantization.md): w_i8 i8[out, in, kh, kw] (a
// param or constant, packed once by CONV_WEIGHTS_I8 in the derive section), scale f32[out] or [1]
// its per-output-channel scale, b f32[out] or an invalid Var (no bias); opt's geometry and
// activation apply (groups must be 1), its names, inits and `bias` do not; x quantized to u8 per
// image (`tensor_scale`: per tensor) in the kernel.
Var conv2d_i8(At x, Var w_i8, Var scale, Var b, const Conv2dOptions& opt = {}, bool tensor_scale = false);
// Recurrent layers over x [T, N, I] ([N, T, I] batch_first; [N, I] with opt.step), hidden size
// H: stacked LSTM, GRU and Elman RNN layers as PyTorch's, recorded as one LSTM, GRU or RNN
// instruction each. The params are created with I inferred from x and PyTorch's initialisation
// (every W, R and B uniform in [−1/√H, 1/√H]); see RecurrentOptions for their names and for
// stepping once per run.
Recurrent lstm(At x, int64_t hidden, const RecurrentOptions& opt = {});
Recurrent gru(At x, int64_t hidden, const RecurrentOptions& opt = {});
Recurrent rnn(At x, int64_t hidden, const RecurrentOptions& opt = {});

// Pooling (NCHW): the mean of each channel, [N, C, H, W] -> [N, C, 1, 1].
Var global_avg_pool(At x);

// Pooling (NCHW), as PyTorch's max_pool2d / avg_pool2d: kernel, stride and pad are {h, w}; an
// empty stride is the kernel. Max pads with −inf; count_include_pad says whether padding counts
// in the average's divisor; ceil_mode rounds the output size up (a partial last window).
Var max_pool2d(At x, std::vector<int64_t> kernel, std::vector<int64_t> stride = {}, std::vector<int64_t> pad = {0, 0},
               bool ceil_mode = false);
Var avg_pool2d(At x, std::vector<int64_t> kernel, std::vector<int64_t> stride = {}, std::vector<int64_t> pad = {0, 0},
               bool count_include_pad = true, bool ceil_mode = false);

// Normalization and regularization; both follow the run's mode (Executor::set_training).
// Batch normalization over axis 1 of x (rank ≥ 2, NCHW for images): creates γ, β as params and
// the running statistics as state (see BatchNormOptions), updated in place when training.
Var batchnorm2d(At x, const BatchNormOptions& opt = {});
// Training: zeroes each element with probability rate (in [0, 1)) and scales the rest by
// 1/(1 − rate); inference: x. Each call gets its own random stream (key = 1 + the number of
// DROPOUTs already in the program).
Var dropout(At x, float rate);

// Binary elementwise (numpy broadcasting)
Var add(At a, Var b, float alpha = 1, float beta = 1);
Var sub(At a, Var b);
Var mul(At a, Var b);
Var div(At a, Var b);
Var maximum(At a, Var b);
Var minimum(At a, Var b);
Var pow(At a, Var b);  // a^b as C's pow
// Comparisons: f32 masks of 1 and 0 (NaN compares false).
Var equal(At a, Var b);
Var less(At a, Var b);
Var less_equal(At a, Var b);
Var greater(At a, Var b);
Var greater_equal(At a, Var b);
// cond ≠ 0 ? a : b, the three broadcast (cond f32 or i32; NaN is true).
Var where(At cond, Var a, Var b);
Var operator+(At a, Var b);
Var operator-(At a, Var b);
Var operator*(At a, Var b);
Var operator/(At a, Var b);
Var operator*(float s, At a);
Var operator*(At a, float s);
Var operator-(At a);

// Unary elementwise
Var scale(At x, float alpha);
Var neg(At x);
Var exp(At x);
Var log(At x);
Var sqrt(At x);
Var abs(At x);
Var square(At x);
Var relu(At x);
Var leakyrelu(At x, float slope = 0.01f);
Var elu(At x, float alpha = 1);
Var clipped_relu(At x, float threshold = 6);
Var sigmoid(At x);
Var tanh(At x);
Var gelu(At x, bool tanh_approx = false);
Var swish(At x, float beta = 1);
Var erf(At x);
// min(max(x, lo), hi); NaN stays NaN.
Var clamp(At x, float lo, float hi);
Var reciprocal(At x);
Var floor(At x);
Var ceil(At x);
// The nearest whole number, halves to even (numpy.round, torch.round).
Var round(At x);
Var sign(At x);
Var softplus(At x);
Var hardsigmoid(At x, float alpha = 0.2f, float beta = 0.5f);
Var hardswish(At x);
Var selu(At x);
Var sin(At x);
Var cos(At x);
// x > 0 ? x : slope·x, slope broadcast to x (PyTorch's per-channel slope as [C, 1, 1]).
Var prelu(At x, Var slope);

// Elementwise expression over xs (%0, %1, …), e.g. calc({a, b}, "exp(sub(%0,%1))"): the
// language of ops/elementwise/expr.h, one pass over memory (CALC).
Var calc(const std::vector<Var>& xs, const std::string& expr, Loc loc = Loc::here());

// Along an axis
Var softmax(At x, int64_t axis = -1);
Var logsoftmax(At x, int64_t axis = -1);
Var reduce_sum(At x, int64_t axis = -1, bool keepdims = false);
Var reduce_mean(At x, int64_t axis = -1, bool keepdims = false);
Var reduce_max(At x, int64_t axis = -1, bool keepdims = false);
Var reduce_min(At x, int64_t axis = -1, bool keepdims = false);
Var reduce_prod(At x, int64_t axis = -1, bool keepdims = false);
// i32 index of the first maximum (minimum) along axis; a NaN counts as the extremum.
Var argmax(At x, int64_t axis = -1, bool keepdims = false);
Var argmin(At x, int64_t axis = -1, bool keepdims = false);

// Shape and data
Var reshape(At x, std::vector<int64_t> shape);
Var transpose(At x, std::vector<int64_t> perm);
Var concat(const std::vector<Var>& xs, int64_t axis = 0, Loc loc = Loc::here());
Var slice(At x, int64_t axis, int64_t start, int64_t end);
Var copy(At x);
// x as dtype `to` (f32 or i32): f32 → i32 truncates toward zero, saturating (NaN gives 0);
// i32 → f32 rounds to nearest.
Var cast(At x, DType to);
Var fill(At like, float value);
Var expand(At x, std::vector<int64_t> shape);
Var pad(At x, std::vector<int64_t> pads, float value = 0);
// x as the matrix [prod(dims[:axis]), prod(dims[axis:])] (ONNX Flatten); axis may be negative.
Var flatten(At x, int64_t axis = 1);
// NCHW x with each pixel repeated into a scale[0] × scale[1] block (nearest neighbour).
Var upsample_nearest(At x, std::vector<int64_t> scale);
Var step(At x);
// data's slices along axis picked by i32 indices (ONNX Gather; an embedding lookup for axis 0):
// the axis replaced by the indices' dimensions; out-of-range indices give zeros.
Var gather(At data, Var indices, int64_t axis = 0);

// Losses (scalar means over the batch)
Var softmax_ce(At logits, Var targets);  // targets: i32 class ids, or f32 like logits
Var mse(At prediction, Var target);
Var bce_logits(At logits, Var target);

}  // namespace nnasm
