// Between the flow importer (flow_import.cpp, which walks a function and makes tensors) and its
// table of operation mappings (flow_ops.cpp, which knows what each Myelin operation type means):
// what a mapping sees of the operation it lowers, and the table's entry point. Internal to
// serialize/flow/.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "isa/instruction.h"
#include "isa/status.h"
#include "serialize/flow/flow.h"

namespace nnasm {

class FlowImporter;  // flow_import.cpp

// One operation being lowered. A mapping reads its inputs and attributes, appends intermediate
// instructions with emit() and ends with finish() (or alias()); any error it returns becomes the
// operation's line in the import report.
class FlowOpContext {
 public:
  FlowOpContext(FlowImporter& imp, const FlowOperation& op) : imp_(imp), op_(op) {}

  const FlowOperation& op() const { return op_; }
  size_t n_inputs() const { return op_.inputs.size(); }
  // An error unless the operation has `lo` to `hi` inputs.
  Status expect_inputs(size_t lo, size_t hi) const;
  Status expect_inputs(size_t n) const { return expect_inputs(n, n); }
  // The tensors for inputs 0 .. n-1, each made on first use (a constant, param or input of the
  // program); the error names the input that has none.
  Status inputs(size_t n, std::vector<TensorId>* out);
  // Input k as a list of integers (an axis, a shape, a permutation): a variable with int32 or
  // int64 data.
  Status input_ints(size_t k, std::vector<int64_t>* out) const;
  const TensorType& type(TensorId id) const;
  // The file's shape of the operation's output, the batch size put in for -1; false when the file
  // gives none (no element type, or rank 0, which Myelin's exporters also write for "unknown").
  bool output_shape(Shape* s) const;

  // Attribute `key` as Myelin reads it: a bool is true for "1", "T" or "true"; an integer must be
  // one; an integer list is "[1,0]" or "1,0". Absent: the default (or `found` false).
  bool attr_bool(const std::string& key) const;
  Status attr_int(const std::string& key, int64_t def, int64_t* out) const;
  Status attr_ints(const std::string& key, bool* found, std::vector<int64_t>* out) const;

  // Appends `ins` (its outputs are made here) as an intermediate step of the operation; returns
  // its output.
  Result<TensorId> emit(Instruction ins);
  // Appends `ins` as the operation's result: its output is the operation's output variable, named
  // after it, and must have the type the file gives that variable (when it gives one).
  Status finish(Instruction ins);
  // The operation's output is `id` itself, no instruction needed (Reference).
  Status alias(TensorId id);
  // The variable index `name` resolves to (an attribute naming a variable), or FLOW_NONE.
  size_t find_var(const std::string& name) const;
  // The tensor for variable `v`, as input() makes it.
  Result<TensorId> var_tensor(size_t v);

 private:
  FlowImporter& imp_;
  const FlowOperation& op_;
};

// Lowers c.op() by its type: the error "not supported" for a type without a mapping.
Status flow_lower(FlowOpContext& c);

// The variables an operation reads besides its inputs (Reference's "var" attribute), so that the
// importer orders it after whatever computes them.
std::vector<size_t> flow_extra_reads(const Flow& flow, const FlowOperation& op);

}  // namespace nnasm
