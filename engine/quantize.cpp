// quantize_program: find the layers with a stored f32 weight, run the f32 program once on the
// calibration batch with each layer's input, bias and output made outputs (a probe copy in the
// same context, sharing the weights), measure each layer's reduced form alone on that input,
// then re-record the program into the output context with the layers that passed rewritten by
// append_reduced_layer.
#include "engine/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "engine/context.h"
#include "engine/executor.h"
#include "engine/rebatch.h"
#include "isa/bf16.h"

namespace nnasm {

const char* quant_type_name(QuantType t) { return t == QuantType::BF16 ? "bf16" : "int8"; }

bool quant_type_from_name(const std::string& s, QuantType* out) {
  if (s == "bf16") *out = QuantType::BF16;
  else if (s == "int8") *out = QuantType::INT8;
  else return false;
  return true;
}

double default_max_error(QuantType t) { return t == QuantType::BF16 ? 0.01 : 0.05; }

WeightsI8 quantize_weights_i8(const float* w, int64_t k, int64_t o) {
  WeightsI8 r;
  r.w.resize(static_cast<size_t>(k * o));
  r.scale.assign(static_cast<size_t>(o), 0.0f);
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < o; ++j) r.scale[j] = std::max(r.scale[j], std::fabs(w[i * o + j]));
  for (float& s : r.scale) s = s > 0 ? s / 127.0f : 1.0f;
  for (int64_t i = 0; i < k; ++i)
    for (int64_t j = 0; j < o; ++j) {
      // nearbyint rounds half to even in the default rounding mode; the clamp catches the
      // column maximum rounding past 127 through the division's own rounding.
      const float q = std::nearbyint(w[i * o + j] / r.scale[j]);
      r.w[i * o + j] = static_cast<int8_t>(std::clamp(q, -127.0f, 127.0f));
    }
  return r;
}

