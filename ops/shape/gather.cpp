// GATHER and its gradient GATHER_BWD: picking slices of a tensor by index along one axis (ONNX
// Gather, torch.index_select / nn.Embedding for axis 0).
//
// Computes   GATHER      y[i_<axis, j..., i_>axis] = data[i_<axis, idx[j...], i_>axis]: the axis of
//                        data replaced by the indices' dimensions.
//            GATHER_BWD  ddata = zeros like data; then, for every position of dy in row-major
//                        order, ddata[i_<axis, idx[j...], i_>axis] += dy[i_<axis, j..., i_>axis].
// Inputs     GATHER: data f32 or i32, rank ≥ 1; indices i32, any shape (rank 0 drops the axis).
//            GATHER_BWD: dy f32, shaped as GATHER's y; indices i32; data f32 (its shape gives
//            ddata's; its values are not read).
// Outputs    GATHER: y, data's dtype, data.shape[:axis] + indices.shape + data.shape[axis+1:]
//            (rank ≤ 6, at most MAX_TENSOR_ELEMENTS elements). GATHER_BWD: ddata, f32, data's shape.
// Immediates axis: i64, default 0 (negative counts from the end).
// Gradient   GATHER: to data, GATHER_BWD (dy, indices, data); none to the indices (integers: the
//            output is piecewise constant in them), which count as a zero gradient. GATHER_BWD:
//            no gradient (as the other *_BWD ops).
// Kernels    reference only. GATHER copies whole rows (everything after the axis: an embedding's
//            vector for axis 0) with memcpy, or single words when a row is one element; which
//            rows is known only at run time, from the indices' values, so a generated kernel would
//            do the same copies. GATHER_BWD adds rows in index order, a fixed order: the result is
//            deterministic (bitwise the same for the same inputs, duplicates included).
// Notes      An index i in [−n, n) along an axis of length n picks i (or n + i when negative).
//            Out of range, which shape inference cannot see (the indices are data): GATHER writes
//            zeros for that slice (+0.0, or 0 for i32) and GATHER_BWD drops that slice of dy; no
//            kernel reads or writes outside its operands. Words are copied as bits: NaN payloads
//            and i32 values pass exactly. ONNX and PyTorch reject such indices with an error.
#include <cstring>

#include "ops/reduce/axis.h"

namespace nnasm {
namespace {

constexpr int AXIS = NNASM_IMM_SHARED(axis, Opcode::GATHER, Opcode::GATHER_BWD);

// The shape of GATHER's y for `data` and `indices`, or an error naming the op.
Status gathered_shape(const Instruction& ins, const TensorType& data, const TensorType& indices, Shape* y) {
  int axis;
  NNASM_TRY(axis_of(ins, AXIS, data, &axis));
  const Shape& d = data.shape;
  const Shape& q = indices.shape;
  const int rank = d.rank - 1 + q.rank;
  if (rank > MAX_RANK)
    return Status::errorf("{}: {} indexed by {} along axis {} would have rank {} (at most {})", ins.info().mnemonic,
                          operand_str(ins, 0, data), indices.str(), axis, rank, MAX_RANK);
  y->rank = 0;
  for (int i = 0; i < axis; ++i) y->dims[y->rank++] = d[i];
  for (int i = 0; i < q.rank; ++i) y->dims[y->rank++] = q[i];
  for (int i = axis + 1; i < d.rank; ++i) y->dims[y->rank++] = d[i];
  // outer·inner ≤ data's count; times the index count, checked by division (no overflow).
  const AxisSplit s = split_at(d, axis);
  const int64_t rows = s.outer * s.inner, n_idx = q.numel();
  if (rows > 0 && n_idx > MAX_TENSOR_ELEMENTS / rows)
    return Status::errorf("{}: {} indexed by {} exceeds {} elements", ins.info().mnemonic, operand_str(ins, 0, data),
                          indices.str(), MAX_TENSOR_ELEMENTS);
  return Status::ok();
}

Status require_indices(const Instruction& ins, int k, const TensorType& t) {
  if (t.dtype != DType::I32)
    return Status::errorf("{}: indices {} must be i32", ins.info().mnemonic, operand_str(ins, k, t));
  return Status::ok();
}

Status gather_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  NNASM_TRY(require_indices(ins, 1, in[1]));
  Shape y;
  NNASM_TRY(gathered_shape(ins, in[0], in[1], &y));
  (*out)[0] = TensorType{in[0].dtype, y};
  return Status::ok();
}

Status gather_bwd_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  if (in[0].dtype != DType::F32 || in[2].dtype != DType::F32)
    return Status::errorf("GATHER_BWD: {} and {} must be f32", operand_str(ins, 0, in[0]), operand_str(ins, 2, in[2]));
  NNASM_TRY(require_indices(ins, 1, in[1]));
  Shape y;
  NNASM_TRY(gathered_shape(ins, in[2], in[1], &y));
  if (y != in[0].shape)
    return Status::errorf("GATHER_BWD: {} must be {} (GATHER's output for {} and indices {})",
                          operand_str(ins, 0, in[0]), y.str(), in[2].str(), in[1].str());
  (*out)[0] = in[2];
  return Status::ok();
}

