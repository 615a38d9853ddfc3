// The ONNX op types the importer knows, each with the function that maps a node onto
// instructions and/or the one that computes it at import time (folding), and the mapping
// functions themselves, one file per family:
//   onnx_ops_elementwise.cpp  activations, arithmetic (numpy broadcasting), Clip, Pow, PRelu
//   onnx_ops_linalg.cpp       Gemm, MatMul, Conv, ConvTranspose, Dropout
//   onnx_ops_norm.cpp         BatchNormalization, LayerNormalization, InstanceNormalization, MVN, LRN
//   onnx_ops_logic.cpp        comparisons, Not/And/Or/Xor, Where, IsNaN, IsInf (BOOL as f32 0/1)
//   onnx_ops_loss.cpp         SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss
//   onnx_ops_recurrent.cpp    LSTM, GRU, RNN
//   onnx_ops_pool.cpp         MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool
//   onnx_ops_reduce.cpp       Reduce*, Softmax, LogSoftmax, ArgMax, ArgMin, Hardmax
//   onnx_ops_shape.cpp        Reshape, Flatten, Transpose, Concat, Slice, Squeeze, Pad, Split,
//                             Gather, GatherElements, Trilu, ...
//   onnx_ops_resize.cpp       Upsample, Resize (nearest, whole-number scales)
//   onnx_ops_quant.cpp        QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear,
//                             MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv
//   onnx_fuse_quant.cpp       quantize_dynamic's MatMul chains as one LINEAR_I8; quantize_static's
//                             QDQ MatMul / Gemm / Conv chains as LINEAR_I8 / CONV2D_I8 x_scale=given
//   onnx_fold.cpp             Shape, Gather, Constant, Cast, Range, ... on values known at import
// The table is in onnx_ops.cpp.
#pragma once
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "serialize/onnx/onnx_host.h"
#include "serialize/onnx/onnx_lower.h"

