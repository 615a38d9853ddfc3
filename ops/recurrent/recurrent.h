// What LSTM, GRU and RNN share: the operands' geometry (ONNX's layouts, the optional inputs the
// immediates announce), one shape check that words every error alike, and the reference
// driver, which runs one sequence at a time through the op's cell.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "ops/op.h"

namespace nnasm {

enum class RnnKind : uint8_t { LSTM, GRU, RNN };

struct RnnGeom {
  RnnKind kind = RnnKind::RNN;
  int gates = 1;  // G: 4 (LSTM i,o,f,c), 3 (GRU z,r,h), 1 (RNN)
  int64_t t = 0, n = 0, i = 0, h = 0;  // steps, batch, input size, hidden size
  int d = 1;                           // directions: 1, or 2 when bidirectional
  bool reverse = false;                // direction=reverse (D = 1, run from the last step)
  bool batch_first = false;            // x [N,T,I], y [N,T,D,H], states [N,D,H]
  bool peephole = false;               // LSTM: P [D,3H] (i, o, f)
  bool linear_before_reset = false;    // GRU: r⊙(h·Rhᵀ + Rbh) instead of (r⊙h)·Rhᵀ + Rbh
  bool relu = false;                   // RNN: relu instead of tanh
  // Input positions of the optional operands, −1 when absent (x, W, R, B are 0 … 3).
  int in_h0 = -1, in_c0 = -1, in_lens = -1, in_p = -1;
  int n_in = 4;

  int64_t gh() const { return gates * h; }
  // Whether direction dir (0 or 1) runs from the last step to the first.
  bool backwards(int dir) const { return reverse || dir == 1; }
  // Element offsets of x[t, n, 0], y[t, dir, n, 0] and a state's [dir, n, 0] in either layout.
  int64_t x_at(int64_t step, int64_t b) const { return (batch_first ? b * t + step : step * n + b) * i; }
  int64_t y_at(int64_t step, int dir, int64_t b) const {
    return (batch_first ? (b * t + step) * d + dir : (step * d + dir) * n + b) * h;
  }
  int64_t s_at(int dir, int64_t b) const { return (batch_first ? b * d + dir : dir * n + b) * h; }
  Shape state_shape() const { return batch_first ? Shape{n, d, h} : Shape{d, n, h}; }
  Shape y_shape() const { return batch_first ? Shape{n, t, d, h} : Shape{t, d, n, h}; }
};

// The kind of a recurrent opcode (LSTM, GRU or RNN, or its *_BWD).
RnnKind rnn_kind(Opcode op);

// The geometry the immediates alone fix (the sizes left 0), with the optional inputs' positions
// and the operand count they announce; and those operands' names ("x, W, R, B, h0, lens").
RnnGeom rnn_immediates(const Instruction& ins);
std::string rnn_operand_names(const RnnGeom& g);

// The geometry of `ins` from its immediates and input types, checking every operand: the count
// the immediates announce, dtypes, and shapes against x and the weights, each error naming the
// instruction and the operand.
Status rnn_geom(const Instruction& ins, const std::vector<TensorType>& in, RnnGeom* g);
// The same from a kernel's arguments, which shape inference has checked.
RnnGeom rnn_geom(const KernelArgs* a);

// The three ops' shape hook: y, the last h (and the last c for LSTM).
Status rnn_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out);
// The reference kernel and its scratch (one sequence's state and gates).
void rnn_ref(const KernelArgs* a);
size_t rnn_ref_scratch(const Instruction& ins, const TensorType* in, const TensorType* out);

// The generated kernels (ops/recurrent/recurrent_jit.cpp): the JIT hook, its parallel parts (a
// bidirectional layer's two directions) and the scratch either kernel needs.
Result<std::shared_ptr<const JitKernel>> rnn_jit(const JitRequest& r, KernelCache& cache);
int rnn_jit_parts(const JitRequest& r, int threads);
size_t rnn_scratch(const Instruction& ins, const TensorType* in, const TensorType* out);

// The inputs of a forward op (and the leading inputs of its *_BWD) as a kernel sees them: null for
// the optional ones the immediates leave out.
struct RnnInputs {
  const float *x, *w, *r, *b, *h0, *c0, *p;
};
RnnInputs rnn_inputs(const RnnGeom& g, const KernelArgs* a);
// A forward op's outputs: y, the last h, and the last c (null but for LSTM).
struct RnnOutputs {
  float *y, *yh, *yc;
};
RnnOutputs rnn_outputs(const RnnGeom& g, const KernelArgs* a);

// Sequence b's length: lens[b] clamped to [0, T] (T without lens).
int64_t rnn_length(const RnnGeom& g, const KernelArgs* a, int64_t b);

// The gradient rule of LSTM, GRU and RNN (ops/recurrent/rnn_bwd.cpp): one LSTM_BWD, GRU_BWD or
// RNN_BWD, zeros for the outputs no gradient flows into, none with respect to lens.
Status rnn_grad(GradBuilder& b, const Instruction& ins, const std::vector<TensorId>& dy, const std::vector<bool>& need,
                std::vector<TensorId>* dx);

inline float rnn_sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

}  // namespace nnasm
