// ONNX's shape and data-movement ops onto RESHAPE, TRANSPOSE, CONCAT, SLICE, PAD and EXPAND (and
// the folds of those that shape computations use); Gather, GatherElements, GatherND and Compress
// onto GATHER (the last three with indices or a condition known at import time), Trilu
// onto WHERE with a constant triangular mask. Shapes, axes, pads and starts must be known at
// import time; a result equal to its input passes the input's tensor through.
#include <algorithm>

#include "serialize/onnx/onnx_host.h"
#include "serialize/onnx/onnx_ops.h"

namespace nnasm {

namespace {

// Output 0 of `n` as the elements of input 0 (dims `d`) at the positions `flat` of its flattened
// data, laid out as `out`: one GATHER with known indices.
Status gather_flat(NodeLowering& n, const std::vector<int64_t>& d, std::vector<int64_t> flat,
                   const std::vector<int64_t>& out) {
  HostTensor flat_idx = host_ints(std::move(flat));
  flat_idx.dims = out;
  int64_t numel = 1;
  for (int64_t v : d) numel *= v;
  TensorId x, i, y;
  NNASM_TRY(n.tensor(0, &x));
  NNASM_TRY(n.reshape(x, {numel}, &x));
  NNASM_TRY(n.constant(flat_idx, &i));
  NNASM_TRY(n.emit(Opcode::GATHER, {x, i}, {{"axis", imm_i(0)}}, &y));
  n.set(0, y, n.type(0));
  return Status::ok();
}

// The output dims of Reshape, Flatten, Squeeze and Unsqueeze.
Status reshape_family_target(NodeLowering& n, std::vector<int64_t>* out) {
  const std::string& op = n.node().op_type;
  const std::vector<int64_t> in = n.dims(0);
  if (op == "Reshape") {
    NNASM_TRY(n.expect_inputs(2, 2));
    const HostTensor* shape;
    NNASM_TRY(n.host(1, "shape", &shape));
    std::vector<int64_t> s;
    NNASM_TRY(host_int_list(*shape, "shape", &s));
    int64_t allowzero = 0;
    NNASM_TRY(n.attr("allowzero", &allowzero));
    return reshape_target(in, s, allowzero != 0, out);
  }
  if (op == "Flatten") {
    NNASM_TRY(n.expect_inputs(1, 1));
    int64_t axis = 1;
    NNASM_TRY(n.attr("axis", &axis));
    return flatten_target(in, axis, out);
  }
  NNASM_TRY(n.expect_inputs(1, 2));
  std::vector<int64_t> axes;
  bool given = false;
  NNASM_TRY(n.list_arg("axes", 1, 13, &axes, &given));
  if (op == "Squeeze") return squeeze_target(in, axes, out);
  if (!given) return Status::error("axes are required");
  return unsqueeze_target(in, axes, out);
}

// Slice's starts, ends, axes and steps: attributes before opset 10, inputs 1 to 4 from then on.
Status slice_args(NodeLowering& n, std::vector<SliceRange>* ranges) {
  NNASM_TRY(n.expect_inputs(1, 5));
  std::vector<int64_t> starts, ends, axes, steps;
  bool given = false;
  NNASM_TRY(n.list_arg("starts", 1, 10, &starts, &given));
  if (!given) return Status::error("starts are required");
  NNASM_TRY(n.list_arg("ends", 2, 10, &ends, &given));
  if (!given) return Status::error("ends are required");
  NNASM_TRY(n.list_arg("axes", 3, 10, &axes, &given));
  NNASM_TRY(n.list_arg("steps", 4, 10, &steps, &given));
  return slice_ranges(n.dims(0), starts, ends, axes, steps, ranges);
}

}  // namespace

Status slice_to(NodeLowering& n, TensorId x, const std::vector<SliceRange>& ranges, TensorId* y) {
  const std::vector<int64_t> dims = shape_dims(n.tensor_type(x).shape);
  *y = x;
  for (size_t a = 0; a < ranges.size(); ++a) {
    const SliceRange& r = ranges[a];
    if (r.count == 0) return Status::errorf("the slice of axis {} is empty, and nnasm tensors cannot have a size-0 dimension", a);
    if (r.step != 1 && r.count > 1) return Status::errorf("steps other than 1 (axis {} has step {}) are not supported", a, r.step);
    if (r.start == 0 && r.count == dims[a]) continue;
    NNASM_TRY(n.emit(Opcode::SLICE, {*y}, {{"axis", imm_i(static_cast<int64_t>(a))}, {"start", imm_i(r.start)},
                                          {"end", imm_i(r.start + r.count)}},
                     y));
  }
  return Status::ok();
}

Status map_identity(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(1, 1));
  TensorId x;
  NNASM_TRY(n.tensor(0, &x));
  n.set(0, x, n.type(0));
  return Status::ok();
}

