// TRANSPOSE: permute dimensions.
//
// Computes   y[j_0, ..., j_{r−1}] = x[i_0, ..., i_{r−1}] with j_d = i_{perm[d]}, i.e. output
//            dimension d is input dimension perm[d] (numpy.transpose semantics).
// Inputs     x: f32 or i32, rank r.
// Outputs    y: x's dtype; shape[d] = x.shape[perm[d]].
// Immediates perm: ints, a permutation of 0..r−1 (negative entries count from the end).
// Gradient   dy transposed by the inverse permutation.
// Kernels    reference: walk the output in order with a strided input offset; trailing dimensions
//            that perm leaves in place are contiguous in both tensors and copied as one run
//            (a channel shuffle's [N, g, C/g, H, W] → [N, C/g, g, H, W] copies H·W at a time).
#include <array>
#include <cstdint>
#include <cstring>

#include "ops/op.h"

namespace nnasm {
namespace {

Status transpose_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  const std::vector<int64_t>& perm = ins.ints(NNASM_IMM(TRANSPOSE, perm));
  const Shape& x = in[0].shape;
  if (static_cast<int>(perm.size()) != x.rank)
    return Status::errorf("TRANSPOSE: perm [{}] has {} entries but {} has rank {}", fmt::join(perm, ","),
                          perm.size(), operand_str(ins, 0, in[0]), x.rank);
  std::array<bool, MAX_RANK> seen{};
  Shape y;
  y.rank = x.rank;
  for (int d = 0; d < x.rank; ++d) {
    const int p = normalize_axis(perm[d], x.rank);
    if (p < 0 || seen[p])
      return Status::errorf("TRANSPOSE: perm [{}] is not a permutation of 0..{} for {}", fmt::join(perm, ","),
                            x.rank - 1, operand_str(ins, 0, in[0]));
    seen[p] = true;
    y[d] = x[p];
  }
  (*out)[0] = TensorType{in[0].dtype, y};
  return Status::ok();
}

void transpose_ref(const KernelArgs* k) {
  const Shape &x = k->in_type[0].shape, &y = k->out_type[0].shape;
  const std::vector<int64_t>& perm = k->ins->ints(NNASM_IMM(TRANSPOSE, perm));
  int r = y.rank;
  int64_t run = 1;  // elements of the trailing dimensions perm keeps in place
  while (r > 0 && normalize_axis(perm[r - 1], y.rank) == r - 1) run *= y[--r];
  std::array<int64_t, MAX_RANK> step{}, idx{};
  for (int d = 0; d < r; ++d) step[d] = x.stride(normalize_axis(perm[d], y.rank));
  const uint32_t* src = static_cast<const uint32_t*>(k->in[0]);
  uint32_t* dst = static_cast<uint32_t*>(k->out[0]);
  const int64_t n = y.numel() / run;
  int64_t off = 0;
  for (int64_t o = 0; o < n; ++o) {
    if (run == 1) dst[o] = src[off];
    else std::memcpy(dst + o * run, src + off * run, static_cast<size_t>(run) * sizeof *dst);
    for (int d = r - 1; d >= 0; --d) {
      off += step[d] / run;
      if (++idx[d] < y[d]) break;
      off -= step[d] / run * y[d];
      idx[d] = 0;
    }
  }
}

Status transpose_grad(GradBuilder& b, const Instruction& ins, const std::vector<TensorId>& dy,
                      const std::vector<bool>&, std::vector<TensorId>* dx) {
  const std::vector<int64_t>& perm = ins.ints(NNASM_IMM(TRANSPOSE, perm));
  const int r = static_cast<int>(perm.size());
  std::vector<int64_t> inverse(perm.size());
  for (int d = 0; d < r; ++d) inverse[normalize_axis(perm[d], r)] = d;
  (*dx)[0] = b.emit(Opcode::TRANSPOSE, {dy[0]}, {{"perm", imm_ints(inverse)}});
  return b.status();
}

}  // namespace

OpHooks op_hooks_TRANSPOSE() { return {transpose_shape, transpose_ref, nullptr, transpose_grad}; }

}  // namespace nnasm
