// ARGMAX and ARGMIN: the position of the extremum along one axis (ONNX ArgMax/ArgMin with
// select_last_index = 0, torch.argmax/argmin).
//
// Computes   y = the index j along `axis` of the first maximum (ARGMAX) or minimum (ARGMIN) of x.
// Inputs     x: f32, rank ≥ 1.
// Outputs    y: i32, x's shape without the axis (or with it as 1 when keepdims=1).
// Immediates axis: i64, default −1; keepdims: bool, default 0 (REDUCE_*'s; ONNX's defaults are
//            axis 0, keepdims 1, which an importer writes out).
// Gradient   none: the output is an integer position (a zero gradient, as STEP's).
// Kernels    reference only: one pass per output in index order, strided along middle axes. The
//            rowwise generator reduces values, and a position needs an index per lane beside
//            the value and a first-index rule when lanes combine; models take an argmax once per
//            prediction, over rows of class scores, where the pass is a small part of the step.
// Notes      Ties go to the first index (ONNX's select_last_index = 0). A NaN counts as the
//            extremum: the first NaN of a row is its result (numpy and PyTorch do the same).
//            ±0 tie. A row of one element gives 0.
#include <cmath>
#include <cstdint>

#include "ops/reduce/axis.h"

namespace nnasm {
namespace {

constexpr int AXIS = NNASM_IMM_SHARED(axis, Opcode::ARGMAX, Opcode::ARGMIN),
              KEEPDIMS = NNASM_IMM_SHARED(keepdims, Opcode::ARGMAX, Opcode::ARGMIN);

Status arg_shape(const Instruction& ins, const std::vector<TensorType>& in, std::vector<TensorType>* out) {
  NNASM_TRY(require_f32(ins, in));
  int axis;
  NNASM_TRY(axis_of(ins, AXIS, in[0], &axis));
  if (in[0].shape[axis] > INT32_MAX)
    return Status::errorf("{}: axis {} of {} is longer than an i32 index reaches", ins.info().mnemonic, axis,
                          operand_str(ins, 0, in[0]));
  (*out)[0] = TensorType{DType::I32, reduced_shape(in[0].shape, axis, ins.i(KEEPDIMS))};
  return Status::ok();
}

template <bool MAX>
void arg_ref(const KernelArgs* k) {
  const AxisSplit sp = split_at(k, AXIS);
  const float* x = static_cast<const float*>(k->in[0]);
  int32_t* y = static_cast<int32_t*>(k->out[0]);
  for_each_line(sp, x, [&](const float* xr, int64_t out) {
    int64_t best = 0;
    float bv = xr[0];
    for (int64_t j = 1; j < sp.len && !std::isnan(bv); ++j) {
      const float v = xr[j * sp.inner];
      if (std::isnan(v) || (MAX ? v > bv : v < bv)) {
        best = j;
        bv = v;
      }
    }
    y[out] = static_cast<int32_t>(best);
  });
}

}  // namespace

OpHooks op_hooks_ARGMAX() { return {arg_shape, arg_ref<true>, nullptr, no_gradient}; }
OpHooks op_hooks_ARGMIN() { return {arg_shape, arg_ref<false>, nullptr, no_gradient}; }

}  // namespace nnasm
