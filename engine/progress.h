// Progress reporting for a training loop. On a terminal one status line is redrawn in place with
// '\r' (epoch, batch i/n, a bar, loss, accuracy, samples/s, ETA), at most about ten times a
// second so that printing never slows training; anywhere else (a pipe, a log file) exactly one
// line per epoch is printed, because a log full of '\r' redraws is unreadable.
#pragma once
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

namespace nnasm {

// What a finished epoch reports. Accuracies are fractions in [0,1]; they print as percentages.
struct EpochSummary {
  double train_loss = 0;
  double train_acc = 0;
  double test_acc = 0;
  double seconds = 0;
};

class Progress {
 public:
  // Monotonic time in seconds; only differences matter.
  using Clock = std::function<double()>;
  // The shortest interval between two redraws of the terminal line.
  static constexpr double MIN_REDRAW_SECONDS = 0.1;

  // Reports to `out` (not owned; must outlive this object); it is a terminal if isatty() says so;
  // time comes from std::chrono::steady_clock.
  explicit Progress(FILE* out = stderr);
  // Everything injected, for tests and for callers that know better (e.g. forcing log mode).
  Progress(FILE* out, bool is_terminal, Clock clock);

  // Starts epoch `epoch` (0-based; shown 1-based) of `n_epochs`, which has `n_batches` batches.
  void begin_epoch(int epoch, int n_epochs, int64_t n_batches);
  // Batch `i` (0-based; shown 1-based) has finished with this loss, accuracy (fraction) and
  // throughput. Terminal mode redraws if MIN_REDRAW_SECONDS have passed since the last redraw
  // (the first batch of an epoch always draws); otherwise it prints nothing.
  void batch(int64_t i, double loss, double accuracy, double samples_per_sec);
  // Prints the epoch's summary line (replacing the status line on a terminal) and a newline.
  void end_epoch(const EpochSummary& s);

  int redraws() const { return redraws_; }  // status-line redraws so far, for tests

 private:
  void write(const std::string& s);

  FILE* out_;
  bool tty_;
  Clock clock_;
  int epoch_ = 0, n_epochs_ = 0;
  int64_t n_batches_ = 0;
  double epoch_start_ = 0;
  double last_draw_ = 0;
  bool drawn_this_epoch_ = false;
  size_t line_len_ = 0;  // length of the status line on screen, to blank out its leftover
  int redraws_ = 0;
};

// A duration as a terminal shows an ETA: "7s", "1m05s", "2h03m", "?" if negative or not finite.
std::string progress_duration(double seconds);

// A text bar of `width` characters for `fraction` (clamped to [0,1]): "[#####-----]".
std::string progress_bar(double fraction, int width);

}  // namespace nnasm
