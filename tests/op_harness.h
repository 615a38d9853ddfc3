// A harness for testing one op in isolation: builds a one-instruction program from host-side
// tensors, runs it with a guard band after the output, and compares the result with an expectation
// computed independently by the test. Index arithmetic here is written from scratch (no Shape::stride,
// broadcast_shapes or normalize_axis), because those are part of what the tests check.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "engine/executor.h"
#include "isa/bf16.h"
#include "isa/program.h"

namespace nnasm::test {

// A tensor on the test's side: its type and its values in row-major order, in double (i32 values
// are whole numbers; f32 values are exactly representable as float).
struct HostTensor {
  TensorType type;
  std::vector<double> v;
};

inline int64_t count_of(const Shape& s) {
  int64_t n = 1;
  for (int d = 0; d < s.rank; ++d) n *= s.dims[d];
  return n;
}

inline std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(static_cast<size_t>(s.rank), 1);
  for (int d = s.rank - 2; d >= 0; --d) st[d] = st[d + 1] * s.dims[d + 1];
  return st;
}

inline std::vector<int64_t> unravel(int64_t flat, const Shape& s) {
  std::vector<int64_t> idx(static_cast<size_t>(s.rank), 0);
  for (int d = s.rank - 1; d >= 0; --d) {
    idx[d] = flat % s.dims[d];
    flat /= s.dims[d];
  }
  return idx;
}

inline int64_t ravel(const std::vector<int64_t>& idx, const Shape& s) {
  const std::vector<int64_t> st = strides_of(s);
  int64_t flat = 0;
  for (int d = 0; d < s.rank; ++d) flat += idx[d] * st[d];
  return flat;
}

inline Shape shape_of(const std::vector<int64_t>& dims) {
  Shape s;
  s.rank = static_cast<int>(dims.size());
  for (int d = 0; d < s.rank; ++d) s.dims[d] = dims[d];
  return s;
}

inline HostTensor host(DType dt, const Shape& s, std::vector<double> v) { return {TensorType{dt, s}, std::move(v)}; }
inline HostTensor host_f32(std::vector<double> v) {
  Shape s{static_cast<int64_t>(v.size())};
  return host(DType::F32, s, std::move(v));
}

// Uniform in [lo, hi], rounded to float so that the test and the engine see the same numbers.
inline HostTensor random_f32(const Shape& s, std::mt19937& rng, double lo = -2, double hi = 2) {
  std::uniform_real_distribution<double> u(lo, hi);
  HostTensor t{TensorType{DType::F32, s}, {}};
  t.v.resize(static_cast<size_t>(count_of(s)));
  for (double& x : t.v) x = static_cast<float>(u(rng));
  return t;
}

inline HostTensor random_i32(const Shape& s, std::mt19937& rng) {
  std::uniform_int_distribution<int32_t> u(-2000000000, 2000000000);
  HostTensor t{TensorType{DType::I32, s}, {}};
  t.v.resize(static_cast<size_t>(count_of(s)));
  for (double& x : t.v) x = u(rng);
  return t;
}

// An immediate given by schema key; ENUM values by identifier (the index is looked up).
struct ImmArg {
  std::string key;
  Imm value;
};
inline ImmArg imm_f(std::string key, double v) {
  Imm m;
  m.type = ImmType::F32;
  m.f = v;
  return {std::move(key), m};
}
inline ImmArg imm_i(std::string key, int64_t v) {
  Imm m;
  m.type = ImmType::I64;
  m.i = v;
  return {std::move(key), m};
}
inline ImmArg imm_b(std::string key, bool v) {
  Imm m;
  m.type = ImmType::BOOL;
  m.i = v;
  return {std::move(key), m};
}
inline ImmArg imm_ints(std::string key, std::vector<int64_t> v) {
  Imm m;
  m.type = ImmType::INTS;
  m.ints = std::move(v);
  return {std::move(key), m};
}
inline ImmArg imm_enum(std::string key, std::string ident) {
  Imm m;
  m.type = ImmType::ENUM;
  m.ident = std::move(ident);
  return {std::move(key), m};
}
inline ImmArg imm_str(std::string key, std::string text) {
  Imm m;
  m.type = ImmType::STR;
  m.ident = std::move(text);
  return {std::move(key), m};
}

