// `nnasm quantize MODEL --to bf16|int8 [--calibrate NAME=data.npy]... [--max-error E] [--keep
// TENSOR]... -o OUT.nnm`: an inference model with its dense layers in reduced precision
// (engine/quantize.h: quantize_program), the per-layer report and the sizes before and after on
// stdout, OUT written atomically.
#include <fmt/format.h>

#include "engine/quantize.h"
#include "serialize/atomic_file.h"
#include "serialize/model_file.h"
#include "shell/cli/cli.h"

namespace nnasm {

Status cmd_quantize(const QuantizeCmdOptions& o) {
  QuantizeOptions qo;
  if (!quant_type_from_name(o.to, &qo.to))
    return Status::errorf("nnasm: error: quantize: --to {}: expected bf16 or int8", o.to);
  qo.max_error = o.max_error;
  qo.keep = o.keep;
  for (const std::string& arg : o.calibrate) {
    Binding b;
    NNASM_TRY(parse_binding(arg, "--calibrate", "%", &b));
    NpyArray a;
    Status s = npy_read(b.path, &a);
    if (!s) return Status::errorf("nnasm: error: --calibrate {}: {}", b.name, s.message());
    if (a.type.dtype != DType::F32 && a.type.dtype != DType::I32)
      return Status::errorf("nnasm: error: --calibrate {}: {} holds {}; calibration values are f32 (or i32 for an "
                            "i32 input)", b.name, b.path, a.type.str());
    qo.calibration.push_back(CalibrationInput{b.name, a.type, std::move(a.f32), std::move(a.i32)});
  }
  Context in_ctx;
  Program in(in_ctx);
  NNASM_TRY(load_program(o.file, &in));
  const std::string before = model_encode(in);
  Context ctx;
  Program out(ctx);
  Result<QuantizeReport> rep = quantize_program(in, qo, &out);
  if (!rep) return rep.status().with_prefix(fmt::format("nnasm: error: {}: ", o.file));
  const std::string after = model_encode(out);
  NNASM_TRY(write_file_atomic(o.out, after));
  fmt::print("{}", rep->str());
  fmt::print("model file: {} bytes -> {} bytes ({:.1f}%)\n", before.size(), after.size(),
             100.0 * static_cast<double>(after.size()) / static_cast<double>(before.size()));
  note("{}: {} of {}", o.out, quant_type_name(qo.to), o.file);
  return Status::ok();
}

}  // namespace nnasm