Status fold_identity(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(1, 1));
  n.set(0, n.value(0).host);
  return Status::ok();
}

Status map_reshape(NodeLowering& n) {
  std::vector<int64_t> dims;
  NNASM_TRY(reshape_family_target(n, &dims));
  TensorId x, y;
  NNASM_TRY(n.tensor(0, &x));
  NNASM_TRY(n.reshape(x, dims, &y));
  n.set(0, y, n.type(0));
  return Status::ok();
}

Status fold_reshape(NodeLowering& n) {
  std::vector<int64_t> dims;
  NNASM_TRY(reshape_family_target(n, &dims));
  HostTensor y = n.value(0).host;
  y.dims = std::move(dims);
  n.set(0, std::move(y));
  return Status::ok();
}

Status map_transpose(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(1, 1));
  const int r = static_cast<int>(n.dims(0).size());
  std::vector<int64_t> perm(static_cast<size_t>(r));
  for (int k = 0; k < r; ++k) perm[k] = r - 1 - k;
  NNASM_TRY(n.attr("perm", &perm));
  TensorId x, y;
  NNASM_TRY(n.tensor(0, &x));
  bool identity = true;
  for (int k = 0; k < static_cast<int>(perm.size()); ++k) identity &= perm[k] == k;
  if (identity && static_cast<int>(perm.size()) == r) y = x;
  else NNASM_TRY(n.emit(Opcode::TRANSPOSE, {x}, {{"perm", imm_ints(perm)}}, &y));
  n.set(0, y, n.type(0));
  return Status::ok();
}

Status map_concat(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(1, -1));
  int64_t axis;
  NNASM_TRY(n.required_attr("axis", &axis));
  int a;
  NNASM_TRY(normalize_axis(axis, static_cast<int>(n.dims(0).size()), &a));
  std::vector<TensorId> xs;
  for (int k = 0; k < n.inputs(); ++k) {
    // An empty constant adds nothing (shape computations concatenate empty lists).
    if (!n.has(k) || (n.is_host(k) && n.value(k).host.numel() == 0)) continue;
    NNASM_TRY(n.tensor(k, &xs.emplace_back()));
  }
  if (xs.empty()) return Status::error("every input is empty");
  TensorId y = xs[0];
  if (xs.size() > 1) NNASM_TRY(n.emit(Opcode::CONCAT, xs, {{"axis", imm_i(a)}}, &y));
  n.set(0, y, n.type(0));
  return Status::ok();
}

Status fold_concat(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(1, -1));
  int64_t axis;
  NNASM_TRY(n.required_attr("axis", &axis));
  std::vector<const HostTensor*> xs;
  for (int k = 0; k < n.inputs(); ++k) NNASM_TRY(n.host(k, "input", &xs.emplace_back()));
  const std::vector<int64_t>& d0 = xs[0]->dims;
  int a;
  NNASM_TRY(normalize_axis(axis, static_cast<int>(d0.size()), &a));
  HostTensor y;
  y.type = xs[0]->type;
  std::vector<int64_t> rest = d0;  // the dimensions every input must share
  rest[a] = 0;
  y.dims = rest;
  for (const HostTensor* x : xs) {
    if (x->type != y.type) return Status::errorf("inputs are {} and {}", onnx_type_name(y.type), onnx_type_name(x->type));
    std::vector<int64_t> other = x->dims;
    if (other.size() != d0.size()) return Status::error("inputs have different ranks");
    other[a] = 0;
    if (other != rest) return Status::error("inputs differ in a dimension other than the axis");
    y.dims[a] += x->dims[a];
  }
  NNASM_TRY(check_fold_size(y.dims));
  int64_t outer = 1;
  for (int k = 0; k < a; ++k) outer *= d0[k];
  for (int64_t o = 0; o < outer; ++o)
    for (const HostTensor* x : xs) {
      const int64_t chunk = outer == 0 ? 0 : x->numel() / outer;
      if (y.is_float()) y.f.insert(y.f.end(), x->f.begin() + o * chunk, x->f.begin() + (o + 1) * chunk);
      else y.i.insert(y.i.end(), x->i.begin() + o * chunk, x->i.begin() + (o + 1) * chunk);
    }
  n.set(0, std::move(y));
  return Status::ok();
}