// The row an index picks along an axis of length n, or −1 when it is out of range.
int64_t row_of(int32_t i, int64_t n) {
  const int64_t r = i < 0 ? i + n : i;
  return r >= 0 && r < n ? r : -1;
}

// What both kernels read off their operands: data's split around the axis (data is operand
// `data_k`) and the indices (operand 1).
struct Indexing {
  AxisSplit s;
  const int32_t* idx;
  int64_t n_idx;
};
Indexing indexing(const KernelArgs* k, int data_k) {
  const Shape& ds = k->in_type[data_k].shape;
  return {split_at(ds, normalize_axis(k->ins->i(AXIS), ds.rank)), static_cast<const int32_t*>(k->in[1]),
          k->in_type[1].shape.numel()};
}

void gather_ref(const KernelArgs* k) {
  const auto [s, idx, n_idx] = indexing(k, 0);
  const uint32_t* data = static_cast<const uint32_t*>(k->in[0]);
  uint32_t* y = static_cast<uint32_t*>(k->out[0]);
  const size_t row_bytes = static_cast<size_t>(s.inner) * 4;
  for (int64_t o = 0; o < s.outer; ++o) {
    const uint32_t* slab = data + o * s.len * s.inner;
    uint32_t* yo = y + o * n_idx * s.inner;
    for (int64_t j = 0; j < n_idx; ++j) {
      const int64_t r = row_of(idx[j], s.len);
      uint32_t* dst = yo + j * s.inner;
      if (r < 0) std::memset(dst, 0, row_bytes);
      else if (s.inner == 1) *dst = slab[r];
      else std::memcpy(dst, slab + r * s.inner, row_bytes);
    }
  }
}

void gather_bwd_ref(const KernelArgs* k) {
  const auto [s, idx, n_idx] = indexing(k, 2);
  const float* dy = static_cast<const float*>(k->in[0]);
  float* dx = static_cast<float*>(k->out[0]);
  std::memset(dx, 0, static_cast<size_t>(k->out_type[0].shape.numel()) * 4);
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t j = 0; j < n_idx; ++j) {
      const int64_t r = row_of(idx[j], s.len);
      if (r < 0) continue;
      float* dst = dx + (o * s.len + r) * s.inner;
      const float* src = dy + (o * n_idx + j) * s.inner;
      for (int64_t i = 0; i < s.inner; ++i) dst[i] += src[i];
    }
}

Status gather_grad(GradBuilder& b, const Instruction& ins, const std::vector<TensorId>& dy,
                   const std::vector<bool>& need, std::vector<TensorId>* dx) {
  if (need[0])
    (*dx)[0] = b.emit(Opcode::GATHER_BWD, {dy[0], ins.in[1], ins.in[0]}, {{"axis", imm_i(ins.i(AXIS))}});
  return b.status();
}

}  // namespace

OpHooks op_hooks_GATHER() { return {gather_shape, gather_ref, nullptr, gather_grad}; }
OpHooks op_hooks_GATHER_BWD() { return {gather_bwd_shape, gather_bwd_ref}; }

}  // namespace nnasm