// Sets `args` on `ins` by key. Returns what is wrong with the arguments (a mistake in the test),
// or an empty string.
inline std::string apply_imms(Instruction* ins, const std::vector<ImmArg>& args) {
  const OpInfo& info = op_info(ins->op);
  for (const ImmArg& a : args) {
    const int k = imm_index(info, a.key);
    if (k < 0) return fmt::format("test error: {} has no immediate '{}'", info.mnemonic, a.key);
    if (info.imms[k].type != a.value.type)
      return fmt::format("test error: immediate '{}' of {} has another type", a.key, info.mnemonic);
    Imm v = a.value;
    if (v.type == ImmType::ENUM) {
      const std::vector<std::string>& c = info.imms[k].choices;
      auto it = std::find(c.begin(), c.end(), v.ident);
      if (it == c.end()) return fmt::format("test error: '{}' is no choice of {}.{}", v.ident, info.mnemonic, a.key);
      v.i = it - c.begin();
    }
    ins->imm[k] = v;
  }
  return "";
}

inline std::string describe(Opcode op, const std::vector<HostTensor>& in, const std::vector<ImmArg>& imms) {
  std::string s = op_info(op).mnemonic;
  for (size_t k = 0; k < in.size(); ++k) s += (k ? ", " : " ") + in[k].type.str();
  for (const ImmArg& a : imms) s += fmt::format(" {}={}", a.key, imm_to_string(a.value));
  return s;
}

// Declares `in` as inputs x0, x1, ... of `p`, appending their ids to `ids`. Reduced-precision
// operands (bf16, i8, u8) are params instead: a model's inputs are f32 or i32 (Program::declare).
inline Status declare_inputs(Program& p, const std::vector<TensorType>& in, std::vector<TensorId>* ids) {
  for (size_t k = 0; k < in.size(); ++k) {
    TensorDesc d;
    d.name = fmt::format("x{}", k);
    d.type = in[k];
    d.role = dtype_reduced(in[k].dtype) ? Role::PARAM : Role::INPUT;
    Result<TensorId> id = p.declare(d);
    if (!id) return id.status();
    ids->push_back(id.value());
  }
  return Status::ok();
}

// For an op that updates operands in place (OPF_INPLACE), the input each output is, as the op's
// contract states it (ops/optim/); empty for every other op. An in-place op missing here fails
// to build with the program's "updates its operands in place" message.
inline std::vector<int> inplace_inputs(Opcode op, size_t n_in) {
  switch (op) {
    case Opcode::ADVANCE:
    case Opcode::ASSIGN: return {0};
    case Opcode::CLIP_GRAD_NORM: {
      std::vector<int> all(n_in);
      for (size_t k = 0; k < n_in; ++k) all[k] = static_cast<int>(k);
      return all;
    }
    case Opcode::SGD:
    case Opcode::RMSPROP: return {0, 2};
    case Opcode::ADAM:
    case Opcode::ADAMW: return {0, 2, 3};
    default: return {};
  }
}

// Appends `op` on `in_ids` with `imms`: through append_new, or, for an in-place op, with the
// inputs it updates as its outputs through append. On success `*outs` holds the output ids.
inline Status append_op(Program& p, Opcode op, const std::vector<TensorId>& in_ids, const std::vector<ImmArg>& imms,
                        std::vector<TensorId>* outs) {
  Instruction ins = make_instruction(op, in_ids, {});
  const std::string bad = apply_imms(&ins, imms);
  if (!bad.empty()) return Status::error(bad);
  if (op_info(op).flags & OPF_INPLACE) {
    for (int k : inplace_inputs(op, in_ids.size()))
      if (k < static_cast<int>(in_ids.size())) ins.out.push_back(in_ids[static_cast<size_t>(k)]);
    std::vector<TensorId> o = ins.out;
    NNASM_TRY(p.append(std::move(ins)));
    *outs = std::move(o);
    return Status::ok();
  }
  Result<std::vector<TensorId>> r = p.append_new(ins);
  if (!r) return r.status();
  *outs = std::move(r.value());
  return Status::ok();
}

// Declares `in` as inputs x0, x1, ... and appends `op` with `imms` (see append_op). On success
// `*out` is the first output's id, and `*outs` (if given) every output's.
inline Status build_op(Program& p, Opcode op, const std::vector<TensorType>& in, const std::vector<ImmArg>& imms,
                       std::vector<TensorId>* in_ids, TensorId* out, std::vector<TensorId>* outs = nullptr) {
  NNASM_TRY(declare_inputs(p, in, in_ids));
  std::vector<TensorId> o;
  NNASM_TRY(append_op(p, op, *in_ids, imms, &o));
  if (o.empty()) return Status::error("test error: the op has no outputs");
  *out = o[0];
  if (outs) *outs = std::move(o);
  return Status::ok();
}