Status map_slice(NodeLowering& n) {
  std::vector<SliceRange> ranges;
  NNASM_TRY(slice_args(n, &ranges));
  TensorId x, y;
  NNASM_TRY(n.tensor(0, &x));
  NNASM_TRY(slice_to(n, x, ranges, &y));
  n.set(0, y, n.type(0));
  return Status::ok();
}

Status fold_slice(NodeLowering& n) {
  std::vector<SliceRange> ranges;
  NNASM_TRY(slice_args(n, &ranges));
  const HostTensor& x = n.value(0).host;
  std::vector<int64_t> dims;
  int64_t total = 1;
  for (const SliceRange& r : ranges) {
    dims.push_back(r.count);
    total *= r.count;
  }
  std::vector<int64_t> index;
  index.reserve(static_cast<size_t>(total));
  std::vector<int64_t> pos(ranges.size(), 0);
  for (int64_t k = 0; k < total; ++k) {
    int64_t flat = 0;
    for (size_t a = 0; a < ranges.size(); ++a) flat = flat * x.dims[a] + ranges[a].start + pos[a] * ranges[a].step;
    index.push_back(flat);
    for (size_t a = ranges.size(); a-- > 0;) {
      if (++pos[a] < ranges[a].count) break;
      pos[a] = 0;
    }
  }
  n.set(0, host_take(x, index, dims));
  return Status::ok();
}

// Gather with indices known at import time: each run of consecutive indices is one SLICE of the
// data, the runs are CONCATenated along the axis, and a RESHAPE gives the indices' shape. (Indices
// computed at run time need a gather instruction.)
// Indices computed at run time (an embedding's token ids), or too scattered for a few slices:
// one GATHER (an index out of range gives a zero slice there, where ONNX leaves it undefined).
Status gather_instruction(NodeLowering& n, int axis) {
  TensorId x, idx, y;
  NNASM_TRY(n.tensor(0, &x));
  NNASM_TRY(n.tensor(1, &idx));
  if (n.tensor_type(idx).dtype != DType::I32) return Status::error("indices must be integers");
  NNASM_TRY(n.emit(Opcode::GATHER, {x, idx}, {{"axis", imm_i(axis)}}, &y));
  n.set(0, y, n.type(0));
  return Status::ok();
}

Status map_gather(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(2, 2));
  int64_t axis = 0;
  NNASM_TRY(n.attr("axis", &axis));
  const std::vector<int64_t> d = n.dims(0);
  int a;
  NNASM_TRY(normalize_axis(axis, static_cast<int>(d.size()), &a));
  if (!n.is_host(1)) return gather_instruction(n, a);
  const HostTensor* idx;
  NNASM_TRY(n.host(1, "indices", &idx));
  if (!onnx_type_is_integer(idx->type)) return Status::errorf("indices are {}, expected integers", onnx_type_name(idx->type));
  // Indices known at import time: slices of runs of consecutive rows (and a CONCAT), which the
  // passes see through; a GATHER when there are many runs.
  constexpr size_t MAX_RUNS = 64;
  std::vector<SliceRange> runs;  // along axis a
  for (int64_t j : idx->i) {
    if (j < -d[a] || j >= d[a]) return Status::errorf("index {} is out of range for a dimension of {}", j, d[a]);
    const int64_t row = j < 0 ? j + d[a] : j;
    if (!runs.empty() && runs.back().start + runs.back().count == row) ++runs.back().count;
    else runs.push_back(SliceRange{row, 1, 1});
    if (runs.size() > MAX_RUNS) return gather_instruction(n, a);
  }
  TensorId x, y;
  NNASM_TRY(n.tensor(0, &x));
  std::vector<TensorId> parts;
  for (const SliceRange& r : runs) {
    std::vector<SliceRange> ranges(d.size());
    for (size_t k = 0; k < d.size(); ++k) ranges[k] = SliceRange{0, 1, d[k]};
    ranges[a] = r;
    NNASM_TRY(slice_to(n, x, ranges, &parts.emplace_back()));
  }
  if (parts.empty()) return Status::error("no indices, and nnasm tensors cannot have a size-0 dimension");
  y = parts[0];
  if (parts.size() > 1) NNASM_TRY(n.emit(Opcode::CONCAT, parts, {{"axis", imm_i(a)}}, &y));
  std::vector<int64_t> out(d.begin(), d.begin() + a);
  out.insert(out.end(), idx->dims.begin(), idx->dims.end());
  out.insert(out.end(), d.begin() + a + 1, d.end());
  NNASM_TRY(n.reshape(y, out, &y));
  n.set(0, y, n.type(0));
  return Status::ok();
}

