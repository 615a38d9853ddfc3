// Values known at import time and the shape rules shared by folding and the op mappings
// (onnx_host.h).
#include <algorithm>

#include <fmt/format.h>

#include "isa/program.h"
#include "serialize/onnx/onnx_host.h"

namespace nnasm {

namespace {

std::string dims_str(const std::vector<int64_t>& d) { return fmt::format("[{}]", fmt::join(d, ",")); }

}  // namespace

HostTensor host_ints(std::vector<int64_t> values) {
  HostTensor t;
  t.type = OnnxType::INT64;
  t.dims = {static_cast<int64_t>(values.size())};
  t.i = std::move(values);
  return t;
}

HostTensor host_int_scalar(int64_t value) {
  HostTensor t = host_ints({value});
  t.dims.clear();
  return t;
}

HostTensor host_take(const HostTensor& in, const std::vector<int64_t>& index, std::vector<int64_t> dims) {
  HostTensor t;
  t.type = in.type;
  t.dims = std::move(dims);
  t.has_values = in.has_values;
  if (!in.has_values) return t;
  if (in.is_float()) {
    t.f.reserve(index.size());
    for (int64_t k : index) t.f.push_back(in.f[k]);
  } else {
    t.i.reserve(index.size());
    for (int64_t k : index) t.i.push_back(in.i[k]);
  }
  return t;
}

Status host_broadcast(const std::vector<int64_t>& a, const std::vector<int64_t>& b, HostBroadcast* out) {
  NNASM_TRY(broadcast_dims(a, b, &out->dims));
  NNASM_TRY(check_fold_size(out->dims));
  out->ia = host_broadcast_index(out->dims, a);
  out->ib = host_broadcast_index(out->dims, b);
  return Status::ok();
}

std::vector<int64_t> host_broadcast_index(const std::vector<int64_t>& out, const std::vector<int64_t>& in) {
  int64_t n = 1;
  for (int64_t d : out) n *= d;
  std::vector<int64_t> index(static_cast<size_t>(n));
  const size_t r = out.size(), lead = r - in.size();
  std::vector<int64_t> pos(r, 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t flat = 0;
    for (size_t a = lead; a < r; ++a) flat = flat * in[a - lead] + (in[a - lead] == 1 ? 0 : pos[a]);
    index[static_cast<size_t>(k)] = flat;
    for (size_t a = r; a-- > 0;) {
      if (++pos[a] < out[a]) break;
      pos[a] = 0;
    }
  }
  return index;
}


Status host_int_list(const HostTensor& t, const char* what, std::vector<int64_t>* out) {
  if (!onnx_type_is_integer(t.type) || !t.has_values)
    return Status::errorf("{} is {}, expected integers", what, onnx_type_name(t.type));
  if (t.dims.size() > 1) return Status::errorf("{} has rank {}, expected a list (rank 1)", what, t.dims.size());
  *out = t.i;
  return Status::ok();
}

Status host_scalar(const HostTensor& t, const char* what, double* out) {
  if (!t.has_values) return Status::errorf("{} is {}", what, onnx_type_name(t.type));
  if (t.numel() != 1) return Status::errorf("{} has {} elements, expected one", what, t.numel());
  *out = t.as_double(0);
  return Status::ok();
}

Status check_fold_size(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return Status::errorf("shape {} has a negative dimension", dims_str(dims));
    if (d > MAX_FOLD_ELEMENTS || (d > 0 && n > MAX_FOLD_ELEMENTS / d))
      return Status::errorf("shape {} has more than {} elements, too many to compute at import time", dims_str(dims),
                            MAX_FOLD_ELEMENTS);
    n *= d;
  }
  return Status::ok();
}

Status check_geometry(const char* what, const std::vector<int64_t>& v, int64_t lo) {
  for (int64_t x : v)
    if (x < lo || x > MAX_GEOMETRY) return Status::errorf("{} {} is outside [{}, {}]", what, dims_str(v), lo, MAX_GEOMETRY);
  return Status::ok();
}

Status normalize_axis(int64_t axis, int rank, int* out) {
  if (axis < -rank || axis >= rank) return Status::errorf("axis {} is out of range for rank {}", axis, rank);
  *out = static_cast<int>(axis < 0 ? axis + rank : axis);
  return Status::ok();
}

Status broadcast_dims(const std::vector<int64_t>& a, const std::vector<int64_t>& b, std::vector<int64_t>* out) {
  const size_t r = std::max(a.size(), b.size());
  std::vector<int64_t> y(r);
  for (size_t k = 0; k < r; ++k) {
    const int64_t x = k < r - a.size() ? 1 : a[k - (r - a.size())];
    const int64_t z = k < r - b.size() ? 1 : b[k - (r - b.size())];
    if (x != z && x != 1 && z != 1)
      return Status::errorf("shapes {} and {} do not broadcast", dims_str(a), dims_str(b));
    y[k] = x == 1 ? z : x;
  }
  *out = std::move(y);
  return Status::ok();
}