namespace {

// Stores `bytes` bytes as the values of `id`, a tensor of `p`'s context.
Status set_values(Program* p, TensorId id, const void* src, size_t bytes) {
  Context* ctx = Context::of(*p);
  Tensor& t = ctx->at(id);
  if (!t.allocate(ctx->allocator()))
    return Status::errorf("@{}: cannot allocate {} bytes", t.desc.name, storage_bytes(t.desc.type));
  std::memcpy(t.data.data(), src, bytes);
  return Status::ok();
}

// A stored tensor of `p` (param, const or state) named `name` holding `values` (of type's dtype:
// f32, bf16 or i8). A constant's values are its declaration's too: prepare fills constants from
// their declarations on every run, params only when they have no values yet.
Result<TensorId> declare_weight(Program* p, const std::string& name, Role role, TensorType type, const void* values) {
  TensorDesc d;
  d.name = name;
  d.type = type;
  d.role = role;
  if (role == Role::CONST) {
    const int64_t n = type.shape.numel();
    d.values.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      d.values[i] = type.dtype == DType::BF16 ? bf16_to_f32(static_cast<const uint16_t*>(values)[i])
                    : type.dtype == DType::I8 ? static_cast<const int8_t*>(values)[i]
                                              : static_cast<const float*>(values)[i];
  }
  Result<TensorId> id = p->declare(std::move(d));
  if (!id) return id;
  NNASM_TRY(set_values(p, id.value(), values, static_cast<size_t>(type.shape.numel()) * dtype_size(type.dtype)));
  return id;
}

// One layer to rewrite: a LINEAR, a MATMUL by a stored matrix or a CONV2D `ins` of the source
// program and its f32 weight, seen as a product of k inputs for each of o outputs. A MATMUL
// becomes the dense layer's reduced form with a zero bias.
struct LayerSite {
  const Instruction* ins;
  std::string weight;  // the f32 weight's name: the new tensors are named after it
  Role role;           // the weight's role, which the new tensors take
  Shape shape;         // the reduced weight's: [k, o] for a product, CONV2D's [o, C, kh, kw] (k = C·kh·kw)
  int64_t k, o;
  const float* w;      // k·o values as `shape` lays them out, in the source context or in kxo
  std::vector<float> kxo;  // a MATMUL by a transposed weight ([o, k] stored): the [k, o] copy
  bool conv() const { return ins->op == Opcode::CONV2D; }
  bool matmul() const { return ins->op == Opcode::MATMUL; }
  TensorId bias() const { return ins->in.size() > 2 ? ins->in[2] : NO_TENSOR; }
};

// Each immediate of `from` that `to`'s op also has, by key (a conv's geometry, the activation).
void copy_imms(const Instruction& from, Instruction* to) {
  const std::vector<ImmSpec>& keys = to->info().imms;
  const std::vector<ImmSpec>& have = from.info().imms;
  for (size_t i = 0; i < have.size() && i < from.imm.size(); ++i)
    for (size_t j = 0; j < keys.size(); ++j)
      if (keys[j].key == have[i].key) to->imm[j] = from.imm[i];
}

// The int8 form of a conv weight [o, k] (output-major): quantize_weights_i8's per-output scales.
WeightsI8 quantize_weights_i8_output_major(const float* w, int64_t k, int64_t o) {
  std::vector<float> t(static_cast<size_t>(k * o));
  for (int64_t r = 0; r < o; ++r)
    for (int64_t c = 0; c < k; ++c) t[c * o + r] = w[r * k + c];
  WeightsI8 q = quantize_weights_i8(t.data(), k, o);
  std::vector<int8_t> back(q.w.size());
  for (int64_t r = 0; r < o; ++r)
    for (int64_t c = 0; c < k; ++c) back[r * k + c] = q.w[c * o + r];
  q.w = std::move(back);
  return q;
}

// The reduced form of one layer, in the three steps a rewrite places apart: its weights declared
// where the f32 weight was, what the derive section computes from them, and the forward
// instruction. The one place that knows which tensors and instructions each type takes.
struct ReducedLayer {
  std::vector<TensorId> tensors;  // bf16: @W.bf16; int8: @W.i8, @W.scale, then the derived ones
  TensorId bias = NO_TENSOR;      // a MATMUL's: @W.bias, zeros
};

// Declares the new weights of `site` in `p`, named after the f32 weight, with their values.
Status declare_reduced_weights(QuantType t, const LayerSite& site, Program* p, ReducedLayer* r) {
  const size_t n = static_cast<size_t>(site.k * site.o);
  if (site.matmul()) {
    const std::vector<float> zeros(static_cast<size_t>(site.o), 0.0f);
    Result<TensorId> b = declare_weight(p, site.weight + ".bias", Role::CONST, TensorType{DType::F32, Shape{site.o}},
                                        zeros.data());
    if (!b) return b.status();
    r->bias = b.value();
  }
  if (t == QuantType::BF16) {
    std::vector<uint16_t> wb(n);
    for (size_t i = 0; i < n; ++i) wb[i] = bf16_from_f32(site.w[i]);
    Result<TensorId> w = declare_weight(p, site.weight + ".bf16", site.role,
                                        TensorType{DType::BF16, site.shape}, wb.data());
    if (!w) return w.status();
    r->tensors = {w.value()};
    return Status::ok();
  }
  const WeightsI8 q = site.conv() ? quantize_weights_i8_output_major(site.w, site.k, site.o)
                                   : quantize_weights_i8(site.w, site.k, site.o);
  Result<TensorId> w = declare_weight(p, site.weight + ".i8", site.role, TensorType{DType::I8, site.shape},
                                      q.w.data());
  if (!w) return w.status();
  Result<TensorId> s = declare_weight(p, site.weight + ".scale", site.role, TensorType{DType::F32, Shape{site.o}},
                                      q.scale.data());
  if (!s) return s.status();
  r->tensors = {w.value(), s.value()};
  return Status::ok();
}

std::string strip_sigil(const std::string& s) { return !s.empty() && (s[0] == '%' || s[0] == '@') ? s.substr(1) : s; }

// The derive-section instructions of `site`'s reduced form, the layouts its product reads,
// computed once: LINEAR_BF16 reads @W.bf16 as it is; CONV2D_BF16 its transpose
// (CONV_WEIGHTS_BF16 -> %W.t); int8 the packed weight and its column sums
// (LINEAR_WEIGHTS_I8 / CONV_WEIGHTS_I8 @W.i8 -> %W.packed, %W.colsum).
Status append_reduced_derive(QuantType t, const LayerSite& site, Program* p, ReducedLayer* r) {
  if (t == QuantType::BF16 && !site.conv()) return Status::ok();
  const Opcode op = t == QuantType::BF16 ? Opcode::CONV_WEIGHTS_BF16
                    : site.conv()        ? Opcode::CONV_WEIGHTS_I8
                                         : Opcode::LINEAR_WEIGHTS_I8;
  Instruction pack = make_instruction(op, {r->tensors[0]}, {});
  const std::vector<const char*> outs = t == QuantType::BF16 ? std::vector<const char*>{".t"}
                                                             : std::vector<const char*>{".packed", ".colsum"};
  for (const char* what : outs) {
    TensorDesc d;
    d.name = strip_sigil(site.weight) + what;
    Result<TensorId> id = p->declare(std::move(d), false);
    if (!id) return id.status();
    pack.out.push_back(id.value());
    r->tensors.push_back(id.value());
  }
  pack.section = Section::DERIVE;
  return p->append(std::move(pack));
}

// The instruction of `site`'s reduced form reading `x` and `b` (NO_TENSOR: a conv without bias)
// and writing `y` (declared in `p`, not defined yet), with the layer's immediates: LINEAR_BF16
// x, @W.bf16, b; CONV2D_BF16 x, %W.t[, b]; LINEAR_I8 / CONV2D_I8 x, %W.packed, %W.colsum,
// @W.scale[, b] (x quantized per row, or per image).
Status append_reduced_layer(QuantType t, const LayerSite& site, const ReducedLayer& r, TensorId x, TensorId b,
                            TensorId y, Program* p) {
  Instruction ins;
  if (t == QuantType::BF16)
    ins = make_instruction(site.conv() ? Opcode::CONV2D_BF16 : Opcode::LINEAR_BF16,
                           {x, r.tensors[site.conv() ? 1 : 0]}, {y});
  else
    ins = make_instruction(site.conv() ? Opcode::CONV2D_I8 : Opcode::LINEAR_I8,
                           {x, r.tensors[2], r.tensors[3], r.tensors[1]}, {y});
  if (b == NO_TENSOR) b = r.bias;
  if (b != NO_TENSOR) ins.in.push_back(b);
  copy_imms(*site.ins, &ins);
  ins.loc = site.ins->loc;
  return p->append(std::move(ins));
}

// The calibration batch: the given inputs checked against `in`'s, or the synthetic one.
Status calibration_batch(const Program& in, const QuantizeOptions& o, std::vector<CalibrationInput>* batch,
                         int64_t* rows) {
  const std::vector<TensorId> inputs = in.inputs();
  if (o.calibration.empty()) {
    // splitmix64 and Box-Muller: the same values on every platform and standard library.
    uint64_t state = SYNTHETIC_SEED;
    auto next = [&state] {
      uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      return static_cast<double>((z ^ (z >> 31)) >> 11) * 0x1p-53;
    };
    // SYNTHETIC_ROWS rows where the program can change its batch, else its own batch.
    *rows = SYNTHETIC_ROWS;
    Result<std::unique_ptr<Program>> copy = with_batch(in, SYNTHETIC_ROWS);
    if (copy) {
      for (TensorId id : copy.value()->tensors())
        if (copy.value()->desc(id).sigil() != '@') Context::of(in)->remove(id);
    } else if (Result<int64_t> own = program_batch(in)) {
      *rows = own.value();
    }
    for (TensorId id : inputs) {
      const TensorDesc& d = in.desc(id);
      CalibrationInput c;
      c.name = d.name;
      c.type = d.type;
      if (c.type.shape.rank > 0) c.type.shape[0] = *rows;
      const size_t n = static_cast<size_t>(c.type.shape.numel());
      if (c.type.dtype == DType::I32) c.i32.assign(n, 0);
      else
        for (size_t i = 0; i < n; ++i)
          c.f32.push_back(static_cast<float>(std::sqrt(-2 * std::log(1 - next())) * std::cos(6.283185307179586 * next())));
      batch->push_back(std::move(c));
    }
    return Status::ok();
  }
  std::string names = "none";
  for (size_t i = 0; i < inputs.size(); ++i) names = (i ? names + ", %" : "%") + in.desc(inputs[i]).name;
  *rows = -1;
  std::unordered_set<TensorId> given;
  for (const CalibrationInput& c : o.calibration) {
    const std::string name = strip_sigil(c.name);
    const TensorId id = in.find(name);
    if (id == NO_TENSOR || in.desc(id).role != Role::INPUT)
      return Status::errorf("--calibrate {}: the model has no input named '{}' (its inputs: {})", c.name, name, names);
    if (!given.insert(id).second) return Status::errorf("--calibrate {}: input %{} is given twice", c.name, name);
    const TensorType& want = in.desc(id).type;
    bool same_rows = c.type.dtype == want.dtype && c.type.shape.rank == want.shape.rank && want.shape.rank > 0;
    for (int d = 1; same_rows && d < want.shape.rank; ++d) same_rows = c.type.shape[d] == want.shape[d];
    if (!same_rows) {
      Shape row = want.shape;
      if (row.rank > 0) row[0] = -1;
      return Status::errorf("--calibrate {}: the values are {}, but %{} is {}: give {} rows of {}{} (any number of rows)",
                            c.name, c.type.str(), name, want.str(), dtype_name(want.dtype), want.str(),
                            want.shape.rank > 0 ? "" : " (a rank-0 input cannot be calibrated)");
    }
    const size_t n = static_cast<size_t>(c.type.shape.numel());
    if ((c.type.dtype == DType::F32 ? c.f32.size() : c.i32.size()) != n)
      return Status::errorf("--calibrate {}: {} values for {}", c.name,
                            c.type.dtype == DType::F32 ? c.f32.size() : c.i32.size(), c.type.str());
    if (*rows >= 0 && c.type.shape[0] != *rows)
      return Status::errorf("--calibrate {}: {} rows, but the other calibration inputs have {}", c.name,
                            c.type.shape[0], *rows);
    if (c.type.shape[0] < 1) return Status::errorf("--calibrate {}: no rows", c.name);
    *rows = c.type.shape[0];
    batch->push_back(c);
    batch->back().name = name;
  }
  for (TensorId id : inputs)
    if (!given.count(id))
      return Status::errorf("--calibrate: input %{} is not given (calibrate every input: {})", in.desc(id).name, names);
  return Status::ok();
}

// The f32 values of a probe tensor, copied out of the run.
struct Captured {
  std::vector<float> x, b, y;  // x, the bias (empty where there is none) and y, as run
  Shape x_shape;
};

// Runs `in` on `batch` through a copy that makes every site's x, b and y outputs, and returns
// their values by site. The copy's own tensors leave `in`'s context before returning.
Status run_probe(const Program& in, const std::vector<CalibrationInput>& batch, int64_t rows,
                 const std::vector<LayerSite>& sites, std::vector<Captured>* captured) {
  Context& ctx = *Context::of(in);
  std::vector<TensorId> own;  // the probe's tensors of its own, removed from ctx at the end
  Status s = [&]() -> Status {
    Program probe(ctx);
    std::unordered_map<TensorId, TensorId> to_probe;
    std::unordered_set<TensorId> watched;
    for (const LayerSite& site : sites)
      for (TensorId t : {site.ins->in[0], site.bias(), site.ins->out[0]})
        if (t != NO_TENSOR) watched.insert(t);
    for (TensorId id : in.tensors()) {
      TensorDesc d = in.desc(id);
      if (d.sigil() == '@') {
        NNASM_TRY(probe.adopt(id));
        to_probe[id] = id;
        continue;
      }
      d.id = NO_TENSOR;
      d.is_output = d.is_output || (watched.count(id) && d.role != Role::INPUT);
      const bool up_front = d.declared_up_front();
      Result<TensorId> nid = probe.declare(std::move(d), up_front);
      if (!nid) return nid.status();
      own.push_back(nid.value());
      to_probe[id] = nid.value();
    }
    for (Instruction ins : in.code()) {
      for (TensorId& t : ins.in) t = to_probe.at(t);
      for (TensorId& t : ins.out) t = to_probe.at(t);
      NNASM_TRY(probe.append(std::move(ins)));
    }
    probe.set_training(false);
    NNASM_TRY(probe.finish());
    PrepareOptions po;
    for (TensorId id : in.inputs())
      if (in.desc(id).type.shape.rank > 0 && in.desc(id).type.shape[0] != rows) po.batch = rows;
    auto ex = Executor::prepare(probe, po);
    if (!ex) return ex.status().with_prefix(fmt::format("running the model on {} calibration rows: ", rows));
    Executor& e = *ex.value();
    for (const CalibrationInput& c : batch) {
      const TensorId id = e.program().find(c.name);
      const void* src = c.type.dtype == DType::F32 ? static_cast<const void*>(c.f32.data()) : c.i32.data();
      std::memcpy(e.data(id), src, static_cast<size_t>(c.type.shape.numel()) * 4);
    }
    e.run();
    auto values = [&](TensorId src_id, std::vector<float>* out) {
      const TensorId id = e.program().find(in.desc(src_id).name);
      const float* p = static_cast<const float*>(e.data(id));
      out->assign(p, p + e.program().desc(id).type.shape.numel());
    };
    for (const LayerSite& site : sites) {
      Captured c;
      values(site.ins->in[0], &c.x);
      if (site.bias() != NO_TENSOR) values(site.bias(), &c.b);
      values(site.ins->out[0], &c.y);
      c.x_shape = e.program().desc(e.program().find(in.desc(site.ins->in[0]).name)).type.shape;
      captured->push_back(std::move(c));
    }
    return Status::ok();
  }();
  // The executor (and any rebatched copy's tensors) went with the lambda's scope.
  for (TensorId id : own) ctx.remove(id);
  return s;
}

// ||y_q − y||₂ / ||y||₂ of `site` in form `t` on the captured batch: the layer alone, in a
// context of its own, through the same steps the rewrite takes.
Result<double> layer_error(QuantType t, const LayerSite& site, const Captured& c) {
  Context ctx;
  Program p(ctx);
  TensorDesc xd;
  xd.name = "x";
  xd.type = TensorType{DType::F32, c.x_shape};
  xd.role = Role::INPUT;
  Result<TensorId> x = p.declare(std::move(xd));
  if (!x) return x.status();
  TensorId b = NO_TENSOR;
  if (!c.b.empty()) {
    Result<TensorId> bid = declare_weight(&p, "b", Role::CONST, TensorType{DType::F32, Shape{site.o}}, c.b.data());
    if (!bid) return bid.status();
    b = bid.value();
  }
  TensorDesc yd;
  yd.name = "y";
  yd.is_output = true;
  Result<TensorId> y = p.declare(std::move(yd), false);
  if (!y) return y.status();
  ReducedLayer r;
  NNASM_TRY(declare_reduced_weights(t, site, &p, &r));
  NNASM_TRY(append_reduced_derive(t, site, &p, &r));
  NNASM_TRY(append_reduced_layer(t, site, r, x.value(), b, y.value(), &p));
  NNASM_TRY(p.finish());
  auto ex = Executor::prepare(p);
  if (!ex) return ex.status();
  std::memcpy(ex.value()->data(x.value()), c.x.data(), c.x.size() * sizeof(float));
  ex.value()->run();
  const float* yq = static_cast<const float*>(ex.value()->data(y.value()));
  double num = 0, den = 0;
  for (size_t i = 0; i < c.y.size(); ++i) {
    const double d = static_cast<double>(yq[i]) - c.y[i];
    num += d * d;
    den += static_cast<double>(c.y[i]) * c.y[i];
  }
  if (den == 0) return num == 0 ? 0.0 : INFINITY;
  return std::sqrt(num / den);
}

uint64_t stored_bytes(const Program& p) {
  uint64_t n = 0;
  for (TensorId id : p.tensors()) {
    const TensorDesc& d = p.desc(id);
    if (d.sigil() == '@') n += static_cast<uint64_t>(d.type.shape.numel()) * dtype_size(d.type.dtype);
  }
  return n;
}

}  // namespace

