// The table of ONNX op types the importer maps (onnx_ops.h): which function records a node's
// instructions and which computes it at import time. An op type missing here is "not supported".
#include <algorithm>

#include "serialize/onnx/onnx_ops.h"

namespace nnasm {

const std::vector<OnnxOp>& onnx_ops() {
  static const std::vector<OnnxOp> table = {
      {"Abs", map_unary, nullptr},
      {"Add", map_binary, fold_arith},
      {"AveragePool", map_pool, nullptr},
      {"BatchNormalization", map_batchnorm, nullptr},
      {"Cast", map_cast, fold_cast},
      {"CastLike", map_cast, fold_cast},
      {"Ceil", map_unary, nullptr},
      {"Celu", map_calc_unary, nullptr},
      {"Clip", map_clip, nullptr},
      {"Concat", map_concat, fold_concat},
      {"Constant", nullptr, fold_constant},
      {"ConstantOfShape", nullptr, fold_constant_of_shape},
      {"Conv", map_conv, nullptr},
      {"ConvTranspose", map_conv_transpose, nullptr},
      {"Cos", map_unary, nullptr},
      {"DepthToSpace", map_depth_to_space, nullptr},
      {"Div", map_binary, fold_arith},
      {"Dropout", map_dropout, nullptr},
      {"Elu", map_unary, nullptr},
      {"Erf", map_unary, nullptr},
      {"Exp", map_unary, nullptr},
      {"Expand", map_expand, nullptr},
      {"Flatten", map_reshape, fold_reshape},
      {"Floor", map_unary, nullptr},
      {"Gather", map_gather, fold_gather},
      {"Gemm", map_gemm, nullptr},
      {"GlobalAveragePool", map_global_pool, nullptr},
      {"GlobalMaxPool", map_global_pool, nullptr},
      {"HardSigmoid", map_calc_unary, nullptr},
      {"HardSwish", map_calc_unary, nullptr},
      {"Identity", map_identity, fold_identity},
      {"InstanceNormalization", map_axes_norm, nullptr},
      {"LRN", map_lrn, nullptr},
      {"LayerNormalization", map_axes_norm, nullptr},
      {"LeakyRelu", map_unary, nullptr},
      {"Log", map_unary, nullptr},
      {"LogSoftmax", map_softmax, nullptr},
      {"MatMul", map_matmul, nullptr},
      {"Max", map_variadic, fold_arith},
      {"MaxPool", map_pool, nullptr},
      {"Mean", map_variadic, nullptr},
      {"MeanVarianceNormalization", map_axes_norm, nullptr},
      {"Min", map_variadic, fold_arith},
      {"Mod", nullptr, fold_arith},
      {"Mul", map_binary, fold_arith},
      {"Neg", map_unary, fold_arith},
      {"PRelu", map_prelu, nullptr},
      {"Pad", map_pad, nullptr},
      {"Pow", map_pow, fold_arith},
      {"Range", nullptr, fold_range},
      {"Reciprocal", map_calc_unary, nullptr},
      {"ReduceL1", map_reduce, nullptr},
      {"ReduceL2", map_reduce, nullptr},
      {"ReduceLogSum", map_reduce, nullptr},
      {"ReduceLogSumExp", map_reduce, nullptr},
      {"ReduceMax", map_reduce, nullptr},
      {"ReduceMean", map_reduce, nullptr},
      {"ReduceMin", map_reduce, nullptr},
      {"ReduceSum", map_reduce, nullptr},
      {"ReduceSumSquare", map_reduce, nullptr},
      {"Relu", map_unary, nullptr},
      {"Reshape", map_reshape, fold_reshape},
      {"Resize", map_resize, nullptr},
      {"Selu", map_calc_unary, nullptr},
      {"Shape", nullptr, fold_shape, true},
      {"Sigmoid", map_unary, nullptr},
      {"Sign", map_unary, nullptr},
      {"Sin", map_unary, nullptr},
      {"Size", nullptr, fold_shape, true},
      {"Slice", map_slice, fold_slice},
      {"Softmax", map_softmax, nullptr},
      {"SoftmaxCrossEntropyLoss", map_softmax_ce, nullptr},
      {"Softplus", map_calc_unary, nullptr},
      {"Softsign", map_calc_unary, nullptr},
      {"SpaceToDepth", map_depth_to_space, nullptr},
      {"Split", map_split, nullptr},
      {"Sqrt", map_unary, nullptr},
      {"Squeeze", map_reshape, fold_reshape},
      {"Sub", map_binary, fold_arith},
      {"Sum", map_variadic, fold_arith},
      {"Tanh", map_unary, nullptr},
      {"ThresholdedRelu", map_calc_unary, nullptr},
      {"Tile", map_tile, nullptr},
      {"Transpose", map_transpose, nullptr},
      {"Unsqueeze", map_reshape, fold_reshape},
      {"Upsample", map_resize, nullptr},
  };
  return table;
}

const OnnxOp* onnx_find_op(std::string_view type) {
  const std::vector<OnnxOp>& t = onnx_ops();
  auto it = std::lower_bound(t.begin(), t.end(), type, [](const OnnxOp& o, std::string_view s) { return o.type < s; });
  return it != t.end() && it->type == type ? &*it : nullptr;
}

}  // namespace nnasm