Status map_split(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(1, 2));
  const std::vector<int64_t> dims = n.dims(0);
  int64_t axis = 0;
  NNASM_TRY(n.attr("axis", &axis));
  int a;
  NNASM_TRY(normalize_axis(axis, static_cast<int>(dims.size()), &a));
  std::vector<int64_t> split;
  bool given = false;
  NNASM_TRY(n.list_arg("split", 1, 13, &split, &given));
  if (!given) {
    if (dims[a] % n.outputs() != 0)
      return Status::errorf("axis {} of size {} does not split into {} equal parts", a, dims[a], n.outputs());
    split.assign(static_cast<size_t>(n.outputs()), dims[a] / n.outputs());
  }
  if (static_cast<int>(split.size()) != n.outputs())
    return Status::errorf("split has {} parts for {} outputs", split.size(), n.outputs());
  int64_t sum = 0;
  for (int64_t s : split) {
    if (s < 0 || s > dims[a]) return Status::errorf("part {} is out of range for axis {} of size {}", s, a, dims[a]);
    sum += s;
  }
  if (sum != dims[a]) return Status::errorf("the parts add up to {}, axis {} has {}", sum, a, dims[a]);
  TensorId x;
  NNASM_TRY(n.tensor(0, &x));
  int64_t start = 0;
  for (int k = 0; k < n.outputs(); ++k) {
    std::vector<SliceRange> ranges(dims.size());
    for (size_t d = 0; d < dims.size(); ++d) ranges[d] = SliceRange{0, 1, dims[d]};
    ranges[a] = SliceRange{start, 1, split[k]};
    start += split[k];
    if (!n.wants(k)) continue;
    TensorId y;
    NNASM_TRY(slice_to(n, x, ranges, &y));
    n.set(k, y, n.type(0));
  }
  return Status::ok();
}

Status map_gather_elements(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(2, 2));
  int64_t axis = 0;
  NNASM_TRY(n.attr("axis", &axis));
  const std::vector<int64_t> d = n.dims(0);
  const int r = static_cast<int>(d.size());
  int a;
  NNASM_TRY(normalize_axis(axis, r, &a));
  const HostTensor* idx;
  NNASM_TRY(n.host(1, "indices", &idx));
  if (!onnx_type_is_integer(idx->type)) return Status::errorf("indices are {}, expected integers", onnx_type_name(idx->type));
  if (idx->dims.size() != d.size()) return Status::errorf("indices are rank {}, the data rank {}", idx->dims.size(), r);
  for (int k = 0; k < r; ++k)
    if (k != a && idx->dims[k] > d[k])
      return Status::errorf("indices are [{}], larger than the data [{}] off the axis", fmt::join(idx->dims, ","), fmt::join(d, ","));
  // Known indices make one GATHER from the flattened data: position p of the output reads the
  // data at p's coordinates with the axis's replaced by the index there.
  std::vector<int64_t> strides(static_cast<size_t>(r), 1), pos(static_cast<size_t>(r), 0), flat;
  for (int k = r - 2; k >= 0; --k) strides[k] = strides[k + 1] * d[k + 1];
  flat.reserve(idx->i.size());
  for (int64_t j : idx->i) {
    if (j < -d[a] || j >= d[a]) return Status::errorf("index {} is out of range for a dimension of {}", j, d[a]);
    int64_t f = 0;
    for (int k = 0; k < r; ++k) f += (k == a ? (j < 0 ? j + d[a] : j) : pos[k]) * strides[k];
    flat.push_back(f);
    for (int k = r - 1; k >= 0 && ++pos[k] == idx->dims[k]; --k) pos[k] = 0;
  }
  return gather_flat(n, d, std::move(flat), idx->dims);
}