namespace nnasm {

using OnnxMapFn = Status (*)(NodeLowering& n);

struct OnnxOp {
  const char* type;
  // Maps the node onto instructions; null for ops only ever folded.
  OnnxMapFn map;
  // Computes the outputs at import time, when every input is known then and none is a weight
  // (which must stay a param); null for ops never folded.
  OnnxMapFn fold;
  // Fold even when inputs are computed at run time: the op reads only their shapes (Shape, Size).
  bool reads_shapes_only = false;
};

// The entry for op type `type` of the default domain, or null.
const OnnxOp* onnx_find_op(std::string_view type);
const std::vector<OnnxOp>& onnx_ops();

// onnx_ops_elementwise.cpp
Status map_unary(NodeLowering& n);        // Relu, Sigmoid, Tanh, Exp, Log, Sqrt, Abs, Neg, LeakyRelu, Elu, Tan, ...
Status map_calc_unary(NodeLowering& n);   // Selu, Celu, HardSigmoid, HardSwish, Softsign, Softplus, Shrink, Cosh, ...
Status map_binary(NodeLowering& n);       // Add, Sub, Mul, Div
Status map_variadic(NodeLowering& n);     // Max, Min, Sum, Mean
Status map_prelu(NodeLowering& n);
Status map_clip(NodeLowering& n);
Status map_pow(NodeLowering& n);
// onnx_ops_linalg.cpp
Status map_gemm(NodeLowering& n);
Status map_matmul(NodeLowering& n);
Status map_conv(NodeLowering& n);
Status map_conv_transpose(NodeLowering& n);
Status map_dropout(NodeLowering& n);
// numpy.matmul of two tensors (a 1-D operand a row first, a column second, removed after).
Status matmul_of(NodeLowering& n, TensorId a, TensorId b, TensorId* y);
// Conv's ranks: 1-D and 2-D convolutions (input rank 3 or 4), weights of the input's rank.
Status check_conv_ranks(const std::vector<int64_t>& dx, const std::vector<int64_t>& dw);
// Conv of x, w and b (NO_TENSOR: none) with the node's attributes (kernel_shape, strides,
// dilations, group, pads, auto_pad).
Status conv_of(NodeLowering& n, TensorId x, TensorId w, TensorId b, TensorId* y);
// Conv's and the pools' padding per spatial axis, [begins..., ends...], from auto_pad (NOTSET,
// VALID, SAME_UPPER, SAME_LOWER) or pads; strides and dilations within [1, MAX_GEOMETRY], pads
// within [0, MAX_GEOMETRY].
Status spatial_pads(NodeLowering& n, const std::vector<int64_t>& in, const std::vector<int64_t>& kernel,
                    const std::vector<int64_t>& stride, const std::vector<int64_t>& dilation, std::vector<int64_t>* pads);
// 1-D convolutions and pools run as 2-D ones over images of height 1: [N, C, L] → [N, C, 1, L]
// and back.
Status rows_as_images(NodeLowering& n, TensorId x, TensorId* y);
Status images_as_rows(NodeLowering& n, TensorId x, TensorId* y);
// onnx_ops_logic.cpp
Status map_compare(NodeLowering& n);      // Equal, Less, LessOrEqual, Greater, GreaterOrEqual
Status fold_compare(NodeLowering& n);
Status map_logic(NodeLowering& n);        // Not, And, Or, Xor
Status fold_logic(NodeLowering& n);
Status map_where(NodeLowering& n);
Status fold_where(NodeLowering& n);
Status map_is_special(NodeLowering& n);   // IsNaN, IsInf
Status map_one_hot(NodeLowering& n);
// onnx_ops_loss.cpp
Status map_softmax_ce(NodeLowering& n);   // SoftmaxCrossEntropyLoss
Status map_nll_loss(NodeLowering& n);     // NegativeLogLikelihoodLoss
// onnx_ops_pool.cpp
Status map_pool(NodeLowering& n);         // MaxPool, AveragePool
Status map_global_pool(NodeLowering& n);  // GlobalAveragePool, GlobalMaxPool
// onnx_ops_recurrent.cpp
Status map_recurrent(NodeLowering& n);    // LSTM, GRU, RNN
// onnx_ops_reduce.cpp
Status map_reduce(NodeLowering& n);
Status map_softmax(NodeLowering& n);      // Softmax, LogSoftmax
Status map_arg(NodeLowering& n);          // ArgMax, ArgMin
Status map_hardmax(NodeLowering& n);
// One-axis reductions `op` of x over `axes` (descending), keeping dimensions of 1 when `keep`.
Status reduce_chain(NodeLowering& n, Opcode op, TensorId x, const std::vector<int>& axes, bool keep, TensorId* y);
// onnx_ops_norm.cpp
Status map_batchnorm(NodeLowering& n);
Status map_axes_norm(NodeLowering& n);    // LayerNormalization, InstanceNormalization, MeanVarianceNormalization
Status map_lrn(NodeLowering& n);
// onnx_ops_shape.cpp
Status map_identity(NodeLowering& n);
Status fold_identity(NodeLowering& n);
Status map_reshape(NodeLowering& n);      // Reshape, Flatten, Squeeze, Unsqueeze
Status fold_reshape(NodeLowering& n);
Status map_transpose(NodeLowering& n);
Status map_concat(NodeLowering& n);
Status fold_concat(NodeLowering& n);
Status map_slice(NodeLowering& n);
Status fold_slice(NodeLowering& n);
Status map_split(NodeLowering& n);
Status map_gather(NodeLowering& n);       // slices for indices known at import time, else one GATHER
Status map_gather_elements(NodeLowering& n);  // indices known at import time
Status map_gather_nd(NodeLowering& n);        // indices known at import time
Status map_compress(NodeLowering& n);         // condition known at import time
Status map_trilu(NodeLowering& n);
Status map_pad(NodeLowering& n);
Status map_expand(NodeLowering& n);
Status map_tile(NodeLowering& n);
Status map_depth_to_space(NodeLowering& n);  // DepthToSpace, SpaceToDepth
// Records SLICEs of x along each axis whose range is not the whole axis (steps of 1 only; an
// empty range is an error).
Status slice_to(NodeLowering& n, TensorId x, const std::vector<SliceRange>& ranges, TensorId* y);
// onnx_ops_resize.cpp
Status map_resize(NodeLowering& n);       // Upsample, Resize
// onnx_ops_quant.cpp
Status map_quantize_linear(NodeLowering& n);
Status map_dequantize_linear(NodeLowering& n);
Status map_dynamic_quantize_linear(NodeLowering& n);
Status map_matmul_integer(NodeLowering& n);
Status map_conv_integer(NodeLowering& n);
Status map_qlinear_matmul(NodeLowering& n);
Status map_qlinear_conv(NodeLowering& n);
// x (f32) as `to` (UINT8 or INT8): truncated toward zero as Cast does, then saturated to the
// type's range in an 8-bit tensor (ONNX leaves out-of-range values to the platform).
Status cast_to_8bit(NodeLowering& n, TensorId x, OnnxType to, TensorId* y);
// onnx_fuse_quant.cpp: chains of several nodes lowered as one (the driver skips the others).
// Who reads each value (node, input position), who writes it, and the graph outputs.
struct OnnxReaders {
  std::map<std::string, std::vector<std::pair<size_t, int>>> readers;
  std::map<std::string, size_t> producer;
  std::set<std::string> graph_outputs;
};
OnnxReaders onnx_readers(const OnnxGraph& g);
// A chain of nodes lowered at its last node, `at`, by `map` reading `node` (made up: its inputs
// are the chain's inputs); the nodes in `covered` are left out.
struct OnnxFusion {
  size_t at = 0;
  std::vector<size_t> covered;
  OnnxNode node;
  OnnxMapFn map = nullptr;
};
// At DynamicQuantizeLinear node `dql` (its input known to the lowering): the MatMulInteger
// chains of ONNX Runtime's quantize_dynamic reading it, each as one LINEAR_I8, and whether
// the chains read all of its outputs (then it is left out too).
void match_dynamic_quant_linear(const OnnxGraph& g, size_t dql, const OnnxReaders& r, OnnxLowering& l,
                                std::vector<OnnxFusion>* out, bool* dql_covered);
// At QuantizeLinear node `ql` (its input known to the lowering): the MatMul / Gemm chains of
// ONNX Runtime's static QDQ quantization reading it, each as one LINEAR_I8 x_scale=given, and
// into `covered` the QuantizeLinear and DequantizeLinear nodes those chains account for alone.
void match_static_quant_linear(const OnnxGraph& g, size_t ql, const OnnxReaders& r, OnnxLowering& l,
                               std::vector<OnnxFusion>* out, std::set<size_t>* covered);
// W (i8 or u8 [K, O], or [O, K] with `trans`) less its zero point (one, or one per output; null:
// 0) as i8 values [K, O] in `w`; false where an element does not fit.
bool static_quant_weight(const HostTensor& b, const HostTensor* zp, bool trans, std::vector<int64_t>* w);
// B (i8 or u8 [K, O]) less its zero point (one, or one per column; null: 0) as i8 values in
// `w`; false where an element does not fit.
bool dynamic_quant_weight(const HostTensor& b, const HostTensor* zp, std::vector<int64_t>* w);
// onnx_fold.cpp
Status fold_constant(NodeLowering& n);
Status fold_shape(NodeLowering& n);       // Shape, Size
Status fold_gather(NodeLowering& n);
Status fold_constant_of_shape(NodeLowering& n);
Status fold_range(NodeLowering& n);
Status fold_eye_like(NodeLowering& n);    // from the input's shape alone
Status fold_arith(NodeLowering& n);       // Add, Sub, Mul, Div, Mod, Pow, Neg, Max, Min, Sum at import time
Status fold_cast(NodeLowering& n);        // Cast, CastLike
Status map_cast(NodeLowering& n);

}  // namespace nnasm
