// ONNX's recurrent layers, LSTM, GRU and RNN (opsets 7–22), onto the LSTM, GRU and RNN
// instructions, which take ONNX's operands as they are (gate order, both layouts, the optional
// inputs in ONNX's order). What the mapping adds: the operands a model may leave out (B as zeros,
// the one of LSTM's initial h and c not given as zeros), checks of W, R, B, the states, P and a
// sequence_lens known at import time against X and hidden_size in ONNX's own terms, and a clear
// refusal of what the instructions do not compute (activations other than the defaults and RNN's
// Relu, activation_alpha/beta, clip, input_forget=1).
#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "serialize/onnx/onnx_ops.h"

namespace nnasm {

namespace {

// What differs between the three op types: the instruction, its immediate of its own, the gate
// count and the default activations of one direction.
struct RecurrentOp {
  const char* type;
  Opcode op;
  const char* own_imm;
  int gates;
  std::vector<std::string> activations;
};

const RecurrentOp& recurrent_op(const std::string& type) {
  static const RecurrentOp ops[] = {
      {"LSTM", Opcode::LSTM, "peephole", 4, {"Sigmoid", "Tanh", "Tanh"}},
      {"GRU", Opcode::GRU, "linear_before_reset", 3, {"Sigmoid", "Tanh"}},
      {"RNN", Opcode::RNN, "activation", 1, {"Tanh"}},
  };
  for (const RecurrentOp& o : ops)
    if (type == o.type) return o;
  return ops[2];
}

bool same_name(const std::string& a, const std::string& b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return std::tolower(x) == std::tolower(y); });
}

std::string dims_str(const std::vector<int64_t>& d) { return fmt::format("[{}]", fmt::join(d, ",")); }

// The activations attribute: only the defaults (names compared as ONNX Runtime does, ignoring
// case), and for RNN Relu too, the same in both directions. `relu` says which RNN runs.
Status check_activations(NodeLowering& n, const RecurrentOp& o, int d, bool* relu) {
  std::vector<std::string> acts;
  NNASM_TRY(n.attr("activations", &acts));
  *relu = false;
  if (!n.has_attr("activations")) return Status::ok();
  const size_t per = o.activations.size();
  const std::string defaults = fmt::format("{}", fmt::join(o.activations, ", "));
  if (acts.size() != per * static_cast<size_t>(d))
    return Status::errorf("activations lists {} functions; {} takes {} per direction ({}), {} direction{} here",
                          acts.size(), o.type, per, defaults, d, d == 1 ? "" : "s");
  for (size_t k = 0; k < acts.size(); ++k) {
    const std::string& want = o.activations[k % per];
    const bool is_relu = o.op == Opcode::RNN && same_name(acts[k], "Relu");
    if (!same_name(acts[k], want) && !is_relu)
      return Status::errorf("activation '{}' (function {} of activations) is not supported: {} takes {}{} per direction",
                            acts[k], k + 1, o.type, defaults, o.op == Opcode::RNN ? " or Relu" : "");
    if (k == 0) *relu = is_relu;
    else if (is_relu != *relu)
      return Status::errorf("activations {} and {} differ between the directions, which RNN does not support", acts[0],
                            acts[k]);
  }
  return Status::ok();
}

// Input k, which must be FLOAT of `want` dims; `what` (ONNX's name for it) and `expected` (the
// dims in ONNX's words) make the error.
Status check_operand(NodeLowering& n, int k, const char* what, const std::vector<int64_t>& want, const std::string& expected) {
  if (n.type(k) != OnnxType::FLOAT) return Status::errorf("{} is {}; expected FLOAT", what, onnx_type_name(n.type(k)));
  if (n.dims(k) != want)
    return Status::errorf("{} is {}; expected {} = {}", what, dims_str(n.dims(k)), expected, dims_str(want));
  return Status::ok();
}

