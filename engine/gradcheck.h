// The public gradient checker: compares the backward code autodiff generates for a program with
// central finite differences of its forward section, so users can test their own models (and we
// test every op's rule, tests/gradcheck_test.cpp). As dlib's test_layer, it is a function, not a
// test fixture.
//
//   GradCheckOptions o;
//   o.fill = [](Executor& ex) { ex.tensor("x")->f32()[0] = 0.5f; ... };
//   Result<GradCheckReport> r = check_gradients(p, loss, {w, b}, o);
//   if (!r) ... r.status().message() ...          // could not check (e.g. an op without a rule)
//   else if (!r->ok) ... r->worst ...               // "d y / d @w[1,2]: analytic 0.5, numeric 0.49"
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/executor.h"
#include "isa/program.h"
#include "isa/status.h"

namespace nnasm {

struct GradCheckOptions {
  // Central-difference step, applied to the f32 value (the real step is what float rounding
  // leaves of it, and the quotient uses that). f32 needs a large step: 1e-3 for values of order 1.
  double step = 1e-3;
  // An element passes when |analytic − numeric| ≤ atol + rtol·max(|analytic|, |numeric|).
  double rtol = 1e-2;
  double atol = 1e-3;
  // Elements perturbed per tensor of `wrt`: all of them up to this count, else this many chosen
  // deterministically from `seed`.
  int max_elements = 64;
  // Drives the weights r of Σ y·r, the default input values and the choice of elements.
  uint64_t seed = 1;
  // Sets inputs (or anything else) on the checker's executor, by name as in the user's program,
  // after the defaults below were applied. Optional.
  std::function<void(Executor&)> fill;
};

struct GradCheckReport {
  bool ok = true;
  double max_abs_error = 0;  // max |analytic − numeric|
  double max_rel_error = 0;  // max |analytic − numeric| / max(|analytic|, |numeric|, atol)
  // The element furthest outside its tolerance (or closest to it when all pass), as
  // "d y / d %x[3]: analytic 0.5, numeric 0.49"; empty if nothing was checked.
  std::string worst;
  int checked = 0;  // elements compared
};

// Checks d(Σ y·r)/dx against central differences for every x in `wrt`, where r is a fixed random
// tensor shaped like y (entries ±[0.5, 1.5]) so that every element of y matters — a plain Σ y
// would hide errors that cancel (Σ softmax(x) is constant). Σ y·r is formed with MUL, RESHAPE and
// REDUCE_SUM, so the check also relies on their rules (themselves checked: a wrong one fails every
// check rather than hiding an error).
//
// Requires: y an f32 tensor computed by `p`'s forward section; each x an f32 tensor of `p` that
// the forward section does not compute (input, param, const, state), since only those can be
// nudged. `p` is not modified: the check runs on a copy of its forward section in a Context of
// its own (same seed), to which it appends Σ y·r and the backward code (engine/autodiff.h).
// Values: every tensor that holds data in `p`'s context is copied (so trained params are checked
// where they are); params and state never allocated are initialized from the seed as a prepare
// would; f32 inputs never allocated get uniform(−1, 1) values from options.seed, i32 inputs
// zeros; then options.fill runs. The scalar is accumulated in double on the host. Every forward
// run draws the same random numbers (the executor's run index is pinned), so DROPOUT is checked
// with one fixed mask; the program's mode is kept (BATCHNORM2D in a training program uses batch
// statistics).
// Errors (as values, never an abort): bad arguments, and whatever grad() reports — an op on the
// path without a backward rule, a gradient asked of SOFTMAX_CE's targets — naming the instruction.
// Allocates; runs the forward section 2·(elements checked) + 1 times. Not thread-safe for `p`.
Result<GradCheckReport> check_gradients(const Program& p, TensorId y, const std::vector<TensorId>& wrt,
                                        const GradCheckOptions& options = {});

}  // namespace nnasm