Status reshape_target(const std::vector<int64_t>& in, const std::vector<int64_t>& shape, bool allowzero,
                      std::vector<int64_t>* out) {
  int64_t n = 1;
  for (int64_t d : in) n *= d;
  std::vector<int64_t> y(shape.size());
  int infer = -1;
  int64_t known = 1;
  bool zero = false;
  for (size_t k = 0; k < shape.size(); ++k) {
    int64_t s = shape[k];
    if (s == 0 && !allowzero) {
      if (k >= in.size())
        return Status::errorf("shape {} copies dimension {} (a 0), which input {} does not have", dims_str(shape), k,
                              dims_str(in));
      s = in[k];
    }
    if (s == -1) {
      if (infer >= 0) return Status::errorf("shape {} has more than one -1", dims_str(shape));
      infer = static_cast<int>(k);
      continue;
    }
    if (s < 0) return Status::errorf("shape {} has a negative dimension", dims_str(shape));
    zero |= s == 0;
    if (s > 0 && known > MAX_TENSOR_ELEMENTS / s)
      return Status::errorf("shape {} has too many elements", dims_str(shape));
    known *= s;
    y[k] = s;
  }
  if (infer >= 0) {
    if (zero) return Status::errorf("shape {} has both a -1 and a 0", dims_str(shape));
    if (n % known != 0)
      return Status::errorf("input {} has {} elements, which shape {} cannot hold", dims_str(in), n, dims_str(shape));
    y[infer] = n / known;
  } else if (known != n) {
    return Status::errorf("input {} has {} elements, which shape {} cannot hold", dims_str(in), n, dims_str(shape));
  }
  *out = std::move(y);
  return Status::ok();
}

Status flatten_target(const std::vector<int64_t>& in, int64_t axis, std::vector<int64_t>* out) {
  const int r = static_cast<int>(in.size());
  if (axis < -r || axis > r) return Status::errorf("axis {} is out of range for rank {}", axis, r);
  const size_t a = static_cast<size_t>(axis < 0 ? axis + r : axis);
  int64_t rows = 1, cols = 1;
  for (size_t k = 0; k < in.size(); ++k) (k < a ? rows : cols) *= in[k];
  *out = {rows, cols};
  return Status::ok();
}

Status squeeze_target(const std::vector<int64_t>& in, const std::vector<int64_t>& axes, std::vector<int64_t>* out) {
  const int r = static_cast<int>(in.size());
  std::vector<bool> drop(in.size(), false);
  if (axes.empty())
    for (int k = 0; k < r; ++k) drop[k] = in[k] == 1;
  for (int64_t a : axes) {
    int k;
    NNASM_TRY(normalize_axis(a, r, &k));
    if (drop[k]) return Status::errorf("axis {} is listed twice", a);
    if (in[k] != 1) return Status::errorf("axis {} of {} has size {}, not 1", a, dims_str(in), in[k]);
    drop[k] = true;
  }
  out->clear();
  for (int k = 0; k < r; ++k)
    if (!drop[k]) out->push_back(in[k]);
  return Status::ok();
}

Status unsqueeze_target(const std::vector<int64_t>& in, const std::vector<int64_t>& axes, std::vector<int64_t>* out) {
  const int r = static_cast<int>(in.size() + axes.size());
  std::vector<bool> one(static_cast<size_t>(r), false);
  for (int64_t a : axes) {
    int k;
    NNASM_TRY(normalize_axis(a, r, &k));
    if (one[k]) return Status::errorf("axis {} is listed twice", a);
    one[k] = true;
  }
  out->clear();
  size_t next = 0;
  for (int k = 0; k < r; ++k) out->push_back(one[k] ? 1 : in[next++]);
  return Status::ok();
}

Status slice_ranges(const std::vector<int64_t>& in, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                    const std::vector<int64_t>& axes, const std::vector<int64_t>& steps, std::vector<SliceRange>* out) {
  const int r = static_cast<int>(in.size());
  if (starts.size() != ends.size())
    return Status::errorf("starts has {} entries, ends {}", starts.size(), ends.size());
  if (!axes.empty() && axes.size() != starts.size())
    return Status::errorf("axes has {} entries, starts {}", axes.size(), starts.size());
  if (!steps.empty() && steps.size() != starts.size())
    return Status::errorf("steps has {} entries, starts {}", steps.size(), starts.size());
  out->assign(in.size(), SliceRange{});
  for (int k = 0; k < r; ++k) (*out)[k].count = in[k];
  std::vector<bool> seen(in.size(), false);
  for (size_t i = 0; i < starts.size(); ++i) {
    int a;
    NNASM_TRY(normalize_axis(axes.empty() ? static_cast<int64_t>(i) : axes[i], r, &a));
    if (seen[a]) return Status::errorf("axis {} is sliced twice", a);
    seen[a] = true;
    const int64_t step = steps.empty() ? 1 : steps[i];
    if (step == 0) return Status::error("a step is 0");
    const int64_t dim = in[a];
    int64_t start = starts[i], end = ends[i];
    if (start < 0) start += dim;
    if (end < 0) end += dim;
    int64_t diff;
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      diff = end - start;
    } else {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      diff = start - end;
    }
    // ceil(diff / |step|) without forming |step| (INT64_MIN has none).
    const uint64_t mag = step > 0 ? static_cast<uint64_t>(step) : uint64_t(0) - static_cast<uint64_t>(step);
    (*out)[a] = SliceRange{start, step, diff <= 0 ? 0 : static_cast<int64_t>(1 + static_cast<uint64_t>(diff - 1) / mag)};
  }
  return Status::ok();
}

}  // namespace nnasm