Status map_gather_nd(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(2, 2));
  int64_t batch_dims = 0;
  NNASM_TRY(n.attr("batch_dims", &batch_dims));
  const std::vector<int64_t> d = n.dims(0);
  const HostTensor* idx;
  NNASM_TRY(n.host(1, "indices", &idx));
  if (!onnx_type_is_integer(idx->type)) return Status::errorf("indices are {}, expected integers", onnx_type_name(idx->type));
  const int64_t r = static_cast<int64_t>(d.size()), q = static_cast<int64_t>(idx->dims.size());
  if (q < 1 || batch_dims < 0 || batch_dims >= std::min(r, q)) return Status::errorf("batch_dims {} with data rank {} and indices rank {}", batch_dims, r, q);
  const int64_t m = idx->dims.back();
  if (m < 1 || batch_dims + m > r) return Status::errorf("index tuples of {} do not fit data rank {} after {} batch dimensions", m, r, batch_dims);
  for (int64_t k = 0; k < batch_dims; ++k)
    if (idx->dims[k] != d[k]) return Status::errorf("batch dimension {} is {} in the indices and {} in the data", k, idx->dims[k], d[k]);
  // Each tuple selects a slice of the trailing dimensions; tuples are laid out batch by batch.
  std::vector<int64_t> strides(static_cast<size_t>(r), 1);
  for (int64_t k = r - 2; k >= 0; --k) strides[k] = strides[k + 1] * d[k + 1];
  int64_t slice = 1, batch = 1;
  for (int64_t k = batch_dims + m; k < r; ++k) slice *= d[k];
  for (int64_t k = 0; k < batch_dims; ++k) batch *= d[k];
  const int64_t tuples = static_cast<int64_t>(idx->i.size()) / m, per_batch = tuples / batch;
  std::vector<int64_t> out(idx->dims.begin(), idx->dims.end() - 1), flat;
  for (int64_t k = batch_dims + m; k < r; ++k) out.push_back(d[k]);
  NNASM_TRY(check_fold_size(out));
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t base = (t / per_batch) * (batch_dims ? strides[batch_dims - 1] : 0);
    for (int64_t k = 0; k < m; ++k) {
      int64_t j = idx->i[static_cast<size_t>(t * m + k)];
      const int64_t dim = d[batch_dims + k];
      if (j < -dim || j >= dim) return Status::errorf("index {} is out of range for a dimension of {}", j, dim);
      base += (j < 0 ? j + dim : j) * strides[batch_dims + k];
    }
    for (int64_t e = 0; e < slice; ++e) flat.push_back(base + e);
  }
  return gather_flat(n, d, std::move(flat), out);
}

Status map_compress(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(2, 2));
  std::vector<int64_t> d = n.dims(0);
  const bool has_axis = n.has_attr("axis");
  int64_t axis = 0;
  NNASM_TRY(n.attr("axis", &axis));
  const HostTensor* cond;
  NNASM_TRY(n.host(1, "condition", &cond));
  if (cond->dims.size() != 1 || !onnx_type_is_integer(cond->type)) return Status::error("the condition is not a 1-D BOOL tensor");
  int64_t numel = 1;
  for (int64_t v : d) numel *= v;
  // Without an axis the input is taken flat. The positions along the axis the condition keeps.
  const std::vector<int64_t> view = has_axis ? d : std::vector<int64_t>{numel};
  int a = 0;
  if (has_axis) NNASM_TRY(normalize_axis(axis, static_cast<int>(d.size()), &a));
  if (cond->numel() > view[a]) return Status::errorf("the condition has {} entries for an axis of {}", cond->numel(), view[a]);
  std::vector<int64_t> kept;
  for (int64_t k = 0; k < cond->numel(); ++k)
    if (cond->i[static_cast<size_t>(k)]) kept.push_back(k);
  if (kept.empty()) return Status::error("the condition keeps nothing, and nnasm tensors cannot be empty");
  std::vector<int64_t> out = view;
  out[a] = static_cast<int64_t>(kept.size());
  NNASM_TRY(check_fold_size(out));
  int64_t outer = 1, inner = 1;
  for (int k = 0; k < a; ++k) outer *= view[k];
  for (size_t k = a + 1; k < view.size(); ++k) inner *= view[k];
  std::vector<int64_t> flat;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k : kept)
      for (int64_t e = 0; e < inner; ++e) flat.push_back((o * view[a] + k) * inner + e);
  return gather_flat(n, d, std::move(flat), out);
}

