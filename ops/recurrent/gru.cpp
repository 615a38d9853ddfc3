// GRU: a gated recurrent unit layer over a whole sequence, ONNX's GRU (opset 7–22) with its default
// activations; PyTorch's nn.GRU is linear_before_reset=1 with its gates reordered.
//
// Computes   for each direction and each sequence b of the batch, from h = h0[b] (zeros without
//            initial), for the steps t of its length in its direction's order (gates z, r, h):
//              z = σ(x_t·Wzᵀ + Wbz + h·Rzᵀ + Rbz),  r = σ(x_t·Wrᵀ + Wbr + h·Rrᵀ + Rbr)
//              h̃ = tanh(x_t·Whᵀ + Wbh + (r⊙h)·Rhᵀ + Rbh)      linear_before_reset=0
//              h̃ = tanh(x_t·Whᵀ + Wbh + r⊙(h·Rhᵀ + Rbh))      linear_before_reset=1
//              h = (1 − z)⊙h̃ + z⊙h
//            y[t] = h; y is 0 past the sequence's length; the last h is the state after the
//            sequence's last step (h0 for a length of 0).
// Inputs     x f32[T,N,I] ([N,T,I] with batch_first); W f32[D,3H,I]; R f32[D,3H,H];
//            B f32[D,6H] (Wb, then Rb); with initial=1, h0 f32[D,N,H] ([N,D,H] with
//            batch_first); with lens=1, i32[N], each sequence's length. D = 2 when
//            bidirectional (direction 1 runs from the last step), else 1.
// Outputs    y f32[T,D,N,H] ([N,T,D,H] with batch_first); the last h f32[D,N,H] ([N,D,H]).
// Immediates direction, batch_first, initial, lens (as LSTM's); linear_before_reset.
// Gradient   GRU_BWD (ops/recurrent/rnn_bwd.cpp, through rnn_grad): backpropagation through
//            time to x, W, R, B and h0, zeros fed for the outputs no gradient flows into;
//            none with respect to lens (integers: a zero gradient).
// Kernels    reference (ops/recurrent/recurrent.cpp): each sequence on its own, float dot
//            products. JIT (ops/recurrent/recurrent_jit.cpp), AVX-512 and AVX2+FMA,
//            `f32_gru__avx512` / `f32_gru__avx2`: as LSTM's; with linear_before_reset=0 each step
//            takes two passes over the hidden blocks (z and r⊙h for all of them, then the
//            candidate's product of r⊙h). One part, or a part a direction when bidirectional.
// Notes      A length outside [0, T] counts as 0 or T (as LSTM's).
#include "ops/recurrent/recurrent.h"

namespace nnasm {

OpHooks op_hooks_GRU() { return OpHooks{rnn_shape, rnn_ref, rnn_scratch, rnn_grad, rnn_jit, rnn_jit_parts}; }

}  // namespace nnasm
