// The activations LINEAR can fuse (its `act` immediate), named as in the listing. The scalar
// functions are ops/elementwise/activation.h, the JIT snippets jit/act_snippet.h.
#pragma once

namespace nnasm {

// LINEAR's `act` choices, in opcodes.def order. ACT_BWD's `fn` is the same list without NONE
// (fn = act − 1).
enum class Activation { NONE, RELU, LEAKYRELU, ELU, CLIPPED_RELU, SIGMOID, TANH, GELU, GELU_TANH, SWISH };
constexpr int ACTIVATION_COUNT = 10;

inline const char* activation_name(Activation a) {
  static const char* names[ACTIVATION_COUNT] = {"none", "relu", "leakyrelu", "elu",       "clipped_relu",
                                                "sigmoid", "tanh", "gelu",   "gelu_tanh", "swish"};
  return names[static_cast<int>(a)];
}

}  // namespace nnasm