Status map_trilu(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(1, 2));
  int64_t upper = 1, k = 0;
  NNASM_TRY(n.attr("upper", &upper));
  if (n.has(1)) {
    const HostTensor* kt;
    double v;
    NNASM_TRY(n.host(1, "k", &kt));
    NNASM_TRY(host_scalar(*kt, "k", &v));
    if (kt->is_float()) return Status::error("k is FLOAT, expected an integer");
    k = kt->i[0];
  }
  const std::vector<int64_t> d = n.dims(0);
  if (d.size() < 2) return Status::errorf("the input is rank {}, expected at least 2", d.size());
  const int64_t rows = d[d.size() - 2], cols = d.back();
  NNASM_TRY(check_fold_size({rows, cols}));
  // Keeps x where column − row ≥ k (upper) or ≤ k (lower); WHERE, not a product with the mask,
  // so that an infinity or NaN outside the triangle still gives 0.
  HostTensor mask;
  mask.dims = {rows, cols};
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) mask.f.push_back(upper ? j - i >= k : j - i <= k);
  TensorId x, m, zero, y;
  NNASM_TRY(n.tensor(0, &x));
  NNASM_TRY(n.constant(mask, &m));
  if (n.tensor_type(x).dtype == DType::F32) NNASM_TRY(n.scalar(0, &zero));
  else NNASM_TRY(n.constant(host_int_scalar(0), &zero));
  NNASM_TRY(n.emit(Opcode::WHERE, {m, x, zero}, {}, &y));
  n.set(0, y, n.type(0));
  return Status::ok();
}

Status map_pad(NodeLowering& n) {
  std::string mode = "constant";
  NNASM_TRY(n.attr("mode", &mode));
  if (mode != "constant") return Status::errorf("mode '{}' is not supported (only 'constant')", mode);
  std::vector<int64_t> pads;
  float value = 0;
  bool given = false;
  if (n.opset() < 11) {
    NNASM_TRY(n.expect_inputs(1, 1));
    NNASM_TRY(n.attr("value", &value));
  } else {
    NNASM_TRY(n.expect_inputs(2, 3));
    if (n.has(2)) {
      const HostTensor* v;
      double d;
      NNASM_TRY(n.host(2, "constant_value", &v));
      NNASM_TRY(host_scalar(*v, "constant_value", &d));
      value = static_cast<float>(d);
    }
  }
  NNASM_TRY(n.list_arg("pads", 1, 11, &pads, &given));
  const std::vector<int64_t> dims = n.dims(0);
  const size_t r = dims.size();
  if (!given || pads.size() != 2 * r) return Status::errorf("pads needs {} entries, has {}", 2 * r, pads.size());
  // Negative pads crop: a slice first, then the padding of the positive ones.
  std::vector<SliceRange> crop(r);
  std::vector<int64_t> grow(2 * r, 0);
  for (size_t a = 0; a < r; ++a) {
    const int64_t before = pads[a], after = pads[a + r];
    if (before < -dims[a] || after < -dims[a]) return Status::errorf("pads {} and {} crop away axis {}", before, after, a);
    crop[a] = SliceRange{before < 0 ? -before : 0, 1, dims[a] + std::min<int64_t>(before, 0) + std::min<int64_t>(after, 0)};
    grow[a] = std::max<int64_t>(before, 0);
    grow[a + r] = std::max<int64_t>(after, 0);
  }
  TensorId x, y;
  NNASM_TRY(n.tensor(0, &x));
  NNASM_TRY(slice_to(n, x, crop, &y));
  if (std::any_of(grow.begin(), grow.end(), [](int64_t p) { return p != 0; }))
    NNASM_TRY(n.emit(Opcode::PAD, {y}, {{"pads", imm_ints(grow)}, {"value", imm_f(value)}}, &y));
  n.set(0, y, n.type(0));
  return Status::ok();
}

