// Helpers for values known at import time (HostTensor) and the shape rules that folding and the
// op mappings share: ONNX's axis normalization, broadcasting, Reshape's 0 and -1, Squeeze,
// Unsqueeze, Flatten, and Slice's clamping. One definition each, so that a folded shape and a
// recorded instruction always agree.
#pragma once
#include <cstdint>
#include <vector>

#include "isa/status.h"
#include "serialize/onnx/onnx_model.h"

namespace nnasm {

// Largest tensor (in elements) folded at import time: shape computations are small, and a
// ConstantOfShape of a huge shape must not make the importer allocate.
constexpr int64_t MAX_FOLD_ELEMENTS = int64_t(1) << 24;

// A 1-D INT64 tensor, and a rank-0 one.
HostTensor host_ints(std::vector<int64_t> values);
HostTensor host_int_scalar(int64_t value);
// The elements of `in` at the flat indices `index`, laid out as `dims` (same type as `in`).
HostTensor host_take(const HostTensor& in, const std::vector<int64_t>& index, std::vector<int64_t> dims);
// For each element of a tensor of `out` dims, the flat index of the element of an `in`-shaped
// tensor that numpy broadcasting reads (`in` broadcasts to `out`).
std::vector<int64_t> host_broadcast_index(const std::vector<int64_t>& out, const std::vector<int64_t>& in);
// Two tensors of dims `a` and `b` broadcast together for a fold: the result's dims (checked with
// check_fold_size) and, for each of its elements, the flat index read from each input.
struct HostBroadcast {
  std::vector<int64_t> dims, ia, ib;
};
Status host_broadcast(const std::vector<int64_t>& a, const std::vector<int64_t>& b, HostBroadcast* out);
// A 0-D or 1-D integer tensor as a list; `what` names it in errors.
Status host_int_list(const HostTensor& t, const char* what, std::vector<int64_t>* out);
// A one-element tensor (any rank) as a double; `what` names it in errors.
Status host_scalar(const HostTensor& t, const char* what, double* out);
// Errors when a folded result would have more than MAX_FOLD_ELEMENTS elements (or overflow).
Status check_fold_size(const std::vector<int64_t>& dims);

// Convolution and pooling geometry (strides, dilations, pads, kernel sizes) beyond this is refused,
// so that no size computed from it can overflow.
constexpr int64_t MAX_GEOMETRY = int64_t(1) << 24;
// Every entry of `v` (attribute `what`) within [lo, MAX_GEOMETRY].
Status check_geometry(const char* what, const std::vector<int64_t>& v, int64_t lo);

// axis in [-rank, rank) made non-negative; an error names the axis and the rank.
Status normalize_axis(int64_t axis, int rank, int* out);
// Numpy's (and ONNX's multidirectional) broadcasting of two shapes.
Status broadcast_dims(const std::vector<int64_t>& a, const std::vector<int64_t>& b, std::vector<int64_t>* out);

// Reshape: `shape`'s 0 copies the input's dimension (unless allowzero), one -1 is inferred.
Status reshape_target(const std::vector<int64_t>& in, const std::vector<int64_t>& shape, bool allowzero,
                      std::vector<int64_t>* out);
// Flatten at `axis` (−rank ≤ axis ≤ rank): [prod(dims[:axis]), prod(dims[axis:])].
Status flatten_target(const std::vector<int64_t>& in, int64_t axis, std::vector<int64_t>* out);
// Squeeze the listed axes (each of size 1), or every axis of size 1 when `axes` is empty.
Status squeeze_target(const std::vector<int64_t>& in, const std::vector<int64_t>& axes, std::vector<int64_t>* out);
// Unsqueeze: insert a 1 at each of `axes`, counted in the output's rank.
Status unsqueeze_target(const std::vector<int64_t>& in, const std::vector<int64_t>& axes, std::vector<int64_t>* out);

// Slice along one axis: elements start, start + step, ... (count of them).
struct SliceRange {
  int64_t start = 0, step = 1, count = 0;
};
// ONNX Slice's rules (negative starts and ends count from the end, then clamp; steps may be
// negative, never 0): one range per input axis, the whole axis where `axes` does not name it.
// `axes` empty means 0, 1, ...; `steps` empty means all 1.
Status slice_ranges(const std::vector<int64_t>& in, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                    const std::vector<int64_t>& axes, const std::vector<int64_t>& steps, std::vector<SliceRange>* out);

}  // namespace nnasm