// Written over the whole output storage (padding included) before the run: a NaN payload that no
// kernel computes, so an element the kernel forgot reads as a mismatch and a write past the end
// shows in the padding.
constexpr uint32_t GUARD_WORD = 0x7fa5a5a5u;

// The engine pads storage to whole 64-byte lines (engine/tensor.h); `elem` bytes an element.
inline size_t padded_bytes(int64_t numel, size_t elem = 4) {
  const size_t b = static_cast<size_t>(numel) * elem;
  return std::max<size_t>(64, (b + 63) / 64 * 64);
}

// Byte b of storage filled with GUARD_WORD from its start (little-endian words).
inline unsigned char guard_byte(size_t b) { return static_cast<unsigned char>(GUARD_WORD >> (8 * (b % 4))); }

// Element i of a tensor's storage, as the test's double, and back, for every dtype the harness
// takes (f32, i32, bf16, i8, u8); a bf16 is written rounded to nearest even.
inline double read_elem(const Tensor& t, int64_t i) {
  switch (t.desc.type.dtype) {
    case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(t.data.data())[i]);
    case DType::I32: return t.i32()[i];  // not through a ?: with float, which would round it
    case DType::I8: return static_cast<const int8_t*>(t.data.data())[i];
    case DType::U8: return static_cast<const uint8_t*>(t.data.data())[i];
    default: return t.f32()[i];
  }
}
inline void write_elem(Tensor& t, int64_t i, double v) {
  switch (t.desc.type.dtype) {
    case DType::I32: t.i32()[i] = static_cast<int32_t>(v); break;
    case DType::BF16: static_cast<uint16_t*>(t.data.data())[i] = bf16_from_double(v); break;
    case DType::I8: static_cast<int8_t*>(t.data.data())[i] = static_cast<int8_t>(v); break;
    case DType::U8: static_cast<uint8_t*>(t.data.data())[i] = static_cast<uint8_t>(v); break;
    default: t.f32()[i] = static_cast<float>(v);
  }
}

struct OpOutput {
  Status status;  // shape inference or prepare
  TensorType type;      // of the first output
  std::vector<double> v;
  std::vector<HostTensor> outs;  // every output, the first included
  std::vector<std::string> problems;  // guard band or an input overwritten
  std::string kernel;  // the kernel that ran ("ref": the reference)
  int parts = 1;       // the parallel parts it ran in
};

// The context run_op runs the op in: the JIT configuration and the threads; unset, the
// environment's (NNASM_ISA, NNASM_JIT, NNASM_THREADS) as any Context takes them.
struct RunConfig {
  bool set_jit = false;
  JitConfig jit;
  int threads = 0;  // 0: the context's default
};

