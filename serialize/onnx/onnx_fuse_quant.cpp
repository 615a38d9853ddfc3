// ONNX Runtime's dynamic quantization of a MatMul (onnxruntime.quantization.quantize_dynamic)
// recognised as one LINEAR_I8. quantize_dynamic writes, per MatMul with a constant weight:
//   xq, xs, xz = DynamicQuantizeLinear(x)           (may be shared by several MatMuls)
//   acc = MatMulInteger(xq, Bq, xz, Bz)             Bq i8 or u8 [K, O] constant, Bz constant
//   m   = Mul(xs, Bs)                               Bs constant f32, [] / [1] or [O]
//   y   = Mul(Cast(acc, to=FLOAT), m)
//   [y  = Add(y, bias)]                             bias constant f32 [O]: the MatMul's own Add
// LINEAR_I8 with x_scale=tensor computes exactly DynamicQuantizeLinear's scale, zero point and
// u8 values and the same i32 product (ops/quant/linear_i8.cpp), so the chain becomes
//   LINEAR_WEIGHTS_I8 w -> wp, colsum   (w = Bq − Bz as i8; the derive pass hoists it)
//   LINEAR_I8 x, wp, colsum, Bs, bias   (zeros without the Add)
// and the integer product no longer goes through f32 (MatMulInteger's 2^24 bound does not apply).
// The f32 epilogue: ONNX rounds f32(acc)·(xs·Bs) and then adds the bias; LINEAR_I8 takes one fma.
// Without a bias the two are bitwise equal; with one they can differ by one rounding of the sum.
//
// Matched only where nothing else can tell: every intermediate value (acc, its Cast, m, the Mul's
// result when the Add is taken in) read by the next node of the chain alone and not a graph
// output; nodes of the default domain without attributes other than Cast's `to`; w − Bz exactly
// an i8 for every element (a u8 weight with zero point 128 is one); K ≤ 65536 (LINEAR_I8's exact
// i32 range); x f32 of rank ≥ 2 computed at run time. Anything else is imported node by node.
// DynamicQuantizeLinear itself is left out only when every reader of its outputs is a matched
// chain; otherwise it is imported as well, for those other readers.
#include <algorithm>
#include <set>

#include "isa/opcode.h"
#include "serialize/onnx/onnx_ops.h"