Status map_expand(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(2, 2));
  const HostTensor* shape;
  NNASM_TRY(n.host(1, "shape", &shape));
  std::vector<int64_t> s, dims;
  NNASM_TRY(host_int_list(*shape, "shape", &s));
  NNASM_TRY(broadcast_dims(n.dims(0), s, &dims));
  TensorId x, y;
  NNASM_TRY(n.tensor(0, &x));
  if (dims == n.dims(0)) y = x;
  else NNASM_TRY(n.emit(Opcode::EXPAND, {x}, {{"shape", imm_ints(dims)}}, &y));
  n.set(0, y, n.type(0));
  return Status::ok();
}

// Tile, one repeated axis at a time: x viewed as [outer, 1, rest] (rest: the axis and all after
// it), EXPANDed to [outer, repeats, rest], so that the copies of the axis lie one after another.
Status map_tile(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(2, 2));
  const HostTensor* rep;
  std::vector<int64_t> repeats;
  NNASM_TRY(n.host(1, "repeats", &rep));
  NNASM_TRY(host_int_list(*rep, "repeats", &repeats));
  std::vector<int64_t> dims = n.dims(0);
  if (repeats.size() != dims.size()) return Status::errorf("repeats has {} entries for rank {}", repeats.size(), dims.size());
  TensorId y;
  NNASM_TRY(n.tensor(0, &y));
  for (size_t a = 0; a < dims.size(); ++a) {
    if (repeats[a] < 1) return Status::errorf("repeats[{}] is {}; nnasm tensors cannot have a size-0 dimension", a, repeats[a]);
    if (repeats[a] > MAX_TENSOR_ELEMENTS / dims[a]) return Status::errorf("repeats[{}] is {}, too many", a, repeats[a]);
    if (repeats[a] == 1) continue;
    int64_t outer = 1, rest = 1;
    for (size_t d = 0; d < dims.size(); ++d) (d < a ? outer : rest) *= dims[d];
    NNASM_TRY(n.reshape(y, {outer, 1, rest}, &y));
    NNASM_TRY(n.emit(Opcode::EXPAND, {y}, {{"shape", imm_ints({outer, repeats[a], rest})}}, &y));
    dims[a] *= repeats[a];
    NNASM_TRY(n.reshape(y, dims, &y));
  }
  n.set(0, y, n.type(0));
  return Status::ok();
}

// DepthToSpace (DCR and CRD) and SpaceToDepth as RESHAPE to rank 6, TRANSPOSE, RESHAPE.
Status map_depth_to_space(NodeLowering& n) {
  NNASM_TRY(n.expect_inputs(1, 1));
  int64_t b = 0;
  NNASM_TRY(n.attr("blocksize", &b));
  const std::vector<int64_t> d = n.dims(0);
  if (d.size() != 4) return Status::errorf("input is rank {}, expected 4 (NCHW)", d.size());
  if (b < 1 || b > MAX_GEOMETRY) return Status::errorf("blocksize {} is outside [1, {}]", b, MAX_GEOMETRY);
  const int64_t N = d[0], C = d[1], H = d[2], W = d[3];
  std::vector<int64_t> split, perm, out;
  if (n.node().op_type == "SpaceToDepth") {
    if (H % b || W % b) return Status::errorf("H and W ({}, {}) are not multiples of blocksize {}", H, W, b);
    split = {N, C, H / b, b, W / b, b};
    perm = {0, 3, 5, 1, 2, 4};
    out = {N, C * b * b, H / b, W / b};
  } else {
    std::string mode = "DCR";
    NNASM_TRY(n.attr("mode", &mode));
    if (C % (b * b)) return Status::errorf("C ({}) is not a multiple of blocksize² ({})", C, b * b);
    if (mode == "DCR") {
      split = {N, b, b, C / (b * b), H, W};
      perm = {0, 3, 4, 1, 5, 2};
    } else if (mode == "CRD") {
      split = {N, C / (b * b), b, b, H, W};
      perm = {0, 1, 4, 2, 5, 3};
    } else {
      return Status::errorf("mode '{}' is not DCR or CRD", mode);
    }
    out = {N, C / (b * b), H * b, W * b};
  }
  TensorId x, y;
  NNASM_TRY(n.tensor(0, &x));
  NNASM_TRY(n.reshape(x, split, &y));
  NNASM_TRY(n.emit(Opcode::TRANSPOSE, {y}, {{"perm", imm_ints(perm)}}, &y));
  NNASM_TRY(n.reshape(y, out, &y));
  n.set(0, y, n.type(0));
  return Status::ok();
}

}  // namespace nnasm
