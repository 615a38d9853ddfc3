// The executor. `prepare` does all the work once: it allocates storage for every tensor of the
// program, fills params and constants, and resolves each instruction to a kernel function and its
// operand pointers. `run` is then a tight loop over that flat array: no map lookups, no
// allocation, no virtual calls.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "engine/status.h"
#include "isa/program.h"
#include "ops/op.h"

namespace nnasm {

class Executor {
 public:
  // Requires: `program` is finished (every tensor defined) and outlives the executor, as does its
  // context. Params that were never initialized are initialized from the context's seed; params
  // already holding values (a second prepare, a loaded model) keep them. Errors: unfinished
  // program, failed allocation (naming the tensor). Allocates; not thread-safe.
  static Result<std::unique_ptr<Executor>> prepare(const Program& program);

  // Runs the forward section. Performs no allocation. Not thread-safe per executor.
  void run() { run(Section::FORWARD); }
  // Runs one section's instructions in order. No allocation.
  void run(Section s);
  // One training step: forward, backward, update. No allocation.
  void train_step();

  // The mode kernels see (dropout, batch norm); starts as the program's mode.
  void set_training(bool t) { state_.training = t; }
  bool training() const { return state_.training; }

  // Storage of a tensor of the program by name; nullptr if there is no such tensor.
  Tensor* tensor(const std::string& name) const;
  const Program& program() const { return *program_; }
  // Name of the kernel instruction `i` runs: "ref", or a generated kernel's name such as
  // "f32_relu__avx512".
  const char* kernel_name(size_t i) const;

 private:
  struct Step {
    KernelFn fn;
    KernelArgs args;
    const char* kernel;  // name, owned by the JitKernel or static
  };
  explicit Executor(const Program& p) : program_(&p) {}
  // Replaces the step's reference kernel by a generated one when the context's JIT has one.
  void choose_kernel(Step* s, const Instruction& ins);

  const Program* program_;
  RunState state_;
  std::vector<Step> steps_;
  std::pair<size_t, size_t> sections_[SECTION_COUNT];  // [begin, end) of each section in steps_
  // Backing arrays that the steps' KernelArgs point into; sized before any pointer is taken.
  std::vector<const void*> in_ptrs_;
  std::vector<void*> out_ptrs_;
  std::vector<TensorType> types_;
  // The generated kernels the steps call; holding them keeps their code alive.
  std::vector<std::shared_ptr<const JitKernel>> jit_;
  // One scratch area shared by all steps (they run one after another), sized for the largest.
  AlignedBuffer scratch_;
};

}  // namespace nnasm
