// export_inference: a backward slice of the derive and forward sections from the chosen outputs,
// re-recorded into a fresh program (so every instruction is validated again, as a loaded listing
// would be) and given the trained values by name through copy_values.
#include "serialize/export.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "engine/context.h"
#include "serialize/model_file.h"

namespace nnasm {

std::vector<TensorId> trained_losses(const Program& p) {
  std::vector<TensorId> losses;
  const auto [b, e] = p.section_range(Section::BACKWARD);
  for (size_t i = b; i < e; ++i) {
    const Instruction& ins = p.code()[i];
    if (ins.op != Opcode::FILL || ins.in.size() != 1 || !p.desc(ins.in[0]).is_output) continue;
    if (std::find(losses.begin(), losses.end(), ins.in[0]) == losses.end()) losses.push_back(ins.in[0]);
  }
  return losses;
}

Status export_inference(const Program& trained, const ExportOptions& o, Program* out) {
  if (!Context::of(trained) || !Context::of(*out))
    return Status::error("export_inference: both programs must live in a Context (they hold values)");
  if (!out->tensors().empty()) return Status::error("export_inference: the output program must be empty");
  if (!trained.has_section(Section::BACKWARD) && !trained.has_section(Section::UPDATE))
    return Status::error("already an inference model (it has no backward or update section): nothing to export");

  const auto [fwd_begin, fwd_end] = trained.section_range(Section::FORWARD);
  const auto [derive_begin, derive_end] = trained.section_range(Section::DERIVE);
  std::unordered_set<TensorId> forward_defined;
  for (size_t i = derive_begin; i < fwd_end; ++i)
    if (i < derive_end || i >= fwd_begin) forward_defined.insert(trained.code()[i].out.begin(), trained.code()[i].out.end());

  const std::vector<TensorId> losses = trained_losses(trained);
  std::vector<TensorId> chosen;
  if (o.outputs.empty()) {
    for (TensorId id : trained.outputs())
      if (std::find(losses.begin(), losses.end(), id) == losses.end() && forward_defined.count(id)) chosen.push_back(id);
    if (chosen.empty())
      return Status::errorf("no forward output besides the loss {}: name the tensor to keep with --output NAME "
                            "(e.g. the logits), or record it as an output",
                            losses.empty() ? std::string("(none found)") : "%" + trained.desc(losses[0]).name);
  }
  for (const std::string& raw : o.outputs) {
    const std::string name = !raw.empty() && (raw[0] == '%' || raw[0] == '@') ? raw.substr(1) : raw;
    const TensorId id = trained.find(name);
    if (id == NO_TENSOR) {
      std::string outs;
      for (TensorId t : trained.outputs()) outs += (outs.empty() ? "%" : ", %") + trained.desc(t).name;
      return Status::errorf("--output {}: no tensor named '{}' (the outputs: {})", raw, name, outs.empty() ? "none" : outs);
    }
    if (!forward_defined.count(id))
      return Status::errorf("--output {}: %{} is not computed by the forward section (an input, param or gradient)",
                            raw, name);
    if (std::find(chosen.begin(), chosen.end(), id) == chosen.end()) chosen.push_back(id);
  }

  // Walk back from the outputs. An instruction that writes a param or state in the forward
  // section carries it to the next run (a recurrent layer's h): it stays, whatever reads it.
  std::unordered_set<TensorId> needed(chosen.begin(), chosen.end());
  std::vector<char> keep(trained.code().size(), 0);
  for (size_t i = fwd_end; i-- > derive_begin;) {
    if (i >= derive_end && i < fwd_begin) continue;
    const Instruction& ins = trained.code()[i];
    bool kept = false;
    for (TensorId t : ins.out) {
      const Role r = trained.desc(t).role;
      kept = kept || needed.count(t) || (ins.section == Section::FORWARD && (r == Role::PARAM || r == Role::STATE));
    }
    if (!kept) continue;
    keep[i] = 1;
    needed.insert(ins.in.begin(), ins.in.end());
    needed.insert(ins.out.begin(), ins.out.end());
  }

  std::unordered_map<TensorId, TensorId> to_new;
  for (TensorId id : trained.tensors()) {
    if (!needed.count(id)) continue;
    TensorDesc d = trained.desc(id);
    d.id = NO_TENSOR;
    d.is_output = std::find(chosen.begin(), chosen.end(), id) != chosen.end();
    const bool up_front = d.declared_up_front();
    Result<TensorId> nid = out->declare(std::move(d), up_front);
    if (!nid) return nid.status();
    to_new[id] = nid.value();
  }
  for (size_t i = 0; i < keep.size(); ++i) {
    if (!keep[i]) continue;
    Instruction ins = trained.code()[i];
    for (TensorId& t : ins.in) t = to_new.at(t);
    for (TensorId& t : ins.out) t = to_new.at(t);
    NNASM_TRY(out->append(std::move(ins)));
  }
  Context::of(*out)->set_seed(Context::of(trained)->seed());
  out->set_training(false);
  NNASM_TRY(out->finish());
  return copy_values(trained, out, nullptr);
}

}  // namespace nnasm
