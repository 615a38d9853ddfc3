// Post-training quantization of an inference program: each layer whose weight is a stored f32
// tensor, a dense layer (LINEAR, or MATMUL by a stored matrix) or a convolution (CONV2D, groups
// 1), becomes its reduced-precision form (LINEAR_BF16; the int8 pairs LINEAR_WEIGHTS_I8 /
// LINEAR_I8 and CONV_WEIGHTS_I8 / CONV2D_I8), and its f32 weight leaves the program, so the model
// file and the bytes a run streams shrink. Every layer is measured first on calibration inputs: a layer
// whose output would move too far from its f32 output stays f32, and the report says which layers
// changed, which did not and why. `nnasm quantize` is this function between model_load and
// model_save; docs/quantization.md ("Quantizing a model") describes the criterion.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "isa/program.h"
#include "isa/status.h"

namespace nnasm {

enum class QuantType : uint8_t { BF16, INT8 };
const char* quant_type_name(QuantType t);  // "bf16", "int8"
// "bf16" or "int8" (what --to takes); false for anything else.
bool quant_type_from_name(const std::string& s, QuantType* out);
// The default of QuantizeOptions::max_error for `t` (docs/quantization.md says why): 0.01 for
// bf16, whose rounding alone moves a layer's output by about 0.3%; 0.05 for int8, whose weights
// and per-row activations each add about 1%.
double default_max_error(QuantType t);

// Values for one input of the program, a batch of rows as the program's input holds them except
// for the leading dimension (the number of rows), which may differ from the program's batch.
struct CalibrationInput {
  std::string name;          // the input's name (a leading % is ignored)
  TensorType type;           // dtype f32 or i32, as the input's
  std::vector<float> f32;    // type.shape.numel() values when f32
  std::vector<int32_t> i32;  // ... when i32
};

struct QuantizeOptions {
  QuantType to = QuantType::BF16;
  // Inputs to measure each layer's error on: every input of the program, all with the same number
  // of rows. Empty: a synthetic batch (QuantizeReport::synthetic; docs/quantization.md).
  std::vector<CalibrationInput> calibration;
  // A layer whose relative error ||y_q − y||₂ / ||y||₂ exceeds this stays f32; < 0: the type's
  // default_max_error.
  double max_error = -1;
  // Layers forced to stay f32, by the name of their weight or of their output (sigil optional).
  std::vector<std::string> keep;
};

// The number of rows of the synthetic calibration batch, and the seed of its values: f32 inputs
// hold standard normal values (so x·W's error is the weight's own rounding error seen from
// every direction alike), i32 inputs zeros.
constexpr int64_t SYNTHETIC_ROWS = 64;
constexpr uint64_t SYNTHETIC_SEED = 0x71756e74;

// What quantize_program decided about one layer: an instruction that reads a stored f32 weight.
struct QuantizedLayer {
  std::string op;      // the instruction's mnemonic: "LINEAR", "CONV2D", ...
  std::string output;  // the name of its output
  std::string weight;  // the name of its weight
  Shape shape;         // the weight's shape
  std::string chosen;  // "bf16", "int8" or "f32"
  double error = -1;   // the measured relative error of the reduced form; < 0 when not measured
  std::string reason;  // why it stays f32 ("kept by --keep", "above the bound 0.01", ...); empty otherwise
};

struct QuantizeReport {
  std::vector<QuantizedLayer> layers;  // in program order
  QuantType to = QuantType::BF16;
  double max_error = 0;           // the bound used
  int64_t calibration_rows = 0;   // rows each layer was measured on
  bool synthetic = false;         // measured on the synthetic batch (no calibration given)
  uint64_t weight_bytes_before = 0, weight_bytes_after = 0;  // values of params, consts and state
  // One line per layer ("LINEAR %h1 @fc1.w f32[784,256] -> bf16, error 0.0021") and the totals.
  std::string str() const;
};

// The int8 form of an f32 weight W [k, o] (row-major, input-major as LINEAR's): per output column
// a symmetric scale s_o = max_k |W[k, o]| / 127 (1 for a column of zeros), and
// w[k, o] = clamp(round_half_even(W[k, o] / s_o), −127, 127). −128 is never used, so that a
// product's negation stays in range.
struct WeightsI8 {
  std::vector<int8_t> w;     // [k, o]
  std::vector<float> scale;  // [o]
};
WeightsI8 quantize_weights_i8(const float* w, int64_t k, int64_t o);

// Writes into `out` (an empty program bound to a Context of its own) `in` (finished, an inference
// program in a Context) with its layers quantized as `o` says, and returns what was
// decided. Runs `in` once on the calibration inputs (preparing a copy in `in`'s context, which
// initializes params that have no values yet; the copy's own tensors leave the context again),
// then each candidate layer alone in reduced precision on the same inputs. The new weights are
// named after the old ones: @W.bf16; for int8 @W.i8 and its scales @W.scale. Tensors otherwise
// keep their names; values are copied bit for bit; `out` takes `in`'s seed and mode.
// Errors: `in` has a backward or update section (the message says to run `nnasm export
// --inference` first), a calibration input unknown, missing, given twice, of another dtype or
// row shape, or with differing row counts; a --keep name that names no layer; a bad max_error; a
// reduced form this build lacks. On error `out` holds a partial program and should be discarded.
// Allocates; `in`'s values are not changed. Not thread-safe with other uses of either context.
Result<QuantizeReport> quantize_program(const Program& in, const QuantizeOptions& o, Program* out);

}  // namespace nnasm