namespace nnasm {

namespace {

constexpr int64_t MAX_K = 65536;  // LINEAR_I8's bound for exact i32 sums

Status map_dynamic_quant_linear(NodeLowering& n);

bool default_domain(const OnnxNode& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

bool is(const OnnxNode& n, const char* type) { return default_domain(n) && n.op_type == type; }

// The value of `name` when known at import time (with values), else null.
const HostTensor* host_of(OnnxLowering& l, const std::string& name) {
  if (name.empty()) return nullptr;
  auto it = l.values().find(name);
  if (it == l.values().end() || it->second.kind != OnnxValue::Kind::HOST || !it->second.host.has_values) return nullptr;
  return &it->second.host;
}

// The only reader of `name` (a node, not a graph output), or -1.
int64_t only_reader(const OnnxReaders& r, const std::string& name) {
  auto it = r.readers.find(name);
  if (it == r.readers.end() || it->second.size() != 1 || r.graph_outputs.count(name)) return -1;
  return static_cast<int64_t>(it->second[0].first);
}

}  // namespace

bool dynamic_quant_weight(const HostTensor& b, const HostTensor* zp, std::vector<int64_t>* w) {
  if ((b.type != OnnxType::INT8 && b.type != OnnxType::UINT8) || b.dims.size() != 2) return false;
  const int64_t o = b.dims[1];
  if (zp && (zp->type != b.type || zp->dims.size() > 1 || (zp->numel() != 1 && zp->numel() != o))) return false;
  w->resize(static_cast<size_t>(b.numel()));
  for (int64_t e = 0; e < b.numel(); ++e) {
    const int64_t z = zp ? zp->i[zp->numel() == 1 ? 0 : e % o] : 0;
    const int64_t v = b.i[e] - z;
    if (v < -128 || v > 127) return false;
    (*w)[e] = v;
  }
  return true;
}

OnnxReaders onnx_readers(const OnnxGraph& g) {
  OnnxReaders r;
  for (size_t j = 0; j < g.nodes.size(); ++j) {
    for (size_t k = 0; k < g.nodes[j].inputs.size(); ++k)
      if (!g.nodes[j].inputs[k].empty()) r.readers[g.nodes[j].inputs[k]].emplace_back(j, static_cast<int>(k));
    for (const std::string& o : g.nodes[j].outputs)
      if (!o.empty()) r.producer[o] = j;
  }
  for (const OnnxValueInfo& v : g.outputs) r.graph_outputs.insert(v.name);
  return r;
}

void match_dynamic_quant_linear(const OnnxGraph& g, size_t dql, const OnnxReaders& r, OnnxLowering& l,
                                std::vector<OnnxFusion>* out, bool* dql_covered) {
  *dql_covered = false;
  const OnnxNode& d = g.nodes[dql];
  if (!is(d, "DynamicQuantizeLinear") || d.inputs.size() != 1 || d.outputs.size() != 3 || !d.attrs.empty()) return;
  const std::string &x = d.inputs[0], &xq = d.outputs[0], &xs = d.outputs[1], &xz = d.outputs[2];
  if (xq.empty() || xs.empty() || xz.empty()) return;
  auto xv = l.values().find(x);
  if (xv == l.values().end() || xv->second.kind != OnnxValue::Kind::TENSOR || xv->second.type != OnnxType::FLOAT) return;
  const TensorType xt = l.program().desc(xv->second.id).type;
  if (xt.dtype != DType::F32 || xt.shape.rank < 2) return;
  const int64_t k_len = xt.shape[xt.shape.rank - 1];
  if (k_len > MAX_K) return;

  // Readers of DynamicQuantizeLinear's outputs that matched chains account for.
  std::set<std::pair<size_t, int>> accounted;
  auto it = r.readers.find(xq);
  if (it == r.readers.end()) return;
  for (const auto& [j, pos] : it->second) {
    const OnnxNode& mmi = g.nodes[j];
    if (!is(mmi, "MatMulInteger") || pos != 0 || mmi.inputs.size() < 3 || mmi.inputs[2] != xz || !mmi.attrs.empty() ||
        mmi.outputs.size() != 1)
      continue;
    // The weight: constant, exactly an i8 once its zero point is taken off.
    const HostTensor* b = host_of(l, mmi.inputs[1]);
    const bool has_bz = mmi.inputs.size() > 3 && !mmi.inputs[3].empty();
    const HostTensor* bz = has_bz ? host_of(l, mmi.inputs[3]) : nullptr;
    std::vector<int64_t> w;
    if (!b || (has_bz && !bz) || !dynamic_quant_weight(*b, bz, &w) || b->dims[0] != k_len) continue;
    const int64_t o = b->dims[1];
    // Cast(acc, to=FLOAT), read by the output Mul alone.
    const int64_t c = only_reader(r, mmi.outputs[0]);
    if (c < 0) continue;
    const OnnxNode& cast = g.nodes[static_cast<size_t>(c)];
    if (!is(cast, "Cast") || cast.attrs.size() != 1 || cast.attrs[0].name != "to" ||
        cast.attrs[0].type != OnnxAttrType::INT || cast.attrs[0].i != static_cast<int64_t>(OnnxType::FLOAT) ||
        cast.outputs.size() != 1)
      continue;
    const int64_t mo = only_reader(r, cast.outputs[0]);
    if (mo < 0) continue;
    const OnnxNode& mul = g.nodes[static_cast<size_t>(mo)];
    if (!is(mul, "Mul") || mul.inputs.size() != 2 || !mul.attrs.empty() || mul.outputs.size() != 1) continue;
    const std::string& m = mul.inputs[0] == cast.outputs[0] ? mul.inputs[1] : mul.inputs[0];
    // m = Mul(xs, Bs), read by the output Mul alone.
    auto pm = r.producer.find(m);
    if (pm == r.producer.end() || only_reader(r, m) != mo) continue;
    const OnnxNode& sm = g.nodes[pm->second];
    if (!is(sm, "Mul") || sm.inputs.size() != 2 || !sm.attrs.empty() || sm.outputs.size() != 1 || (sm.inputs[0] != xs && sm.inputs[1] != xs))
      continue;
    const std::string& bs_name = sm.inputs[0] == xs ? sm.inputs[1] : sm.inputs[0];
    const HostTensor* bs = host_of(l, bs_name);
    if (!bs || !bs->is_float() || bs->dims.size() > 1 || (bs->numel() != 1 && bs->numel() != o)) continue;
    // The bias: an Add of a constant f32 [O], the output Mul's only reader.
    size_t last = static_cast<size_t>(mo);
    std::string bias;
    const int64_t a = only_reader(r, mul.outputs[0]);
    if (a >= 0) {
      const OnnxNode& add = g.nodes[static_cast<size_t>(a)];
      if (is(add, "Add") && add.inputs.size() == 2 && add.attrs.empty() && add.outputs.size() == 1) {
        const std::string& other = add.inputs[0] == mul.outputs[0] ? add.inputs[1] : add.inputs[0];
        const HostTensor* bh = host_of(l, other);
        if (bh && bh->is_float() && bh->dims == std::vector<int64_t>{o}) {
          bias = other;
          last = static_cast<size_t>(a);
        }
      }
    }
    OnnxFusion f;
    f.map = map_dynamic_quant_linear;
    f.at = last;
    f.covered = {j, static_cast<size_t>(c), pm->second, static_cast<size_t>(mo)};
    if (!bias.empty()) f.covered.push_back(static_cast<size_t>(a));
    f.covered.erase(std::remove(f.covered.begin(), f.covered.end(), last), f.covered.end());
    f.node.name = g.nodes[last].name;
    f.node.op_type = "MatMulInteger";  // labels name the node lowered: the chain's last
    f.node.inputs = {x, mmi.inputs[1], has_bz ? mmi.inputs[3] : "", bs_name, bias};
    f.node.outputs = {g.nodes[last].outputs[0]};
    out->push_back(std::move(f));
    accounted.insert({j, 0});
    accounted.insert({j, 2});
    accounted.insert({pm->second, sm.inputs[0] == xs ? 0 : 1});
  }
  // DynamicQuantizeLinear may go only when the chains read all of its outputs.
  for (const std::string* v : {&xq, &xs, &xz}) {
    if (r.graph_outputs.count(*v)) return;
    auto rd = r.readers.find(*v);
    if (rd == r.readers.end()) continue;
    for (const auto& reader : rd->second)
      if (!accounted.count(reader)) return;
  }
  *dql_covered = !out->empty();
}

namespace {

// Inputs x, B, B_zero_point (optional), B_scale, bias (optional), as match_dynamic_quant_linear
// checked them.
Status map_dynamic_quant_linear(NodeLowering& n) {
  const HostTensor *b, *bz = nullptr, *bs;
  NNASM_TRY(n.host(1, "B", &b));
  if (n.has(2)) NNASM_TRY(n.host(2, "B_zero_point", &bz));
  NNASM_TRY(n.host(3, "B_scale", &bs));
  HostTensor w;
  w.type = OnnxType::INT8;
  w.dims = b->dims;
  if (!dynamic_quant_weight(*b, bz, &w.i)) return Status::error("B less its zero point is not an i8 tensor");
  const int64_t o = b->dims[1];
  HostTensor s;
  s.dims = {bs->numel()};
  s.f = bs->f;
  TensorId x, wq, scale, bias, y;
  std::vector<TensorId> packed;
  NNASM_TRY(n.tensor(0, &x));
  NNASM_TRY(n.typed_constant(w, DType::I8, &wq));
  NNASM_TRY(n.constant(s, &scale));
  if (n.has(4)) NNASM_TRY(n.tensor(4, &bias));
  else NNASM_TRY(n.filled({o}, 0, &bias));
  NNASM_TRY(n.emit(Opcode::LINEAR_WEIGHTS_I8, {wq}, {}, &packed));
  NNASM_TRY(n.emit(Opcode::LINEAR_I8, {x, packed[0], packed[1], scale, bias},
                   {{"x_scale", imm_i(NNASM_CHOICE(LINEAR_I8, x_scale, tensor))}}, &y));
  n.set(0, y, OnnxType::FLOAT);
  return Status::ok();
}

}  // namespace

}  // namespace nnasm
