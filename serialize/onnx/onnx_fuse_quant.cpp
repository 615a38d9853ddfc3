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
//
// ONNX Runtime's static quantization in the QDQ format (quantize_static, QuantFormat.QDQ) writes,
// per MatMul (or Gemm) with a constant weight:
//   xq = QuantizeLinear(x, sx, zx)                  sx f32, zx u8 (or absent: 0), per tensor, constant
//   xd = DequantizeLinear(xq, sx, zx)               the same values
//   wd = DequantizeLinear(W, sw, zw)                W i8 (or u8) constant [K, O] (Gemm transB: [O, K]);
//                                                   sw per tensor or per output (axis 1, transB 0)
//   y  = MatMul(xd, wd)  or  Gemm(xd, wd, C)        Gemm: alpha = beta = 1, transA = 0; C constant
//                                                   f32, or DequantizeLinear(C i32, scale, 0) of
//                                                   constants (ONNX Runtime quantizes the bias so)
//   [y = Add(y, bias)]                              bias constant f32 [O] (MatMul only)
// LINEAR_I8 with x_scale=given quantizes x exactly as QuantizeLinear (true division, halves to
// even, saturation) and sums Σ (q − zx)·(W − zw) exactly in i32, so the chain becomes
//   LINEAR_WEIGHTS_I8 w -> wp, colsum   (w = W − zw as i8 [K, O])
//   LINEAR_I8 x, wp, colsum, sw, bias, sx, zx  x_scale=given
// ONNX evaluates the chain in f32: each (q − zx)·sx and (W − zw)·sw rounded, each product rounded
// and the sum in some order; LINEAR_I8 rounds once, fma(f32(Σ), sx·sw, b). The two differ by the
// f32 summation's rounding only (relative to Σ |products|, a few K·2^-24); both are the same
// quantized model. A NaN x differs: QuantizeLinear saturates it, LINEAR_I8 gives NaN outputs.
// Matched under the dynamic chains' conditions (each intermediate read by the next node alone,
// not a graph output; constants; K ≤ 65536; every scale finite and not zero, else the
// node-by-node mappings report it), x f32 computed at run time. The QuantizeLinear and
// DequantizeLinear of x are left out only when every reader of theirs is a matched chain. The
// weight's DequantizeLinear is left out when it comes after the QuantizeLinear in the graph's
// order; one before it has been imported already (a DEQUANTIZE of a constant that nothing
// reads: the dce pass removes it).
//
// Conv the same way: Conv(xd, DequantizeLinear(W i8 [O, C, kh, kw], sw per tensor or per output
// channel (axis 0)), B as Gemm's C or none) with x [N, C, H, W], group 1, pads symmetric (or
// auto_pad VALID), C·kh·kw ≤ 65536 becomes CONV_WEIGHTS_I8 + CONV2D_I8 x_scale=given (the
// padding quantizes x = 0, to zx, as DequantizeLinear's zero reads back as 0).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "isa/opcode.h"
#include "serialize/onnx/onnx_ops.h"

