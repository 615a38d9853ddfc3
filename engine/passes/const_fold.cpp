// Constant folding: an instruction whose inputs are all constants runs once, here, on its
// reference kernel, and its result becomes a new constant (values inline, so the listing shows
// them). Results of more than MAX_FOLD_ELEMENTS elements, observable results and in-place
// instructions are left alone.
#include <fmt/format.h>

#include "engine/context.h"
#include "engine/init.h"
#include "engine/passes/pass.h"
#include "engine/passes/uses.h"
#include "ops/op.h"

namespace nnasm {

namespace {

constexpr int64_t MAX_FOLD_ELEMENTS = 1 << 16;

// Runs `ins` on its reference kernel over copies of its constant inputs; the outputs' values.
Result<std::vector<std::vector<double>>> evaluate(const Program& p, const Instruction& ins) {
  // A program over descriptors alone folds as a fresh context would draw.
  const Context* ctx = Context::of(p);
  const uint64_t seed = ctx ? ctx->seed() : Context::DEFAULT_SEED;
  std::vector<Tensor> in(ins.in.size()), out(ins.out.size());
  std::vector<const void*> in_ptr;
  std::vector<void*> out_ptr;
  std::vector<TensorType> in_type, out_type;
  for (size_t k = 0; k < ins.in.size(); ++k) {
    in[k].desc = p.desc(ins.in[k]);
    if (!in[k].allocate()) return Status::error("out of memory");
    init_tensor(in[k], seed);
    in_ptr.push_back(in[k].data.data());
    in_type.push_back(in[k].desc.type);
  }
  for (size_t k = 0; k < ins.out.size(); ++k) {
    out[k].desc = p.desc(ins.out[k]);
    if (!out[k].allocate()) return Status::error("out of memory");
    out_ptr.push_back(out[k].data.data());
    out_type.push_back(out[k].desc.type);
  }
  const OpHooks& hooks = op_hooks(ins.op);
  AlignedBuffer scratch;
  if (hooks.scratch) {
    const size_t bytes = hooks.scratch(ins, in_type.data(), out_type.data());
    if (bytes) scratch = AlignedBuffer(bytes);
  }
  RunState state;
  state.seed = seed;
  KernelArgs a{in_ptr.data(),  out_ptr.data(),         in_type.data(),  out_type.data(), &ins,
               static_cast<int>(in_ptr.size()), static_cast<int>(out_ptr.size()), scratch.data(), &state, scratch.data()};
  hooks.ref(&a);
  std::vector<std::vector<double>> values;
  for (Tensor& t : out) {
    std::vector<double> v(t.numel());
    for (int64_t j = 0; j < t.numel(); ++j) v[j] = t.desc.type.dtype == DType::F32 ? t.f32()[j] : t.i32()[j];
    values.push_back(std::move(v));
  }
  return values;
}

}  // namespace

Result<int> pass_const_fold(Program& p) {
  const Uses u(p);
  std::vector<Instruction> code = p.code();
  std::vector<bool> drop(code.size(), false);
  int n = 0;
  for (size_t i = 0; i < code.size(); ++i) {
    const Instruction& ins = code[i];
    if ((ins.info().flags & (OPF_INPLACE | OPF_MODE | OPF_RANDOM | OPF_UPDATES_STATE)) ||
        ins.info().category == OpCategory::OPTIMIZER)
      continue;
    // Reduced-precision operands stay as written: folding DEQUANTIZE of a const i8 weight would
    // undo the quantization (and the fold reads results as f32 or i32).
    bool foldable = true;
    for (TensorId id : ins.in) foldable = foldable && p.desc(id).role == Role::CONST && !dtype_reduced(p.desc(id).type.dtype);
    for (TensorId id : ins.out)
      foldable = foldable && !u.observable(id) && p.desc(id).type.shape.numel() <= MAX_FOLD_ELEMENTS &&
                 !dtype_reduced(p.desc(id).type.dtype);
    if (!foldable) continue;
    Result<std::vector<std::vector<double>>> values = evaluate(p, ins);
    if (!values) return values.status().with_prefix(fmt::format("folding {}: ", describe(p, ins)));
    for (size_t k = 0; k < ins.out.size(); ++k) {
      TensorDesc d;
      d.name = p.fresh_name(p.desc(ins.out[k]).name + ".k");
      d.type = p.desc(ins.out[k]).type;
      d.role = Role::CONST;
      d.values = std::move(values.value()[k]);
      Result<TensorId> c = p.declare(std::move(d));
      if (!c) return c.status();
      replace_reads(code, i + 1, ins.out[k], c.value(),
                    fmt::format("reads @{}: {} folded at optimization", p.desc(c.value()).name, describe(p, ins)));
    }
    drop[i] = true;
    ++n;
  }
  return commit(p, std::move(code), drop, n);
}

}  // namespace nnasm