// Runs `op` on `inputs` once: fills the inputs, fills each output and its padding with
// GUARD_WORD, runs, reads the outputs, and checks the padding and the inputs (padding included)
// are untouched. An in-place op's outputs are inputs (see inplace_inputs): those start from their
// input values, only their padding is guarded, and they are exempt from the "inputs unchanged"
// check; its other inputs are still checked. `training` sets the run's mode (RunState). An op
// that updates state inputs (OPF_UPDATES_STATE, e.g. BATCHNORM2D's running statistics) has
// those inputs' final values appended to the outputs, in input order, in either mode; only their
// padding is checked. `cfg` picks the JIT level and the threads; the result names the kernel of the
// program's first instruction and its parts.
inline OpOutput run_op(Opcode op, const std::vector<HostTensor>& inputs, const std::vector<ImmArg>& imms,
                       bool training = false, const RunConfig& cfg = {}) {
  OpOutput r;
  Context ctx;
  if (cfg.set_jit) ctx.set_jit(cfg.jit);
  if (cfg.threads > 0) ctx.set_threads(cfg.threads);
  // The op's own results at denormals are what the special-value and parity tests check; the
  // executor's flushing of them (engine/denormals.h) has tests of its own.
  ctx.set_flush_denormals(false);
  Program p(ctx);
  std::vector<TensorType> types;
  for (const HostTensor& t : inputs) types.push_back(t.type);
  std::vector<TensorId> ids, outs;
  TensorId out = NO_TENSOR;
  r.status = build_op(p, op, types, imms, &ids, &out, &outs);
  if (!r.status) return r;
  // A reduced-precision output (QUANTIZE's) cannot be the program's (Program::finish): it stays a
  // temporary, kept by preparing unoptimized (no pass removes it, and every temporary has
  // storage of its own in the context, guard band included).
  for (TensorId o : outs) {
    if (dtype_reduced(p.desc(o).type.dtype))
      ctx.set_opt_level(0);
    else
      p.mark_output(o);
  }
  std::vector<TensorId> read = outs;  // the outputs, then the state inputs the op updates
  for (size_t k = 0; k < ids.size(); ++k)
    if (state_inputs(op) >> k & 1) read.push_back(ids[k]);
  Result<std::unique_ptr<Executor>> ex = Executor::prepare(p);
  if (!ex) {
    r.status = ex.status();
    return r;
  }
  auto is_out = [&](TensorId id) { return std::find(read.begin(), read.end(), id) != read.end(); };
  std::vector<std::vector<unsigned char>> before;
  for (size_t k = 0; k < inputs.size(); ++k) {
    Tensor& t = ctx.at(ids[k]);
    for (size_t i = 0; i < inputs[k].v.size(); ++i) write_elem(t, static_cast<int64_t>(i), inputs[k].v[i]);
    const unsigned char* b = static_cast<const unsigned char*>(t.data.data());
    before.emplace_back(b, b + padded_bytes(t.numel(), dtype_size(t.desc.type.dtype)));
  }
  for (TensorId o : outs) {
    Tensor& y = ctx.at(o);
    const bool updated_in_place = std::find(ids.begin(), ids.end(), o) != ids.end();
    const size_t es = dtype_size(y.desc.type.dtype), bytes = padded_bytes(y.numel(), es);
    unsigned char* yb = static_cast<unsigned char*>(y.data.data());
    for (size_t b = updated_in_place ? static_cast<size_t>(y.numel()) * es : 0; b < bytes; ++b) yb[b] = guard_byte(b);
  }

  ex.value()->set_training(training);
  ex.value()->run();
  r.kernel = ex.value()->kernel_name(0);
  r.parts = std::max(1, ex.value()->parts(0));

  for (TensorId o : read) {
    const Tensor& y = ctx.at(o);
    HostTensor h{y.desc.type, {}};
    const int64_t n = y.numel();
    h.v.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) h.v[i] = read_elem(y, i);
    const size_t es = dtype_size(y.desc.type.dtype), bytes = padded_bytes(n, es);
    const unsigned char* yb = static_cast<const unsigned char*>(y.data.data());
    const auto in_k = std::find(ids.begin(), ids.end(), o);
    const bool state_input = std::find(outs.begin(), outs.end(), o) == outs.end();
    const unsigned char* bb = state_input ? before[static_cast<size_t>(in_k - ids.begin())].data() : nullptr;
    for (size_t b = static_cast<size_t>(n) * es; b < bytes; ++b)
      if (yb[b] != (state_input ? bb[b] : guard_byte(b))) {
        r.problems.push_back(fmt::format("guard band of %{} overwritten: byte {} past the {} elements is {:#04x}",
                                         y.desc.name, b - static_cast<size_t>(n) * es, n, yb[b]));
        break;
      }
    r.outs.push_back(std::move(h));
  }
  r.type = r.outs[0].type;
  r.v = r.outs[0].v;
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (is_out(ids[k])) continue;
    const Tensor& t = ctx.at(ids[k]);
    if (std::memcmp(t.data.data(), before[k].data(), before[k].size()) != 0)
      r.problems.push_back(fmt::format("input {} was modified", k + 1));
  }
  return r;
}

struct Tolerance {
  double atol = 0, rtol = 0;
};

// What one case should produce. A value passes when |got − want| ≤ atol + rtol·mag, where mag is
// the magnitude its rounding error scales with: |want| by default, Σ|terms| for sums and products.
// NaN must meet NaN, ±inf the same inf. Tolerance {0, 0} asks for exact equality.
struct Expected {
  HostTensor t;
  std::vector<double> mag;
  Tolerance tol;
};

inline std::string index_str(int64_t flat, const Shape& s) {
  if (s.rank == 0) return "[]";
  return fmt::format("[{}]", fmt::join(unravel(flat, s), ","));
}