namespace nnasm {

namespace {

constexpr int64_t MAX_K = 65536;  // LINEAR_I8's bound for exact i32 sums

Status map_dynamic_quant_linear(NodeLowering& n);
Status map_static_quant_linear(NodeLowering& n);
Status map_static_quant_conv(NodeLowering& n);
bool match_static_quant_conv(const OnnxGraph& g, size_t ql, size_t j, int pos, const OnnxReaders& r, OnnxLowering& l,
                             const TensorType& xt, OnnxFusion* f);

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

namespace {

// The integer attribute `name` of `n` (`v` keeps its default when absent); false when it has
// another type.
bool int_attr(const OnnxNode& n, const char* name, int64_t* v) {
  for (const OnnxAttr& a : n.attrs)
    if (a.name == name) {
      if (a.type != OnnxAttrType::INT) return false;
      *v = a.i;
    }
  return true;
}

// The Add that is the only reader of `y` and adds a constant f32 [o] to it (its index; that
// constant's name into `bias`), or -1.
int64_t bias_add(const OnnxGraph& g, const OnnxReaders& r, OnnxLowering& l, const std::string& y, int64_t o,
                 std::string* bias) {
  const int64_t a = only_reader(r, y);
  if (a < 0) return -1;
  const OnnxNode& add = g.nodes[static_cast<size_t>(a)];
  if (!is(add, "Add") || add.inputs.size() != 2 || !add.attrs.empty() || add.outputs.size() != 1) return -1;
  const std::string& other = add.inputs[0] == y ? add.inputs[1] : add.inputs[0];
  const HostTensor* bh = host_of(l, other);
  if (!bh || !bh->is_float() || bh->dims != std::vector<int64_t>{o}) return -1;
  *bias = other;
  return a;
}

// The INTS attribute `name` of `n` (`v` kept when absent); false when it has another type.
bool ints_attr(const OnnxNode& n, const char* name, std::vector<int64_t>* v) {
  for (const OnnxAttr& a : n.attrs)
    if (a.name == name) {
      if (a.type != OnnxAttrType::INTS) return false;
      *v = a.ints;
    }
  return true;
}

// Whether every attribute of `n` is one of `names`.
bool attrs_within(const OnnxNode& n, std::initializer_list<const char*> names) {
  for (const OnnxAttr& a : n.attrs)
    if (std::none_of(names.begin(), names.end(), [&](const char* m) { return a.name == m; })) return false;
  return true;
}

// Whether every value of the scale `s` is finite and not zero (the node-by-node mappings refuse
// others, naming the node: a chain holding one is left to them).
bool usable_scale(const HostTensor& s) {
  return std::all_of(s.f.begin(), s.f.end(), [](float v) { return std::isfinite(v) && v != 0; });
}

// A per-tensor activation quantization: scale f32 of one element, zero point u8 of one element
// (null: 0); its scale and zero point into sx and zp.
bool activation_qparams(const HostTensor* scale, const HostTensor* zp, bool has_zp, float* sx, int64_t* z) {
  if (!scale || !scale->is_float() || scale->dims.size() > 1 || scale->numel() != 1 || !usable_scale(*scale)) return false;
  if (has_zp && (!zp || zp->type != OnnxType::UINT8 || zp->dims.size() > 1 || zp->numel() != 1)) return false;
  *sx = scale->f[0];
  *z = has_zp ? zp->i[0] : 0;
  return true;
}

}  // namespace

bool static_quant_weight(const HostTensor& b, const HostTensor* zp, bool trans, std::vector<int64_t>* w) {
  if ((b.type != OnnxType::INT8 && b.type != OnnxType::UINT8) || b.dims.size() != 2) return false;
  if (!trans) return dynamic_quant_weight(b, zp, w);
  // [O, K] with a zero point per output (axis 0): as [K, O], the zero point per column.
  const int64_t o = b.dims[0], k = b.dims[1];
  HostTensor t;
  t.type = b.type;
  t.dims = {k, o};
  t.i.resize(static_cast<size_t>(b.numel()));
  for (int64_t r = 0; r < o; ++r)
    for (int64_t c = 0; c < k; ++c) t.i[static_cast<size_t>(c * o + r)] = b.i[static_cast<size_t>(r * k + c)];
  return dynamic_quant_weight(t, zp, w);
}

namespace {

// The scale of a weight's DequantizeLinear `d` reading W (rank 2, or a Conv's 4) whose outputs run along
// `out_axis`: per tensor, or per output (rank 1, the node's axis the output axis), and its zero
// point of the same shape and W's type (or absent).
bool weight_qparams(const OnnxNode& d, const HostTensor& w, int out_axis, const HostTensor* sw,
                    const HostTensor* zw, bool has_zw) {
  if (!attrs_within(d, {"axis", "block_size"})) return false;
  int64_t axis = 1, block = 0;
  if (!int_attr(d, "axis", &axis) || !int_attr(d, "block_size", &block) || block != 0) return false;
  if (axis < 0) axis += static_cast<int64_t>(w.dims.size());
  if (!sw || !sw->is_float() || sw->dims.size() > 1 || !usable_scale(*sw)) return false;
  const int64_t o = w.dims[static_cast<size_t>(out_axis)];
  if (sw->numel() != 1 && (sw->numel() != o || sw->dims.size() != 1 || axis != out_axis)) return false;
  if (has_zw && (!zw || zw->type != w.type || zw->dims != sw->dims)) return false;
  return true;
}

// A Gemm's C or a Conv's B, read by node `reader`: a constant f32 of o elements ([o], or [1, o]),
// or what ONNX Runtime's QDQ format writes, DequantizeLinear(b i32 [o] constant, scale f32 [] or
// [o] constant, zero point 0 or none) read by `reader` alone. The names go to the fused node's
// inputs 4 (f32) or 7 and 8 (i32 and scale); that DequantizeLinear's index into `dq`.
struct ConstBias {
  std::string f32, q, scale;
  int64_t dq = -1;
};
bool const_bias(const OnnxGraph& g, const OnnxReaders& r, OnnxLowering& l, const std::string& name, size_t reader,
                int64_t o, ConstBias* b) {
  if (const HostTensor* c = host_of(l, name)) {
    if (!c->is_float() || c->numel() != o || c->dims.empty() || c->dims.back() != o || c->dims.size() > 2) return false;
    b->f32 = name;
    return true;
  }
  auto p = r.producer.find(name);
  if (p == r.producer.end() || only_reader(r, name) != static_cast<int64_t>(reader)) return false;
  const OnnxNode& d = g.nodes[p->second];
  if (!is(d, "DequantizeLinear") || d.inputs.size() < 2 || d.outputs.size() != 1 || !attrs_within(d, {"axis"}))
    return false;
  const HostTensor* q = host_of(l, d.inputs[0]);
  const HostTensor* s = host_of(l, d.inputs[1]);
  if (!q || q->type != OnnxType::INT32 || q->dims != std::vector<int64_t>{o} || !s || !s->is_float() ||
      s->dims.size() > 1 || (s->numel() != 1 && s->numel() != o) || !usable_scale(*s))
    return false;
  if (d.inputs.size() > 2 && !d.inputs[2].empty()) {
    const HostTensor* z = host_of(l, d.inputs[2]);
    if (!z || z->type != OnnxType::INT32 || std::any_of(z->i.begin(), z->i.end(), [](int64_t v) { return v != 0; }))
      return false;
  }
  b->q = d.inputs[0];
  b->scale = d.inputs[1];
  b->dq = static_cast<int64_t>(p->second);
  return true;
}

// Conv `c`'s 2-D geometry for CONV2D_I8: kernel_shape (if given) W's, group 1, strides and
// dilations of 2 entries ≥ 1, pads symmetric ≥ 0 (auto_pad NOTSET) or none (VALID).
bool conv_geometry(const OnnxNode& c, const std::vector<int64_t>& kernel, std::vector<int64_t>* stride,
                   std::vector<int64_t>* pad, std::vector<int64_t>* dilation) {
  if (!attrs_within(c, {"kernel_shape", "strides", "dilations", "group", "pads", "auto_pad"})) return false;
  std::vector<int64_t> ks = kernel, pads(4, 0);
  int64_t group = 1;
  *stride = {1, 1};
  *dilation = {1, 1};
  if (!ints_attr(c, "kernel_shape", &ks) || !ints_attr(c, "strides", stride) || !ints_attr(c, "dilations", dilation) ||
      !ints_attr(c, "pads", &pads) || !int_attr(c, "group", &group))
    return false;
  for (const OnnxAttr& a : c.attrs)
    if (a.name == "auto_pad" && (a.type != OnnxAttrType::STRING || (a.s != "NOTSET" && a.s != "VALID"))) return false;
  if (ks != kernel || group != 1 || stride->size() != 2 || dilation->size() != 2 || pads.size() != 4) return false;
  for (int64_t v : *stride)
    if (v < 1) return false;
  for (int64_t v : *dilation)
    if (v < 1) return false;
  for (int64_t v : pads)
    if (v < 0) return false;
  if (pads[0] != pads[2] || pads[1] != pads[3]) return false;
  *pad = {pads[0], pads[1]};
  for (const OnnxAttr& a : c.attrs)
    if (a.name == "auto_pad" && a.s == "VALID") *pad = {0, 0};
  return true;
}

OnnxAttr ints_of(const char* name, const std::vector<int64_t>& v) {
  OnnxAttr a;
  a.name = name;
  a.type = OnnxAttrType::INTS;
  a.ints = v;
  return a;
}

}  // namespace

void match_static_quant_linear(const OnnxGraph& g, size_t ql, const OnnxReaders& r, OnnxLowering& l,
                               std::vector<OnnxFusion>* out, std::set<size_t>* covered) {
  const OnnxNode& q = g.nodes[ql];
  if (!is(q, "QuantizeLinear") || q.inputs.size() < 2 || q.outputs.size() != 1 || !attrs_within(q, {"axis", "saturate"}))
    return;
  const std::string& x = q.inputs[0];
  const std::string& xq = q.outputs[0];
  const bool has_zx = q.inputs.size() > 2 && !q.inputs[2].empty();
  float sx = 0;
  int64_t zx = 0;
  if (!activation_qparams(host_of(l, q.inputs[1]), has_zx ? host_of(l, q.inputs[2]) : nullptr, has_zx, &sx, &zx))
    return;
  auto xv = l.values().find(x);
  if (xv == l.values().end() || xv->second.kind != OnnxValue::Kind::TENSOR || xv->second.type != OnnxType::FLOAT) return;
  const TensorType xt = l.program().desc(xv->second.id).type;
  if (xt.dtype != DType::F32 || xt.shape.rank < 1) return;
  const int64_t k_len = xt.shape[xt.shape.rank - 1];
  if (k_len > MAX_K || xq.empty() || r.graph_outputs.count(xq)) return;
  auto qr = r.readers.find(xq);
  if (qr == r.readers.end()) return;
  bool all_dq = true;  // every reader of xq a DequantizeLinear left out
  const size_t before = out->size();
  for (const auto& [dqi, dq_pos] : qr->second) {
    const OnnxNode& dq = g.nodes[dqi];
    const bool dq_zx = dq.inputs.size() > 2 && !dq.inputs[2].empty();
    float dsx = 0;
    int64_t dzx = 0;
    if (!is(dq, "DequantizeLinear") || dq_pos != 0 || dq.outputs.size() != 1 || dq.outputs[0].empty() ||
        !attrs_within(dq, {"axis"}) || dq.inputs.size() < 2 ||
        !activation_qparams(host_of(l, dq.inputs[1]), dq_zx ? host_of(l, dq.inputs[2]) : nullptr, dq_zx, &dsx,
                            &dzx) ||
        std::memcmp(&dsx, &sx, sizeof sx) != 0 || dzx != zx) {
      all_dq = false;
      continue;
    }
    const std::string& xd = dq.outputs[0];
    auto dr = r.readers.find(xd);
    bool all_mm = !r.graph_outputs.count(xd) && dr != r.readers.end();
    if (dr == r.readers.end()) {
      all_dq = false;
      continue;
    }
    for (const auto& [j, pos] : dr->second) {
      const OnnxNode& mm = g.nodes[j];
      if (is(mm, "Conv")) {
        OnnxFusion f;
        if (match_static_quant_conv(g, ql, j, pos, r, l, xt, &f)) {
          f.node.inputs[0] = x;
          f.node.inputs[5] = q.inputs[1];
          f.node.inputs[6] = has_zx ? q.inputs[2] : "";
          out->push_back(std::move(f));
        } else {
          all_mm = false;
        }
        continue;
      }
      const bool gemm = is(mm, "Gemm");
      int64_t trans_a = 0, trans_b = 0;
      float alpha = 1, beta = 1;
      for (const OnnxAttr& a : mm.attrs)
        if (a.name == "alpha" && a.type == OnnxAttrType::FLOAT) alpha = a.f;
        else if (a.name == "beta" && a.type == OnnxAttrType::FLOAT) beta = a.f;
      bool ok = pos == 0 && mm.outputs.size() == 1 && mm.inputs.size() >= 2 &&
                ((is(mm, "MatMul") && mm.attrs.empty() && mm.inputs.size() == 2) ||
                 (gemm && attrs_within(mm, {"alpha", "beta", "transA", "transB"}) && int_attr(mm, "transA", &trans_a) &&
                  int_attr(mm, "transB", &trans_b) && trans_a == 0 && alpha == 1 && beta == 1 && xt.shape.rank == 2));
      // The weight: DequantizeLinear(W, sw, zw) of constants, read by this node alone.
      auto pw = ok ? r.producer.find(mm.inputs[1]) : r.producer.end();
      ok = ok && pw != r.producer.end() && only_reader(r, mm.inputs[1]) == static_cast<int64_t>(j);
      const OnnxNode* wd = ok ? &g.nodes[pw->second] : nullptr;
      ok = ok && is(*wd, "DequantizeLinear") && wd->inputs.size() >= 2 && wd->outputs.size() == 1;
      const HostTensor* w = ok ? host_of(l, wd->inputs[0]) : nullptr;
      const bool has_zw = ok && wd->inputs.size() > 2 && !wd->inputs[2].empty();
      const HostTensor* zw = has_zw ? host_of(l, wd->inputs[2]) : nullptr;
      std::vector<int64_t> wv;
      ok = ok && w && w->dims.size() == 2 && (w->type == OnnxType::INT8 || w->type == OnnxType::UINT8) &&
           w->dims[trans_b ? 1 : 0] == k_len &&
           weight_qparams(*wd, *w, trans_b ? 0 : 1, host_of(l, wd->inputs[1]), zw, has_zw) &&
           static_quant_weight(*w, zw, trans_b != 0, &wv);
      if (!ok) {
        all_mm = false;
        continue;
      }
      const int64_t o = w->dims[trans_b ? 0 : 1];
      // The bias: Gemm's C, or an Add of a constant f32 [O] reading the MatMul alone.
      ConstBias bias;
      size_t last = j;
      if (gemm && mm.inputs.size() > 2 && !mm.inputs[2].empty()) {
        if (!const_bias(g, r, l, mm.inputs[2], j, o, &bias)) {
          all_mm = false;
          continue;
        }
      } else if (!gemm) {
        const int64_t a = bias_add(g, r, l, mm.outputs[0], o, &bias.f32);
        if (a >= 0) last = static_cast<size_t>(a);
      }
      OnnxFusion f;
      f.map = map_static_quant_linear;
      f.at = last;
      if (last != j) f.covered.push_back(j);
      if (pw->second > ql) f.covered.push_back(pw->second);
      f.node.name = g.nodes[last].name;
      f.node.op_type = "MatMul";
      if (bias.dq > static_cast<int64_t>(ql)) f.covered.push_back(static_cast<size_t>(bias.dq));
      f.node.inputs = {x, wd->inputs[0], has_zw ? wd->inputs[2] : "", wd->inputs[1], bias.f32, q.inputs[1],
                       has_zx ? q.inputs[2] : "", bias.q, bias.scale};
      f.node.outputs = {g.nodes[last].outputs[0]};
      OnnxAttr t;
      t.name = "transB";
      t.type = OnnxAttrType::INT;
      t.i = trans_b;
      f.node.attrs.push_back(t);
      out->push_back(std::move(f));
    }
    if (all_mm) covered->insert(dqi);
    else all_dq = false;
  }
  if (out->size() == before) return;
  if (all_dq) covered->insert(ql);
}

namespace {

// Conv node `j` reading x's DequantizeLinear at input `pos`, x's type `xt`: a CONV2D_I8
// x_scale=given fusion (inputs x, W, zw, sw, bias; the caller adds sx, zx) into `f`, or false.
bool match_static_quant_conv(const OnnxGraph& g, size_t ql, size_t j, int pos, const OnnxReaders& r, OnnxLowering& l,
                             const TensorType& xt, OnnxFusion* f) {
  const OnnxNode& c = g.nodes[j];
  if (pos != 0 || c.outputs.size() != 1 || c.inputs.size() < 2 || c.inputs.size() > 3 || xt.shape.rank != 4) return false;
  auto pw = r.producer.find(c.inputs[1]);
  if (pw == r.producer.end() || only_reader(r, c.inputs[1]) != static_cast<int64_t>(j)) return false;
  const OnnxNode& wd = g.nodes[pw->second];
  if (!is(wd, "DequantizeLinear") || wd.inputs.size() < 2 || wd.outputs.size() != 1) return false;
  const HostTensor* w = host_of(l, wd.inputs[0]);
  const bool has_zw = wd.inputs.size() > 2 && !wd.inputs[2].empty();
  const HostTensor* zw = has_zw ? host_of(l, wd.inputs[2]) : nullptr;
  if (!w || w->dims.size() != 4 || (w->type != OnnxType::INT8 && w->type != OnnxType::UINT8) ||
      w->dims[1] != xt.shape[1] || w->dims[1] * w->dims[2] * w->dims[3] > MAX_K)
    return false;
  if (!weight_qparams(wd, *w, 0, host_of(l, wd.inputs[1]), zw, has_zw)) return false;
  // W less its zero point (one per output channel, axis 0) an i8: as a [O, C·kh·kw] matrix's rows.
  std::vector<int64_t> wv;
  HostTensor flat = *w;
  flat.dims = {w->dims[0], w->dims[1] * w->dims[2] * w->dims[3]};
  if (!static_quant_weight(flat, zw, true, &wv)) return false;
  std::vector<int64_t> stride, pad, dilation;
  if (!conv_geometry(c, {w->dims[2], w->dims[3]}, &stride, &pad, &dilation)) return false;
  const int64_t o = w->dims[0];
  ConstBias bias;
  if (c.inputs.size() == 3 && !c.inputs[2].empty() && !const_bias(g, r, l, c.inputs[2], j, o, &bias)) return false;
  f->map = map_static_quant_conv;
  f->at = j;
  if (pw->second > ql) f->covered.push_back(pw->second);
  if (bias.dq > static_cast<int64_t>(ql)) f->covered.push_back(static_cast<size_t>(bias.dq));
  f->node.name = c.name;
  f->node.op_type = "Conv";
  f->node.inputs = {"", wd.inputs[0], has_zw ? wd.inputs[2] : "", wd.inputs[1], bias.f32, "", "", bias.q, bias.scale};
  f->node.outputs = {c.outputs[0]};
  f->node.attrs = {ints_of("stride", stride), ints_of("pad", pad), ints_of("dilation", dilation)};
  return true;
}

// x's scale (input 5) and zero point (input 6, optional) as f32[1] and u8[1] consts.
Status activation_consts(NodeLowering& n, TensorId* xs, TensorId* xz) {
  const HostTensor *sx, *zx = nullptr;
  NNASM_TRY(n.host(5, "x's scale", &sx));
  if (n.has(6)) NNASM_TRY(n.host(6, "x's zero point", &zx));
  HostTensor sxt, zxt;
  sxt.dims = {1};
  sxt.f = {sx->f[0]};
  zxt.type = OnnxType::UINT8;
  zxt.dims = {1};
  zxt.i = {zx ? zx->i[0] : 0};
  NNASM_TRY(n.constant(sxt, xs));
  return n.typed_constant(zxt, DType::U8, xz);
}

// The bias as an f32 [o] const: input 4 (f32), or inputs 7 and 8 (i32 and its scale) dequantized
// as DequantizeLinear does, f32(b)·scale; zeros without one.
Status bias_const(NodeLowering& n, int64_t o, TensorId* bias) {
  HostTensor t;
  t.dims = {o};
  if (n.has(4)) {
    const HostTensor* bh;
    NNASM_TRY(n.host(4, "bias", &bh));
    t.f = bh->f;
  } else if (n.has(7)) {
    const HostTensor *bq, *bs;
    NNASM_TRY(n.host(7, "bias", &bq));
    NNASM_TRY(n.host(8, "bias scale", &bs));
    for (int64_t k = 0; k < o; ++k)
      t.f.push_back(static_cast<float>(bq->i[static_cast<size_t>(k)]) * bs->f[bs->numel() == 1 ? 0 : static_cast<size_t>(k)]);
  } else {
    return n.filled({o}, 0, bias);
  }
  return n.constant(t, bias);
}

// The operands of LINEAR_I8 / CONV2D_I8 x_scale=given: x, the i8 weight `w` packed by `pack`
// (LINEAR_WEIGHTS_I8 or CONV_WEIGHTS_I8), its scale `ws`, the bias of o, x's scale and zero point.
Status static_quant_operands(NodeLowering& n, Opcode pack, const HostTensor& w, const HostTensor& ws, int64_t o,
                             std::vector<TensorId>* in) {
  HostTensor s;
  s.dims = {ws.numel()};
  s.f = ws.f;
  TensorId x, wq, scale, bias, xs, xz;
  std::vector<TensorId> packed;
  NNASM_TRY(n.tensor(0, &x));
  NNASM_TRY(n.typed_constant(w, DType::I8, &wq));
  NNASM_TRY(n.constant(s, &scale));
  NNASM_TRY(bias_const(n, o, &bias));
  NNASM_TRY(activation_consts(n, &xs, &xz));
  NNASM_TRY(n.emit(pack, {wq}, {}, &packed));
  *in = {x, packed[0], packed[1], scale, bias, xs, xz};
  return Status::ok();
}

// Inputs x, W [O, C, kh, kw], W's zero point (optional), W's scale, bias (optional), x's scale,
// x's zero point (optional); attributes stride, pad, dilation (resolved); as
// match_static_quant_conv checked them.
Status map_static_quant_conv(NodeLowering& n) {
  std::vector<int64_t> stride, pad, dilation;
  NNASM_TRY(n.attr("stride", &stride));
  NNASM_TRY(n.attr("pad", &pad));
  NNASM_TRY(n.attr("dilation", &dilation));
  const HostTensor *b, *bz = nullptr, *bs;
  NNASM_TRY(n.host(1, "W", &b));
  if (n.has(2)) NNASM_TRY(n.host(2, "W's zero point", &bz));
  NNASM_TRY(n.host(3, "W's scale", &bs));
  HostTensor flat = *b, w;
  flat.dims = {b->dims[0], b->dims[1] * b->dims[2] * b->dims[3]};
  std::vector<int64_t> kmajor;
  if (!static_quant_weight(flat, bz, true, &kmajor)) return Status::error("W less its zero point is not an i8 tensor");
  // static_quant_weight gives [K, O]; CONV_WEIGHTS_I8 takes [O, C, kh, kw].
  const int64_t o = flat.dims[0], k = flat.dims[1];
  w.type = OnnxType::INT8;
  w.dims = b->dims;
  w.i.resize(static_cast<size_t>(o * k));
  for (int64_t oo = 0; oo < o; ++oo)
    for (int64_t kk = 0; kk < k; ++kk) w.i[static_cast<size_t>(oo * k + kk)] = kmajor[static_cast<size_t>(kk * o + oo)];
  std::vector<TensorId> in;
  TensorId y;
  NNASM_TRY(static_quant_operands(n, Opcode::CONV_WEIGHTS_I8, w, *bs, o, &in));
  NNASM_TRY(n.emit(Opcode::CONV2D_I8, in,
                   {{"stride", imm_ints(stride)},
                    {"pad", imm_ints(pad)},
                    {"dilation", imm_ints(dilation)},
                    {"x_scale", imm_i(NNASM_CHOICE(CONV2D_I8, x_scale, given))}},
                   &y));
  n.set(0, y, OnnxType::FLOAT);
  return Status::ok();
}

// Inputs x, W, W's zero point (optional), W's scale, bias (optional), x's scale, x's zero point
// (optional); attribute transB; as match_static_quant_linear checked them.
Status map_static_quant_linear(NodeLowering& n) {
  int64_t trans_b = 0;
  NNASM_TRY(n.attr("transB", &trans_b));
  const HostTensor *b, *bz = nullptr, *bs;
  NNASM_TRY(n.host(1, "W", &b));
  if (n.has(2)) NNASM_TRY(n.host(2, "W's zero point", &bz));
  NNASM_TRY(n.host(3, "W's scale", &bs));
  HostTensor w;
  w.type = OnnxType::INT8;
  w.dims = trans_b ? std::vector<int64_t>{b->dims[1], b->dims[0]} : b->dims;
  if (!static_quant_weight(*b, bz, trans_b != 0, &w.i)) return Status::error("W less its zero point is not an i8 tensor");
  std::vector<TensorId> in;
  TensorId y;
  NNASM_TRY(static_quant_operands(n, Opcode::LINEAR_WEIGHTS_I8, w, *bs, w.dims[1], &in));
  NNASM_TRY(n.emit(Opcode::LINEAR_I8, in,
                   {{"x_scale", imm_i(NNASM_CHOICE(LINEAR_I8, x_scale, given))}}, &y));
  n.set(0, y, OnnxType::FLOAT);
  return Status::ok();
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
    const int64_t a = bias_add(g, r, l, mul.outputs[0], o, &bias);
    if (a >= 0) last = static_cast<size_t>(a);
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
