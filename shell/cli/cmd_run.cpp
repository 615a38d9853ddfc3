// `nnasm run FILE [--in NAME=PATH.npy]... [--out NAME=PATH.npy]... [--seed N] [--train]`: runs a
// listing once on inputs from .npy files, in inference mode unless --train is given. Everything a user can get wrong (names, missing inputs, dtypes,
// shapes, unreadable files) is checked before Executor::prepare allocates the model, so a mistake
// costs nothing and the message names both sides of the mismatch.
#include <cstdio>
#include <cstring>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "engine/executor.h"
#include "serialize/listing.h"
#include "serialize/npy.h"
#include "shell/cli/cli.h"

namespace nnasm {

namespace {

template <typename... A>
Status fail(fmt::format_string<A...> f, A&&... a) {
  return Status::error("nnasm: error: " + fmt::format(f, std::forward<A>(a)...));
}

struct Binding {
  std::string name;  // without its sigil
  std::string path;
};

// "x=in.npy" or "%x=in.npy"; `sigils` are the sigils the name may carry.
Status parse_binding(const std::string& arg, const char* flag, const char* sigils, Binding* b) {
  const size_t eq = arg.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size())
    return fail("{} '{}': expected NAME=PATH.npy", flag, arg);
  b->name = arg.substr(0, eq);
  b->path = arg.substr(eq + 1);
  if (std::strchr(sigils, b->name[0])) b->name.erase(0, 1);
  if (b->name.empty()) return fail("{} '{}': expected NAME=PATH.npy", flag, arg);
  return Status::ok();
}

std::string names_of(const Program& p, const std::vector<TensorId>& ids) {
  std::string s;
  for (TensorId id : ids) s += fmt::format("{}{}{}", s.empty() ? "" : ", ", p.desc(id).sigil(), p.desc(id).name);
  return s.empty() ? "none" : s;
}

}  // namespace

Status cmd_run(const RunOptions& o) {
  std::vector<Binding> ins(o.ins.size()), outs(o.outs.size());
  for (size_t i = 0; i < o.ins.size(); ++i) NNASM_TRY(parse_binding(o.ins[i], "--in", "%", &ins[i]));
  for (size_t i = 0; i < o.outs.size(); ++i) NNASM_TRY(parse_binding(o.outs[i], "--out", "%@", &outs[i]));

  Context ctx;
  Program prog(ctx);
  NNASM_TRY(program_parse_file(o.file, &prog));
  NNASM_TRY(prog.finish().with_prefix(o.file + ": error: "));

  // Bind every --in to an input of the program, reading and checking its file.
  std::map<TensorId, NpyArray> data;
  for (const Binding& b : ins) {
    const TensorId id = prog.find(b.name);
    if (id == NO_TENSOR)
      return fail("--in {}: {} has no tensor named '{}' (its inputs: {})", b.name, o.file, b.name,
                  names_of(prog, prog.inputs()));
    const TensorDesc& d = prog.desc(id);
    if (d.role != Role::INPUT)
      return fail("--in {}: {}{} is a {}, not an input (its inputs: {})", b.name, d.sigil(), d.name,
                  role_name(d.role), names_of(prog, prog.inputs()));
    if (data.count(id)) return fail("--in {}: input %{} is given twice", b.name, d.name);
    NpyArray& a = data[id];
    Status s = npy_read(b.path, &a);
    if (!s) return fail("input %{}: {}", d.name, s.message());
    if (!(a.type == d.type))
      return fail("input %{}: {} holds {}, but %{} is {}", d.name, b.path, a.type.str(), d.name, d.type.str());
  }
  std::vector<TensorId> missing;
  for (TensorId id : prog.inputs())
    if (!data.count(id)) missing.push_back(id);
  if (!missing.empty())
    return fail("input{} {} {} not given (use --in {}=PATH.npy)", missing.size() == 1 ? "" : "s",
                names_of(prog, missing), missing.size() == 1 ? "is" : "are", prog.desc(missing[0]).name);

  std::vector<TensorId> out_ids;
  for (const Binding& b : outs) {
    const TensorId id = prog.find(b.name);
    if (id == NO_TENSOR)
      return fail("--out {}: {} has no tensor named '{}' (its outputs: {})", b.name, o.file, b.name,
                  names_of(prog, prog.outputs()));
    // Read after the run: as an output, neither the optimizer nor the memory planner reuses it.
    if (prog.desc(id).role == Role::TEMPORARY) prog.mark_output(id);
    out_ids.push_back(id);
  }

  // The mode is the command line's, not the listing's: a listing saved from a training program
  // says `mode training`, yet running it is inference unless asked. Set on the program too, so
  // the optimizer and the --kernels listing see the mode the run has.
  prog.set_training(o.train);
  if (o.has_seed) ctx.set_seed(o.seed);
  if (o.opt_level >= 0) ctx.set_opt_level(o.opt_level);
  Result<std::unique_ptr<Executor>> ex = Executor::prepare(prog);
  if (!ex) return fail("{}: {}", o.file, ex.status().message());
  (*ex)->set_training(o.train);
  for (auto& [id, a] : data) {
    Tensor& t = ctx.at(id);
    const void* src = a.type.dtype == DType::F32 ? static_cast<const void*>(a.f32.data()) : a.i32.data();
    std::memcpy(t.storage(), src, static_cast<size_t>(t.numel()) * dtype_size(t.desc.type.dtype));
  }
  if (o.kernels) {
    const Executor& e = **ex;
    fmt::print("{}\n", program_print(e.program(), [&e](size_t i) { return fmt::format("kernel: {}", e.kernel_name(i)); }));
  }
  (*ex)->run();

  if (!outs.empty()) {
    for (size_t i = 0; i < outs.size(); ++i) {
      const Tensor& t = ctx.at(out_ids[i]);
      Status s = npy_write(outs[i].path, t.desc.type, t.storage());
      if (!s) return fail("--out {}: {}", outs[i].name, s.message());
    }
    return Status::ok();
  }
  for (TensorId id : prog.outputs()) {
    const Tensor& t = ctx.at(id);
    fmt::print("{}{}: {}\n{}\n", t.desc.sigil(), t.desc.name, t.desc.type.str(),
               format_tensor(t.desc.type, t.storage()));
  }
  std::fflush(stdout);
  return Status::ok();
}

}  // namespace nnasm