// Whether input k is zeros known at import time: values (not a weight, which training may
// change), or a const the program holds as zeros (what a pass-through such as Expand leaves).
bool known_zeros(const NodeLowering& n, int k) {
  const OnnxValue& v = n.value(k);
  const auto zero = [](auto s) { return s == 0; };
  if (n.is_host(k))
    return !v.weight && v.host.is_float() && v.host.has_values && std::all_of(v.host.f.begin(), v.host.f.end(), zero);
  if (v.kind != OnnxValue::Kind::TENSOR) return false;
  const TensorDesc& d = n.program().desc(v.id);
  if (d.role != Role::CONST) return false;
  if (!d.values.empty()) return std::all_of(d.values.begin(), d.values.end(), zero);
  return d.init.kind == InitKind::CONSTANT && d.init.a == 0;
}

}  // namespace

Status map_recurrent(NodeLowering& n) {
  const RecurrentOp& o = recurrent_op(n.node().op_type);
  const bool lstm = o.op == Opcode::LSTM;
  NNASM_TRY(n.expect_inputs(3, lstm ? 8 : 6));

  std::string direction = "forward";
  int64_t hidden_size = -1, layout = 0, linear_before_reset = 0, input_forget = 0;
  NNASM_TRY(n.attr("direction", &direction));
  NNASM_TRY(n.attr("hidden_size", &hidden_size));
  NNASM_TRY(n.attr("layout", &layout));
  if (o.op == Opcode::GRU) NNASM_TRY(n.attr("linear_before_reset", &linear_before_reset));
  if (lstm) NNASM_TRY(n.attr("input_forget", &input_forget));
  int64_t dir;
  if (direction == "forward") dir = NNASM_CHOICE(LSTM, direction, forward);
  else if (direction == "reverse") dir = NNASM_CHOICE(LSTM, direction, reverse);
  else if (direction == "bidirectional") dir = NNASM_CHOICE(LSTM, direction, bidirectional);
  else return Status::errorf("direction '{}' is not forward, reverse or bidirectional", direction);
  const int d = direction == "bidirectional" ? 2 : 1;
  if (layout != 0 && layout != 1) return Status::errorf("layout {} is not 0 or 1", layout);
  if (linear_before_reset != 0 && linear_before_reset != 1)
    return Status::errorf("linear_before_reset {} is not 0 or 1", linear_before_reset);
  if (input_forget != 0) return Status::error("input_forget=1 (coupled input and forget gates) is not supported");
  for (const char* a : {"activation_alpha", "activation_beta"}) {
    std::vector<float> v;
    NNASM_TRY(n.attr(a, &v));
    if (!v.empty()) return Status::errorf("attribute '{}' is not supported (only the default activations)", a);
  }
  if (n.has_attr("clip")) {
    float clip = 0;
    NNASM_TRY(n.attr("clip", &clip));
    return Status::errorf("clip {} is not supported (the cell state is not clipped)", float_to_string(clip));
  }
  bool relu = false;
  NNASM_TRY(check_activations(n, o, d, &relu));

  // X, W, R: the sizes everything else is checked against.
  const char* x_axes = layout ? "[batch_size, seq_length, input_size]" : "[seq_length, batch_size, input_size]";
  const std::vector<int64_t> x = n.dims(0), r = n.dims(2);
  if (n.type(0) != OnnxType::FLOAT) return Status::errorf("X is {}; expected FLOAT", onnx_type_name(n.type(0)));
  if (x.size() != 3) return Status::errorf("X is {}; expected rank 3, {}", dims_str(x), x_axes);
  const int64_t t = x[layout ? 1 : 0], batch = x[layout ? 0 : 1], in_size = x[2];
  if (r.size() != 3) return Status::errorf("R is {}; expected rank 3, [num_directions, {}·hidden_size, hidden_size]", dims_str(r), o.gates);
  const bool h_given = n.has_attr("hidden_size");
  const int64_t h = h_given ? hidden_size : r[2];
  if (h < 1) return Status::errorf("hidden_size {} must be positive", h);
  const int64_t gh = o.gates * h;
  const std::string gates_h = fmt::format("{}·hidden_size", o.gates);
  const std::string with = h_given ? fmt::format("hidden_size {}", h) : fmt::format("hidden_size {} (from R)", h);
  NNASM_TRY(check_operand(n, 1, "W", {d, gh, in_size},
                          fmt::format("[num_directions, {}, input_size] with {}", gates_h, with)));
  NNASM_TRY(check_operand(n, 2, "R", {d, gh, h}, fmt::format("[num_directions, {}, hidden_size] with {}", gates_h, with)));
  const std::vector<int64_t> state = layout ? std::vector<int64_t>{batch, d, h} : std::vector<int64_t>{d, batch, h};
  const char* state_axes = layout ? "[batch_size, num_directions, hidden_size]" : "[num_directions, batch_size, hidden_size]";

  TensorId xt, wt, rt, bt;
  NNASM_TRY(n.tensor(0, &xt));
  NNASM_TRY(n.tensor(1, &wt));
  NNASM_TRY(n.tensor(2, &rt));
  if (n.has(3)) {
    NNASM_TRY(check_operand(n, 3, "B", {d, 2 * gh}, fmt::format("[num_directions, 2·{}]", gates_h)));
    NNASM_TRY(n.tensor(3, &bt));
  } else {
    NNASM_TRY(n.filled({d, 2 * gh}, 0, &bt));
  }
  std::vector<TensorId> in = {xt, wt, rt, bt};

  // Initial states: both or neither (the instruction's initial=1 takes h0, and c0 for LSTM).
  // Constant zeros, which PyTorch's exporter writes for a module called without a state, are
  // the instruction's default and are left out.
  const std::vector<int> states = lstm ? std::vector<int>{5, 6} : std::vector<int>{5};
  bool initial = false;
  for (int k : states) {
    if (!n.has(k)) continue;
    NNASM_TRY(check_operand(n, k, k == 5 ? "initial_h" : "initial_c", state, state_axes));
    initial |= !known_zeros(n, k);
  }
  for (int k : states) {
    if (!initial) break;
    TensorId s;
    if (n.has(k)) NNASM_TRY(n.tensor(k, &s));
    else NNASM_TRY(n.filled(state, 0, &s));
    in.push_back(s);
  }

  // sequence_lens: values known at import time are checked against seq_length (and left out
  // when every sequence is whole, which saves the kernel reading them); values computed at run
  // time are clamped to [0, seq_length] by the instruction.
  bool lens = false;
  if (n.has(4)) {
    const OnnxType lt = n.type(4);
    if (!onnx_type_is_integer(lt) || lt == OnnxType::BOOL)
      return Status::errorf("sequence_lens is {}; expected INT32 (or another integer type)", onnx_type_name(lt));
    if (n.dims(4) != std::vector<int64_t>{batch})
      return Status::errorf("sequence_lens is {}; expected [batch_size] = [{}]", dims_str(n.dims(4)), batch);
    bool whole = false;
    if (n.is_host(4)) {
      const HostTensor* v;
      NNASM_TRY(n.host(4, "sequence_lens", &v));
      for (int64_t b = 0; b < batch; ++b)
        if (v->i[b] < 0 || v->i[b] > t)
          return Status::errorf("sequence_lens holds {} for sequence {}, outside [0, seq_length = {}]", v->i[b], b, t);
      whole = std::all_of(v->i.begin(), v->i.end(), [&](int64_t len) { return len == t; });
    }
    if (!whole) {
      TensorId lt_id;
      NNASM_TRY(n.tensor(4, &lt_id));
      in.push_back(lt_id);
      lens = true;
    }
  }
  if (lstm && n.has(7)) {
    NNASM_TRY(check_operand(n, 7, "P", {d, 3 * h}, "[num_directions, 3·hidden_size]"));
    TensorId p;
    NNASM_TRY(n.tensor(7, &p));
    in.push_back(p);
  }

  const int64_t own = lstm ? n.has(7)
                      : o.op == Opcode::GRU ? linear_before_reset
                      : relu ? NNASM_CHOICE(RNN, activation, relu) : NNASM_CHOICE(RNN, activation, tanh);
  std::vector<TensorId> out;
  NNASM_TRY(n.emit(o.op, in,
                   {{"direction", imm_i(dir)}, {"batch_first", imm_i(layout)}, {"initial", imm_i(initial)},
                    {"lens", imm_i(lens)}, {o.own_imm, imm_i(own)}},
                   &out));
  for (int k = 0; k < static_cast<int>(out.size()); ++k)
    if (n.wants(k)) n.set(k, out[static_cast<size_t>(k)], OnnxType::FLOAT);
  return Status::ok();
}

}  // namespace nnasm
