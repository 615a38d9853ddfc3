// `nnasm info [FILE]`: what the machine offers the JIT and what a listing holds — the questions a
// user asks before timing or shipping a model.
#include <fmt/format.h>

#include "engine/context.h"
#include "serialize/listing.h"
#include "shell/cli/cli.h"

namespace nnasm {

namespace {

std::string count_of(const Program& p, Role role, int64_t* elements) {
  int n = 0;
  *elements = 0;
  for (TensorId id : p.tensors())
    if (p.desc(id).role == role) {
      ++n;
      *elements += p.desc(id).type.shape.numel();
    }
  return fmt::format("{}", n);
}

std::string list(const Program& p, const std::vector<TensorId>& ids) {
  std::string s;
  for (TensorId id : ids) {
    const TensorDesc& d = p.desc(id);
    s += fmt::format("{}{}{} {}", s.empty() ? "" : ", ", d.sigil(), d.name, d.type.str());
  }
  return s.empty() ? "none" : s;
}

}  // namespace

Status cmd_info(const InfoOptions& o) {
  Context ctx;
  const CpuInfo& cpu = cpu_info();
  const JitConfig& jit = ctx.jit();
  fmt::print("cpu:      {} ({})\n", cpu.vendor, cpu.features.empty() ? "no vector features" : cpu.features);
  fmt::print("isa:      {} (best {}, cap {}{})\n", isa_name(jit.isa()), isa_name(cpu.best), isa_name(jit.cap),
             jit.enabled ? "" : ", JIT off: NNASM_JIT=0");
  if (o.file.empty()) return Status::ok();

  Program p(ctx);
  NNASM_TRY(program_parse_file(o.file, &p));
  int64_t param_elems = 0, state_elems = 0, unused = 0;
  const std::string params = count_of(p, Role::PARAM, &param_elems);
  const std::string states = count_of(p, Role::STATE, &state_elems);
  fmt::print("file:     {} ({} mode)\n", o.file, p.training() ? "training" : "inference");
  fmt::print("inputs:   {}\n", list(p, p.inputs()));
  fmt::print("outputs:  {}\n", list(p, p.outputs()));
  fmt::print("params:   {} tensors, {} values ({:.1f} KiB)\n", params, param_elems, param_elems * 4 / 1024.0);
  fmt::print("state:    {} tensors, {} values\n", states, state_elems);
  fmt::print("consts:   {} tensors\n", count_of(p, Role::CONST, &unused));
  for (Section s : {Section::FORWARD, Section::BACKWARD, Section::UPDATE}) {
    const auto [b, e] = p.section_range(s);
    fmt::print("{:<9} {} instructions\n", fmt::format("{}:", section_name(s)), e - b);
  }
  return Status::ok();
}

}  // namespace nnasm
