// LSTM: a long short-term memory layer over a whole sequence, ONNX's LSTM (opset 7–22) with its
// default activations.
//
// Computes   for each direction and each sequence b of the batch, from h = h0[b] (zeros without
//            initial) and c = c0[b], for the steps t of its length in its direction's order:
//              a = x_t·Wᵀ + Wb + h·Rᵀ + Rb                (4H gates, in ONNX's order i, o, f, c)
//              i = σ(a_i + Pi⊙c), f = σ(a_f + Pf⊙c), c̃ = tanh(a_c)
//              c = f⊙c + i⊙c̃,   o = σ(a_o + Po⊙c),   h = o⊙tanh(c)
//            y[t] = h; y is 0 at the steps past the sequence's length; the last h and c are the
//            state after the last step the sequence has (h0 and c0 for a length of 0).
// Inputs     x f32[T,N,I] ([N,T,I] with batch_first); W f32[D,4H,I]; R f32[D,4H,H];
//            B f32[D,8H] (Wb, then Rb); with initial=1, h0 and c0 f32[D,N,H] ([N,D,H] with
//            batch_first); with lens=1, i32[N], each sequence's length; with peephole=1,
//            P f32[D,3H] (Pi, Po, Pf). D = 2 when bidirectional (direction 1 runs from the last
//            step), else 1.
// Outputs    y f32[T,D,N,H] ([N,T,D,H] with batch_first); the last h and the last c, f32[D,N,H]
//            ([N,D,H] with batch_first).
// Immediates direction (forward, reverse or bidirectional), batch_first (ONNX's layout=1), initial,
//            lens and peephole (which optional inputs follow B, in that order).
// Gradient   LSTM_BWD (ops/recurrent/rnn_bwd.cpp, through rnn_grad): backpropagation through
//            time to x, W, R, B, h0, c0 and P, zeros fed for the outputs no gradient flows into;
//            none with respect to lens (integers: a zero gradient).
// Kernels    reference (ops/recurrent/recurrent.cpp): each sequence on its own, float dot
//            products. JIT (ops/recurrent/recurrent_jit.cpp), AVX-512 and AVX2+FMA,
//            `f32_lstm__avx512` / `f32_lstm__avx2`: the input projection of all T·N rows of x at
//            once, then a generated step per time step, the recurrent product (R read in place, a
//            block of hidden units at a time) with the cell fused (vector σ and tanh, peepholes
//            too); lengths and every layout and direction. Sums in an order fixed by I and H, so
//            one step at a time (the last h and c fed back) gives the bits of the whole run. One
//            part, since each step needs the one before; bidirectional, a part a direction.
// Notes      A length outside [0, T], which shape inference cannot see (lens is data), counts
//            as 0 or T: no kernel reads or writes outside its operands. ONNX's clip,
//            input_forget and other activations are not part of the op (the importer refuses
//            them by name).
#include "ops/recurrent/recurrent.h"

namespace nnasm {

OpHooks op_hooks_LSTM() { return OpHooks{rnn_shape, rnn_ref, rnn_scratch, rnn_grad, rnn_jit, rnn_jit_parts}; }

}  // namespace nnasm