std::string QuantizeReport::str() const {
  std::string s;
  size_t wide = 0;
  for (const QuantizedLayer& l : layers) wide = std::max(wide, l.op.size() + l.output.size() + l.weight.size() + 4);
  for (const QuantizedLayer& l : layers) {
    std::string line = fmt::format("{:<{}} {:<16} -> {:<4}", fmt::format("{} %{} @{}", l.op, l.output, l.weight), wide,
                                   TensorType{DType::F32, l.shape}.str(), l.chosen);
    if (l.error >= 0) line += fmt::format("  error {:.2e}", l.error);
    if (!l.reason.empty()) line += fmt::format("  ({})", l.reason);
    s += line + "\n";
  }
  if (layers.empty()) s += "no layer with a stored f32 weight\n";
  s += fmt::format("weights: {} bytes -> {} bytes; errors measured on {} {}rows, bound {}\n", weight_bytes_before,
                   weight_bytes_after, calibration_rows, synthetic ? "synthetic " : "calibration ", max_error);
  return s;
}

Result<QuantizeReport> quantize_program(const Program& in, const QuantizeOptions& o, Program* out) {
  if (!Context::of(in) || !Context::of(*out))
    return Status::error("quantize_program: both programs must live in a Context (they hold values)");
  if (!out->tensors().empty()) return Status::error("quantize_program: the output program must be empty");
  if (in.has_section(Section::BACKWARD) || in.has_section(Section::UPDATE))
    return Status::errorf("a training program (it has a {} section): quantize the inference model, made by "
                          "`nnasm export --inference MODEL -o INFER.nnm` (or export_inference)",
                          in.has_section(Section::BACKWARD) ? "backward" : "update");
  if (std::isnan(o.max_error)) return Status::error("--max-error: not a number");
  QuantizeReport rep;
  rep.to = o.to;
  rep.max_error = o.max_error < 0 ? default_max_error(o.to) : o.max_error;

  // Which instructions read each stored tensor: a weight read anywhere else stays.
  std::unordered_map<TensorId, int> reads;
  for (const Instruction& ins : in.code())
    for (TensorId t : ins.in) ++reads[t];
  std::vector<LayerSite> sites;
  std::vector<size_t> site_layer;                // sites[i]'s entry in rep.layers
  std::unordered_map<const Instruction*, size_t> site_of;
  Context& src = *Context::of(in);
  for (const Instruction& ins : in.code()) {
    const TensorDesc* w = nullptr;
    for (size_t k = 0; k < ins.in.size() && !w; ++k) {
      const TensorDesc& d = in.desc(ins.in[k]);
      if ((d.role == Role::PARAM || d.role == Role::CONST) && d.type.dtype == DType::F32 && d.type.shape.rank >= 2)
        w = &d;
    }
    if (!w) continue;
    QuantizedLayer l;
    l.op = ins.info().mnemonic;
    l.output = in.desc(ins.out[0]).name;
    l.weight = w->name;
    l.shape = w->type.shape;
    l.chosen = "f32";
    const bool conv = ins.op == Opcode::CONV2D, matmul = ins.op == Opcode::MATMUL;
    const bool linear = ins.op == Opcode::LINEAR || matmul;
    if (!linear && !conv)
      l.reason = fmt::format("{} has no reduced-precision form", l.op);
    else if (ins.in[1] != w->id || ins.section != Section::FORWARD)
      l.reason = fmt::format("its weight is not a stored f32 {}", linear ? "[in,out] matrix" : "[out,in,kh,kw] kernel");
    else if (w->type.shape.rank != (linear ? 2 : 4))
      l.reason = linear ? "its weight is not [in,out]" : "its weight is not [out,in,kh,kw]";
    else if (matmul && (ins.i(NNASM_IMM(MATMUL, transA)) || in.desc(ins.in[0]).type.shape.rank < 2))
      l.reason = "a MATMUL whose left operand is transposed or a vector";
    else if (conv && ins.i(NNASM_IMM(CONV2D, groups)) != 1)
      l.reason = "a grouped or depthwise convolution (the reduced ones take groups=1)";
    else if (reads[w->id] > 1 || w->is_output)
      l.reason = fmt::format("@{} is also read elsewhere", w->name);
    if (l.reason.empty()) {
      site_of[&ins] = sites.size();
      site_layer.push_back(rep.layers.size());
      const Shape& ws = w->type.shape;
      const bool trans = matmul && ins.i(NNASM_IMM(MATMUL, transB));
      const int64_t k = conv ? ws[1] * ws[2] * ws[3] : ws[trans ? 1 : 0], o = ws[conv || trans ? 0 : 1];
      sites.push_back(LayerSite{&ins, w->name, w->role, conv ? ws : Shape{k, o}, k, o, nullptr, {}});
    }
    rep.layers.push_back(std::move(l));
  }
  for (const std::string& k : o.keep) {
    const std::string name = strip_sigil(k);
    bool found = false;
    for (QuantizedLayer& l : rep.layers) {
      if (l.output != name && l.weight != name) continue;
      found = true;
      if (l.reason.empty()) l.reason = "kept by --keep";
    }
    if (!found) {
      std::string names;
      for (const QuantizedLayer& l : rep.layers) names += (names.empty() ? "@" : ", @") + l.weight;
      return Status::errorf("--keep {}: no layer has a weight or output named '{}' (the layers' weights: {})", k, name,
                            names.empty() ? "none" : names);
    }
  }

  std::vector<CalibrationInput> batch;
  NNASM_TRY(calibration_batch(in, o, &batch, &rep.calibration_rows));
  rep.synthetic = o.calibration.empty();
  std::vector<Captured> captured;
  if (!sites.empty()) NNASM_TRY(run_probe(in, batch, rep.calibration_rows, sites, &captured));

  // The weights' values exist now (the probe's prepare initialized any that had none).
  std::vector<char> rewrite(sites.size(), 0);
  for (size_t i = 0; i < sites.size(); ++i) {
    LayerSite& site = sites[i];
    QuantizedLayer& l = rep.layers[site_layer[i]];
    site.w = src.at(site.ins->in[1]).f32();
    if (site.matmul() && site.ins->i(NNASM_IMM(MATMUL, transB))) {
      site.kxo.resize(static_cast<size_t>(site.k * site.o));
      for (int64_t r = 0; r < site.o; ++r)
        for (int64_t c = 0; c < site.k; ++c) site.kxo[c * site.o + r] = site.w[r * site.k + c];
      site.w = site.kxo.data();
    }
    if (!l.reason.empty()) continue;
    Result<double> e = layer_error(o.to, site, captured[i]);
    if (!e) return e.status().with_prefix(fmt::format("{} %{}: ", l.op, l.output));
    l.error = e.value();
    if (!(l.error <= rep.max_error)) {
      l.reason = fmt::format("above the bound {}", rep.max_error);
      continue;
    }
    l.chosen = quant_type_name(o.to);
    rewrite[i] = 1;
  }

  // Re-record: each replaced weight's place taken by its reduced form, the derive section then
  // the reduced layers' derived tensors, the forward section with the layers rewritten.
  std::unordered_map<TensorId, size_t> dropped;  // f32 weight -> its site
  for (size_t i = 0; i < sites.size(); ++i)
    if (rewrite[i]) dropped[sites[i].ins->in[1]] = i;
  std::vector<ReducedLayer> reduced(sites.size());
  std::unordered_map<TensorId, TensorId> to_new;
  for (TensorId id : in.tensors()) {
    if (auto it = dropped.find(id); it != dropped.end()) {
      NNASM_TRY(declare_reduced_weights(o.to, sites[it->second], out, &reduced[it->second]));
      continue;
    }
    TensorDesc d = in.desc(id);
    d.id = NO_TENSOR;
    const bool up_front = d.declared_up_front();
    Result<TensorId> nid = out->declare(std::move(d), up_front);
    if (!nid) return nid.status();
    to_new[id] = nid.value();
    const Tensor& t = src.at(id);
    if (in.desc(id).sigil() == '@' && !t.data.empty())
      NNASM_TRY(set_values(out, nid.value(), t.data.data(), static_cast<size_t>(t.numel()) * dtype_size(t.desc.type.dtype)));
  }
  auto copy = [&](const Instruction& ins) {
    Instruction c = ins;
    for (TensorId& t : c.in) t = to_new.at(t);
    for (TensorId& t : c.out) t = to_new.at(t);
    return out->append(std::move(c));
  };
  const auto [derive_begin, derive_end] = in.section_range(Section::DERIVE);
  for (size_t i = derive_begin; i < derive_end; ++i) NNASM_TRY(copy(in.code()[i]));
  for (size_t i = 0; i < sites.size(); ++i)
    if (rewrite[i]) NNASM_TRY(append_reduced_derive(o.to, sites[i], out, &reduced[i]));
  for (size_t i = derive_end; i < in.code().size(); ++i) {
    const Instruction& ins = in.code()[i];
    auto it = site_of.find(&ins);
    if (it != site_of.end() && rewrite[it->second])
      NNASM_TRY(append_reduced_layer(o.to, sites[it->second], reduced[it->second], to_new.at(ins.in[0]),
                                     ins.in.size() > 2 ? to_new.at(ins.in[2]) : NO_TENSOR, to_new.at(ins.out[0]), out));
    else
      NNASM_TRY(copy(ins));
  }
  Context::of(*out)->set_seed(src.seed());
  out->set_training(in.training());
  NNASM_TRY(out->finish());
  rep.weight_bytes_before = stored_bytes(in);
  rep.weight_bytes_after = stored_bytes(*out);
  return rep;
}

}  // namespace nnasm
