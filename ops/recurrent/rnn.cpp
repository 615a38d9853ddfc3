// RNN: a simple (Elman) recurrent layer over a whole sequence, ONNX's RNN (opset 7–22) and
// PyTorch's nn.RNN, with tanh or relu.
//
// Computes   for each direction and each sequence b of the batch, from h = h0[b] (zeros without
//            initial), for the steps t of its length in its direction's order:
//              h = act(x_t·Wᵀ + Wb + h·Rᵀ + Rb)
//            y[t] = h; y is 0 past the sequence's length; the last h is the state after the
//            sequence's last step (h0 for a length of 0).
// Inputs     x f32[T,N,I] ([N,T,I] with batch_first); W f32[D,H,I]; R f32[D,H,H]; B f32[D,2H]
//            (Wb, then Rb); with initial=1, h0 f32[D,N,H] ([N,D,H] with batch_first); with
//            lens=1, i32[N], each sequence's length. D = 2 when bidirectional.
// Outputs    y f32[T,D,N,H] ([N,T,D,H] with batch_first); the last h f32[D,N,H] ([N,D,H]).
// Immediates direction, batch_first, initial, lens (as LSTM's); activation: tanh (ONNX's default)
//            or relu.
// Gradient   RNN_BWD (ops/recurrent/rnn_bwd.cpp, through rnn_grad): backpropagation through
//            time to x, W, R, B and h0, zeros fed for the outputs no gradient flows into;
//            none with respect to lens (integers: a zero gradient).
// Kernels    reference (ops/recurrent/recurrent.cpp): each sequence on its own, float dot
//            products. JIT (ops/recurrent/recurrent_jit.cpp), AVX-512 and AVX2+FMA,
//            `f32_rnn__avx512` / `f32_rnn__avx2`: as LSTM's, tanh or relu fused. One part, or a
//            part a direction when bidirectional.
// Notes      A length outside [0, T] counts as 0 or T (as LSTM's).
#include "ops/recurrent/recurrent.h"

namespace nnasm {

OpHooks op_hooks_RNN() { return OpHooks{rnn_shape, rnn_ref, rnn_scratch, rnn_grad, rnn_jit, rnn_jit_parts}; }

}  // namespace nnasm
