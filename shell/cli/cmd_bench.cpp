// `nnasm bench FILE [--in NAME=PATH.npy]... [--seconds S | --runs N] [--threads N] [--isa LEVEL] [--train]
// [--profile] [--json]`: how fast a
// model runs here, as a user would measure it before shipping: each forward run (or training step)
// timed on its own after a warm-up, reported as percentiles, and the throughput in samples per
// second at the program's batch size. Inputs not given hold a fixed pattern (values do not change
// the time of anything but pathological denormals). --profile: where the time goes, instruction by
// instruction, on the listing the user edits.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "engine/executor.h"
#include "jit/cpu.h"
#include "serialize/listing.h"
#include "shell/cli/cli.h"

namespace nnasm {

namespace {

using Clock = std::chrono::steady_clock;

void fill_pattern(Tensor& t) {
  if (t.desc.type.dtype == DType::I32) {
    std::memset(t.storage(), 0, static_cast<size_t>(t.numel()) * 4);
    return;
  }
  float* x = t.f32();
  for (int64_t i = 0; i < t.numel(); ++i) x[i] = 0.5f * std::sin(0.1f * static_cast<float>(i));
}

std::string us(double seconds) {
  const double u = seconds * 1e6;
  return u < 1000 ? fmt::format("{:.2f} us", u) : fmt::format("{:.3f} ms", u / 1000);
}

// Runs for `budget` (at least 10 runs) timing each instruction on its own (Executor::run_timed)
// and prints the prepared listing with each instruction's time per run, its share of the timed
// total, its kernel and its parts in the trailing comment; for a step split into parts, each
// part's mean start after the step began (the hand-off to its thread) and its running time, so
// that a user sees what splitting costs on the machine. A step joined to the parallel job of the
// one before it (Executor::join) has its time counted there.
void print_profile(Executor& ex, bool train, std::chrono::duration<double> budget) {
  const Program& prog = ex.program();
  std::vector<Section> sections{Section::FORWARD};
  if (train) sections = {Section::FORWARD, Section::BACKWARD, Section::UPDATE};
  std::vector<double> seconds(prog.code().size(), 0.0);
  const size_t stride = static_cast<size_t>(ex.max_parts());
  std::vector<Executor::PartTime> part_times(prog.code().size() * stride);
  std::vector<char> timed(prog.code().size(), 0);
  for (Section s : sections) {
    const auto [b, e] = prog.section_range(s);
    std::fill(timed.begin() + b, timed.begin() + e, 1);
  }
  size_t runs = 0;
  const Clock::time_point start = Clock::now();
  while (runs < 10 || Clock::now() - start < budget) {
    for (Section s : sections) ex.run_timed(s, seconds.data(), part_times.data());
    ++runs;
  }
  double total = 0;
  for (double t : seconds) total += t;
  fmt::print("profile:    {} {} timed one instruction at a time: {} a run in all (each clock read adds to it)\n\n",
             runs, train ? "training steps" : "forward runs", us(total / runs));
  fmt::print("{}", program_print(prog, [&](size_t i) -> std::string {
               if (!timed[i]) return {};
               const int parts = ex.parts(i);
               if (parts == 0) return fmt::format("in the job above  kernel: {}", ex.kernel_name(i));
               std::string split;
               if (parts > 1) {
                 split = fmt::format(" ({} parts, start + run:", parts);
                 for (int t = 0; t < parts; ++t) {
                   const Executor::PartTime& pt = part_times[i * stride + static_cast<size_t>(t)];
                   split += fmt::format("{} {} + {}", t ? "," : "", us(pt.start / runs), us(pt.busy / runs));
                 }
                 split += ")";
               }
               return fmt::format("{:>9} {:5.1f}%  kernel: {}{}", us(seconds[i] / runs),
                                  total > 0 ? 100 * seconds[i] / total : 0.0, ex.kernel_name(i), split);
             }));
}

}  // namespace

Status cmd_bench(const BenchOptions& o) {
  if (!(o.seconds > 0 && o.seconds <= 3600)) return Status::errorf("nnasm: error: --seconds {}: expected 0 < S <= 3600", o.seconds);
  if (o.json && o.profile)
    return Status::error("nnasm: error: --json and --profile: the profile is a listing, not JSON; use one at a time");
  if (o.runs < 0) return Status::errorf("nnasm: error: --runs {}: expected N >= 1", o.runs);
  Context ctx;
  RunProgram source(ctx);
  NNASM_TRY(load_run_program(o.file, o.batch, o.isa, ctx, &source));
  Program& prog = source.program();
  if (o.train && !prog.has_section(Section::UPDATE))
    return Status::errorf("nnasm: error: --train: {} has no update section (not a training program)", o.file);
  std::map<TensorId, NpyArray> data;
  NNASM_TRY(read_inputs(prog, o.file, o.ins, false, &data));
  if (o.threads > 0) ctx.set_threads(o.threads);
  prog.set_training(o.train);
  Result<std::unique_ptr<Executor>> prepared = Executor::prepare(prog);
  if (!prepared) return Status::errorf("nnasm: error: {}: {}", o.file, prepared.status().message());
  Executor& ex = *prepared.value();
  if (Status s = ex.set_training(o.train); !s) return Status::errorf("nnasm: error: {}: {}", o.file, s.message());
  for (TensorId id : prog.inputs()) fill_pattern(ctx.at(id));
  copy_inputs(ctx, data);

  const std::vector<TensorId> inputs = prog.inputs();
  const TensorType* first = inputs.empty() ? nullptr : &prog.desc(inputs[0]).type;
  const int64_t batch = first && first->shape.rank > 0 ? first->shape[0] : 1;
  auto step = [&] { o.train ? ex.train_step() : ex.run(); };

  // Warm-up: caches, page faults, the pool's threads; at least 10 runs or a tenth of the time.
  const Clock::time_point warm_start = Clock::now();
  for (int64_t i = 0; i < 10 || Clock::now() - warm_start < std::chrono::duration<double>(o.seconds / 10); ++i) step();

  // Time, or --runs, ends the measurement, never the sample buffer: when it fills, every second
  // sample is dropped and from then on only every stride-th run is kept, so the percentiles come
  // from runs spread evenly over the whole measurement in bounded memory; count, sum and min
  // cover every run.
  constexpr size_t kSamples = size_t(1) << 20;
  std::vector<double> times;
  times.reserve(kSamples);
  uint64_t runs = 0, stride = 1;
  double sum = 0, fastest = INFINITY;
  const Clock::time_point start = Clock::now();
  const auto budget = std::chrono::duration<double>(o.seconds);
  auto more = [&] { return o.runs > 0 ? runs < static_cast<uint64_t>(o.runs) : runs < 10 || Clock::now() - start < budget; };
  while (more()) {
    const Clock::time_point t0 = Clock::now();
    step();
    const double t = std::chrono::duration<double>(Clock::now() - t0).count();
    sum += t;
    fastest = std::min(fastest, t);
    if (runs++ % stride != 0) continue;
    if (times.size() == kSamples) {
      for (size_t i = 0; i < kSamples / 2; ++i) times[i] = times[2 * i];
      times.resize(kSamples / 2);
      stride *= 2;
      if ((runs - 1) % stride != 0) continue;
    }
    times.push_back(t);
  }
  const double total = std::chrono::duration<double>(Clock::now() - start).count();
  std::sort(times.begin(), times.end());
  auto pct = [&](double q) { return times[std::min(times.size() - 1, static_cast<size_t>(q * (times.size() - 1) + 0.5))]; };
  if (o.json) {
    // One object a script can read (microseconds per run); names are plain, so no escaping but the file's.
    std::string file;
    for (char c : o.file) file += c == '"' || c == '\\' ? std::string("\\") + c : std::string(1, c);
    fmt::print("{{\"model\": \"{}\", \"mode\": \"{}\", \"isa\": \"{}\", \"threads\": {}, \"batch\": {}, \"runs\": {}, "
               "\"seconds\": {:.6f}, \"median_us\": {:.3f}, \"p99_us\": {:.3f}, \"mean_us\": {:.3f}, \"min_us\": {:.3f}, "
               "\"samples_per_second\": {:.1f}}}\n",
               file, o.train ? "train" : "forward", isa_name(ctx.jit().isa()), ctx.threads(), batch, runs, total,
               pct(0.5) * 1e6, pct(0.99) * 1e6, sum / runs * 1e6, fastest * 1e6, batch * runs / sum);
    return Status::ok();
  }
  fmt::print("bench:      {} ({}), {} thread{}, isa {}, batch {}{}\n", o.file, o.train ? "training steps" : "forward runs",
             ctx.threads(), ctx.threads() == 1 ? "" : "s", isa_name(ctx.jit().isa()), batch,
             first ? fmt::format(" (%{} {})", prog.desc(inputs[0]).name, first->str()) : "");
  fmt::print("latency:    p50 {}  p99 {}  mean {}  min {}  ({} runs in {:.2f} s)\n", us(pct(0.5)), us(pct(0.99)),
             us(sum / runs), us(fastest), runs, total);
  fmt::print("throughput: {:.0f} samples/s ({:.0f} runs/s)\n", batch * runs / sum, runs / sum);
  if (o.profile) print_profile(ex, o.train, o.runs > 0 ? std::chrono::duration<double>(total) : budget);
  return Status::ok();
}

}  // namespace nnasm