// Compares the values of one output with an expectation; appends up to 5 mismatches to `msg`
// (prefixed with `what`) and returns how many elements differ.
inline int64_t count_mismatches(const Expected& want, const std::vector<double>& got, const std::string& what,
                                std::string* msg) {
  int64_t bad = 0;
  const int64_t n = static_cast<int64_t>(want.t.v.size());
  for (int64_t i = 0; i < n; ++i) {
    const double w = want.t.v[i], g = got[i];
    bool ok;
    if (std::isnan(w))
      ok = std::isnan(g);
    else if (std::isinf(w))
      ok = g == w;
    else {
      const double m = want.mag.empty() ? std::fabs(w) : want.mag[i];
      ok = std::isfinite(g) && std::fabs(g - w) <= want.tol.atol + want.tol.rtol * m;
    }
    if (!ok && bad++ < 5)
      *msg += fmt::format("  {}at {}: got {}, expected {} (atol {}, rtol {})\n", what, index_str(i, want.t.type.shape),
                          g, w, want.tol.atol, want.tol.rtol);
  }
  return bad;
}

// Every output against its expectation, in order (for ops with several outputs: the in-place
// optimizer steps).
inline ::testing::AssertionResult matches_all(const std::vector<Expected>& want, const OpOutput& got) {
  if (!got.status) return ::testing::AssertionFailure() << "failed: " << got.status.message();
  if (got.outs.size() != want.size())
    return ::testing::AssertionFailure() << got.outs.size() << " outputs, expected " << want.size();
  std::string msg;
  for (const std::string& p : got.problems) msg += "  " + p + "\n";
  int64_t bad = 0, n = 0;
  for (size_t k = 0; k < want.size(); ++k) {
    if (!(got.outs[k].type == want[k].t.type))
      return ::testing::AssertionFailure() << "output " << k + 1 << " type " << got.outs[k].type.str() << ", expected "
                                           << want[k].t.type.str();
    bad += count_mismatches(want[k], got.outs[k].v, fmt::format("output {} ", k + 1), &msg);
    n += static_cast<int64_t>(want[k].t.v.size());
  }
  if (bad || !got.problems.empty())
    return ::testing::AssertionFailure() << bad << " of " << n << " elements differ\n" << msg;
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult matches(const Expected& want, const OpOutput& got) {
  if (!got.status) return ::testing::AssertionFailure() << "failed: " << got.status.message();
  if (!(got.type == want.t.type))
    return ::testing::AssertionFailure() << "output type " << got.type.str() << ", expected " << want.t.type.str();
  std::string msg;
  for (const std::string& p : got.problems) msg += "  " + p + "\n";
  const int64_t bad = count_mismatches(want, got.v, "", &msg);
  if (bad || !got.problems.empty())
    return ::testing::AssertionFailure() << bad << " of " << want.t.v.size() << " elements differ\n" << msg;
  return ::testing::AssertionSuccess();
}

// Appends `op` to a fresh program and expects shape inference to refuse it with a message that
// contains every string of `needles`, leaving the program and its context as they were.
inline ::testing::AssertionResult append_fails(Opcode op, const std::vector<TensorType>& in,
                                               const std::vector<ImmArg>& imms,
                                               const std::vector<std::string>& needles) {
  Context ctx;
  Program p(ctx);
  std::vector<TensorId> ids;
  // Declare first, so the counts below are taken with the inputs in place.
  if (Status s = declare_inputs(p, in, &ids); !s)
    return ::testing::AssertionFailure() << "cannot declare input: " << s.message();
  const size_t n_tensors = p.tensors().size(), n_ctx = ctx.size();
  std::vector<TensorId> outs;
  const Status st = append_op(p, op, ids, imms, &outs);
  if (st.message().rfind("test error", 0) == 0) return ::testing::AssertionFailure() << st.message();
  if (st) return ::testing::AssertionFailure() << "append succeeded, making " << p.desc(outs[0]).type.str();
  const std::string& m = st.message();
  for (const std::string& s : needles)
    if (m.find(s) == std::string::npos)
      return ::testing::AssertionFailure() << "message \"" << m << "\" lacks \"" << s << "\"";
  if (p.tensors().size() != n_tensors || ctx.size() != n_ctx || !p.code().empty())
    return ::testing::AssertionFailure() << "the failed append left tensors or code behind";
  return ::testing::AssertionSuccess() << m;
}

}  // namespace nnasm::test
