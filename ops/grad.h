// How an op's backward rule speaks: through a GradBuilder, which appends instructions to the
// program's backward: section — ordinary instructions, printable and run by the same executor.
// Rules use forward ops wherever that costs nothing; a *_BWD opcode exists only where a fused
// kernel pays.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "isa/program.h"

namespace nnasm {

class GradBuilder {
 public:
  explicit GradBuilder(Program& p) : p_(&p) {}

  // Appends `op` on `in` with the given immediates (others at defaults) to the backward section;
  // returns its first output. After the first error every call returns NO_TENSOR and status()
  // keeps that error.
  TensorId emit(Opcode op, std::vector<TensorId> in, const std::vector<std::pair<const char*, Imm>>& imm = {});
  // The same for an op with several outputs: all of them (empty after an error).
  std::vector<TensorId> emit_all(Opcode op, std::vector<TensorId> in,
                                 const std::vector<std::pair<const char*, Imm>>& imm = {});

  // Common shapes of gradient code.
  TensorId scale(TensorId x, double alpha);            // x itself when alpha is 1
  TensorId reshape(TensorId x, const Shape& s);        // x itself when already shaped so
  TensorId sum_to(TensorId g, const Shape& target);    // undoes broadcasting: sums stretched dims
  TensorId expand(TensorId x, const Shape& s);         // x itself when already shaped so
  TensorId constant(float value);                      // a new f32[] CONST holding value

  const TensorType& type(TensorId id) const { return p_->desc(id).type; }
  Program& program() const { return *p_; }
  const Status& status() const { return status_; }

 private:
  Program* p_;
  Status status_;
};

// dy[k]: gradient flowing into output k (NO_TENSOR if none). need[k]: whether input k's gradient
// is wanted. Fills dx[k] (pre-sized, NO_TENSOR) for each needed input; leaving one NO_TENSOR means
// a zero gradient. Errors name the reason (e.g. "no gradient with respect to the labels").
using GradFn = Status (*)(GradBuilder& b, const Instruction& ins, const std::vector<TensorId>& dy,
                          const std::vector<bool>& need, std::vector<TensorId>* dx);

// The rule of ops whose output does not depend on their inputs' values (FILL, STEP): all zero.
Status no_gradient(GradBuilder& b, const Instruction& ins, const std::vector<TensorId>& dy,
                   const std::vector<bool>& need, std::vector<TensorId>* dx);

}  // namespace nnasm
