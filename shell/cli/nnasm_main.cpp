// The `nnasm` command-line tool: option parsing (CLI11) and the process boundary. Subcommands
// return a Status; this file turns it into a message on stderr and exit status 1 (a user error:
// bad options, files, names, shapes). CLI11 reports bad options by throwing, and the library
// promises not to, so every exception is caught here and the tool never dies with an uncaught
// one; an exception from anywhere else is the tool's own failure and exits with status 2.
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <new>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "engine/version.h"
#include "shell/cli/cli.h"

namespace {

int report(const nnasm::Status& s) {
  if (s) return nnasm::EXIT_OK;
  std::fflush(stdout);
  fmt::print(stderr, "{}\n", s.message());
  return nnasm::EXIT_USER_ERROR;
}

int tool_main(int argc, char** argv) {
  CLI::App app{"nnasm: check, run, convert and inspect neural-network listings (.nnasm) and model files (.nnm); import ONNX models",
               "nnasm"};
  app.require_subcommand(1);
  // --quiet and --verbose may come before or after the subcommand.
  app.fallthrough();
  app.set_version_flag("--version", "nnasm " NNASM_VERSION_STRING);
  bool quiet = false, verbose = false;
  app.add_flag("-q,--quiet", quiet, "Print only results and errors (no notes)");
  app.add_flag("-v,--verbose", verbose, "Also print details: what a model file holds, decisions made");
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return fmt::format("nnasm: error: {}\nRun with --help for more information.\n", e.what());
  });
  app.footer(
      "Examples:\n"
      "  nnasm check model.nnasm --print\n"
      "  nnasm run model.nnasm --in x=x.npy --out y=y.npy --seed 7\n"
      "  nnasm run model.nnasm --in x=x.npy --kernels\n"
      "  nnasm run model.nnasm --in x=x.npy --train\n"
      "  nnasm opt model.nnasm --diff\n"
      "  NNASM_ISA=avx2 nnasm info model.nnasm\n"
      "  nnasm info model.nnasm --memory\n"
      "  nnasm dump model.nnm > model.nnasm\n"
      "  nnasm build model.nnasm --weights model.nnm -o edited.nnm\n"
      "  nnasm bench edited.nnm --seconds 5\n"
      "  nnasm bench model.nnasm --train --profile\n"
      "  nnasm import model.onnx -o model.nnm --shape input=1,3,224,224\n"
      "  nnasm export --inference trained.nnm -o infer.nnm\n"
      "  nnasm quantize infer.nnm --to bf16 --calibrate x=x.npy -o infer_bf16.nnm\n"
      "  nnasm run infer.nnm --in x=x.npy --expect probs=ref.npy --atol 1e-4\n"
      "  nnasm bench infer.nnm --runs 1000 --json\n"
      "\n"
      "FILE is a listing (.nnasm) or a model file (.nnm), told apart by content.\n"
      "Exit status: 0 success, 1 user error (options, files, names, shapes), 2 internal error.");

  nnasm::CheckOptions check;
  CLI::App* check_cmd = app.add_subcommand("check", "Parse and verify a listing (or model file)");
  check_cmd->add_option("FILE", check.file, "Listing or model file to check")->required();
  check_cmd->add_flag("--print", check.print, "Write the normalized listing to stdout");

  // --isa on run and bench: a level above the CPU's is an error rather than a silent cap, so a
  // measurement never claims a level it did not use.
  const char* isa_help = "Highest ISA level for generated kernels: avx512, avx2 or ref (as NNASM_ISA; a level "
                         "this CPU lacks is an error)";
  nnasm::RunOptions run;
  CLI::App* run_cmd =
      app.add_subcommand("run", "Run a listing once on inputs from .npy files (inference unless --train)");
  run_cmd->add_option("FILE", run.file, "Listing or model file to run")->required();
  run_cmd->add_option("--in", run.ins, "Bind input NAME to a .npy file (repeat for each input)")
      ->type_name("NAME=PATH.npy");
  run_cmd->add_option("--out", run.outs, "Write tensor NAME to a .npy file; without --out the outputs are printed")
      ->type_name("NAME=PATH.npy");
  // CLI11 2.1 converts "-1" and "2^64" to a uint64_t without complaint; a seed must be exact.
  const CLI::Validator seed_check(
      [](std::string& text) -> std::string {
        uint64_t v = 0;
        const char* end = text.data() + text.size();
        const auto [p, ec] = std::from_chars(text.data(), end, v);
        if (text.empty() || ec != std::errc() || p != end)
          return fmt::format("expected an integer from 0 to {}, got '{}'", UINT64_MAX, text);
        return std::string();
      },
      "");
  run_cmd->add_flag("--kernels", run.kernels, "Print the listing with the kernel each instruction got");
  run_cmd->add_flag("--train", run.train,
                    "Run in training mode (dropout active, batch statistics); without it the run is inference, "
                    "even for a listing that says `mode training`");
  CLI::Option* seed = run_cmd->add_option("--seed", run.seed, "Seed for initializing params (default: fixed)")
                          ->type_name("N")
                          ->check(seed_check);

  run_cmd->add_option("--batch", run.batch, "Run at batch N: every input's leading dimension becomes N")
      ->type_name("N")
      ->check(CLI::PositiveNumber);
  run_cmd->add_option("--expect", run.expects,
                      "Compare output NAME with a .npy file elementwise (|a-b| <= atol + rtol*|b|); exit 1 and "
                      "print the worst element on a mismatch (repeatable)")
      ->type_name("NAME=REF.npy")
      ->allow_extra_args(false);
  run_cmd->add_option("--atol", run.atol, "Absolute tolerance of --expect (default 1e-5)")->type_name("A");
  run_cmd->add_option("--rtol", run.rtol, "Relative tolerance of --expect (default 1e-4)")->type_name("R");
  run_cmd->add_option("--isa", run.isa, isa_help)->type_name("LEVEL");
  run_cmd->add_option("-O", run.opt_level, "Optimizer level: -O0 runs the listing as written, -O1 (default) optimizes")
      ->type_name("LEVEL")
      ->check(CLI::Range(0, 1));

  nnasm::OptOptions opt;
  CLI::App* opt_cmd = app.add_subcommand("opt", "Optimize a listing and print the result");
  opt_cmd->add_option("FILE", opt.file, "Listing to optimize");
  opt_cmd->add_option("-O", opt.level, "Optimizer level (0: none, 1: default)")->type_name("LEVEL")->check(CLI::Range(0, 1));
  opt_cmd->add_flag("--diff", opt.diff, "Show why each instruction changed, as trailing comments, and a per-pass summary");
  opt_cmd->add_option("--passes", opt.passes, "Run exactly these passes, in table order (see --list)")
      ->type_name("NAME,...")
      ->delimiter(',');
  opt_cmd->add_flag("--list", opt.list, "List the passes with their levels and exit");

  nnasm::InfoOptions info;
  CLI::App* info_cmd =
      app.add_subcommand("info", "CPU features, L2 per core, the ISA in use and its cap, the threads; "
                                 "a listing's contents");
  info_cmd->add_option("FILE", info.file, "Listing or model file to describe (optional)");
  info_cmd->add_flag("--memory", info.memory,
                     "With FILE: arena size before and after memory planning, and the listing with each "
                     "output's arena offset and the tensors sharing it");

  nnasm::DumpOptions dump;
  CLI::App* dump_cmd = app.add_subcommand("dump", "Write a model file's program as a listing (weights stay in the file)");
  dump_cmd->add_option("FILE", dump.file, "Model file (or listing)")->required();
  dump_cmd->add_option("-o,--output", dump.out, "Write the listing to this file (atomically) instead of stdout")
      ->type_name("PATH");

  nnasm::BuildOptions build;
  CLI::App* build_cmd = app.add_subcommand("build", "Make a model file from a listing, taking weights by name");
  build_cmd->add_option("FILE", build.file, "Listing (or model file)")->required();
  build_cmd->add_option("--weights", build.weights,
                        "Model file whose params, state and seed the listing's tensors take, by name and type")
      ->type_name("MODEL.nnm");
  build_cmd->add_option("-o,--output", build.out, "Model file to write")->type_name("PATH")->required();
  CLI::Option* build_seed = build_cmd->add_option("--seed", build.seed, "Seed of the model (default: --weights', else fixed)")
                                ->type_name("N")
                                ->check(seed_check);

  nnasm::BenchOptions bench;
  CLI::App* bench_cmd = app.add_subcommand("bench", "Time forward runs (or training steps): latency percentiles, throughput");
  bench_cmd->add_option("FILE", bench.file, "Listing or model file")->required();
  bench_cmd->add_option("--in", bench.ins, "Bind input NAME to a .npy file (default: a fixed pattern)")
      ->type_name("NAME=PATH.npy");
  bench_cmd->add_option("--seconds", bench.seconds, "How long to measure, after a warm-up (default 2)")->type_name("S");
  bench_cmd->add_option("--runs", bench.runs, "Measure exactly N runs instead of for --seconds")
      ->type_name("N")
      ->check(CLI::PositiveNumber);
  bench_cmd->add_option("--threads", bench.threads, "Threads (default: NNASM_THREADS, else the cores)")
      ->type_name("N")
      ->check(CLI::Range(1, 256));
  bench_cmd->add_option("--batch", bench.batch, "Run at batch N: every input's leading dimension becomes N")
      ->type_name("N")
      ->check(CLI::PositiveNumber);
  bench_cmd->add_option("--isa", bench.isa, isa_help)->type_name("LEVEL");
  bench_cmd->add_flag("--json", bench.json,
                      "Print one JSON object (model, mode, isa, threads, batch, runs, seconds, median_us, p99_us, "
                      "mean_us, min_us, samples_per_second) instead of the table");
  bench_cmd->add_flag("--train", bench.train, "Time training steps (forward, backward, update)");
  bench_cmd->add_flag("--profile", bench.profile,
                      "Then time each instruction on its own: the listing with kernel, time per run and each "
                      "parallel part's start and time");

  nnasm::ExportCmdOptions export_opts;
  CLI::App* export_cmd = app.add_subcommand(
      "export", "Turn a trained model into an inference model: the forward computation of the chosen outputs "
                "with the trained weights; no labels, loss, backward, update or optimizer state");
  export_cmd->add_option("FILE", export_opts.file, "Trained model file (or training listing)")->required();
  export_cmd->add_flag("--inference", export_opts.inference, "Export an inference model (required: the only kind so far)");
  export_cmd->add_option("--output", export_opts.outputs,
                         "Keep this output (repeatable; default: the forward outputs other than the loss)")
      ->type_name("NAME")
      ->allow_extra_args(false);
  export_cmd->add_option("--batch", export_opts.batch, "Batch size of the inference model (default: the trained one's)")
      ->type_name("N")
      ->check(CLI::PositiveNumber);
  export_cmd->add_option("-o", export_opts.out, "Inference model file to write")->type_name("OUT.nnm")->required();

  nnasm::QuantizeCmdOptions quant;
  CLI::App* quantize_cmd = app.add_subcommand(
      "quantize", "Rewrite an inference model's dense layers in bf16 or int8 where each layer's measured error "
                  "allows; print the per-layer report and the sizes");
  quantize_cmd->add_option("FILE", quant.file, "Inference model file (or listing)")->required();
  quantize_cmd->add_option("--to", quant.to, "bf16 or int8")->type_name("TYPE")->required();
  quantize_cmd->add_option("--calibrate", quant.calibrate,
                           "Rows of input NAME to measure each layer's error on (repeat for each input; default: "
                           "a synthetic batch)")
      ->type_name("NAME=PATH.npy")
      ->allow_extra_args(false);
  quantize_cmd->add_option("--max-error", quant.max_error,
                           "A layer whose relative output error exceeds E stays f32 (default: 0.01 bf16, 0.05 int8)")
      ->type_name("E")
      ->check(CLI::NonNegativeNumber);
  quantize_cmd->add_option("--keep", quant.keep, "Keep this layer f32, by weight or output name (repeatable)")
      ->type_name("TENSOR")
      ->allow_extra_args(false);
  quantize_cmd->add_option("-o", quant.out, "Quantized model file to write")->type_name("OUT.nnm")->required();

  nnasm::ImportOptions imp;
  CLI::App* import_cmd =
      app.add_subcommand("import", "Import a model of another framework (ONNX, Myelin .flow) as a model file and/or a listing");
  import_cmd->add_option("FILE", imp.file, "Model to import (.onnx or .flow), told by content")->required();
  import_cmd->add_option("-o,--output", imp.out, "Model file to write, with the weights")->type_name("OUT.nnm");
  import_cmd->add_option("--listing", imp.listing,
                         "Listing to write; it names the weights in the -o file, or holds them inline without -o")
      ->type_name("OUT.nnasm");
  import_cmd->add_option("--shape", imp.shapes, "Shape of a graph input with symbolic dimensions (repeat for each)")
      ->type_name("NAME=D0,D1,...");
  import_cmd->add_option("--function", imp.function, ".flow: the function to import (default: the first)");
  import_cmd->add_option("--batch", imp.batch,
                         "Write the model at batch N (ONNX: every input's leading dimension; .flow: the size of "
                         "batch dimensions, -1 in the file)")
      ->type_name("N")
      ->check(CLI::PositiveNumber);
  import_cmd->add_flag("--weights-as-params", imp.weights_as_params,
                       ".flow: every float32 variable with data a param (files older than version 5 mark none learnable)");

  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    sub->footer("Global options, before or after the command: -q,--quiet (no notes)  -v,--verbose (details)\n"
                "Exit status: 0 success, 1 user error, 2 internal error.");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help is a "parse error" that exits 0; every real one exits 1, like the tool's other errors.
    return app.exit(e) == 0 ? nnasm::EXIT_OK : nnasm::EXIT_USER_ERROR;
  }
  run.has_seed = seed->count() > 0;
  build.has_seed = build_seed->count() > 0;
  nnasm::set_verbosity(quiet ? 0 : verbose ? 2 : 1);
  if (check_cmd->parsed()) return report(nnasm::cmd_check(check));
  if (dump_cmd->parsed()) return report(nnasm::cmd_dump(dump));
  if (build_cmd->parsed()) return report(nnasm::cmd_build(build));
  if (bench_cmd->parsed()) return report(nnasm::cmd_bench(bench));
  if (info_cmd->parsed()) return report(nnasm::cmd_info(info));
  if (import_cmd->parsed()) return report(nnasm::cmd_import(imp));
  if (export_cmd->parsed()) return report(nnasm::cmd_export(export_opts));
  if (quantize_cmd->parsed()) return report(nnasm::cmd_quantize(quant));
  if (opt_cmd->parsed()) {
    if (opt.file.empty() && !opt.list) return report(nnasm::Status::error("nnasm opt: error: FILE is required"));
    return report(nnasm::cmd_opt(opt));
  }
  return report(nnasm::cmd_run(run));
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return tool_main(argc, argv);
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "nnasm: error: out of memory\n");
  } catch (const std::exception& e) {
    fmt::print(stderr, "nnasm: error: {}\n", e.what());
  } catch (...) {
    fmt::print(stderr, "nnasm: error: unexpected failure\n");
  }
  return nnasm::EXIT_INTERNAL_ERROR;
}
