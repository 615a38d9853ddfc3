// The progress reporter: formats the status and summary lines and decides when to draw them.
// Time comes only from the injected clock, so tests can drive the rate limit deterministically.
#include "engine/progress.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <utility>

#include <fmt/format.h>

namespace nnasm {

namespace {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// "41.2k" style throughput, so the status line keeps its width as the number grows.
std::string rate(double per_sec) {
  if (!std::isfinite(per_sec) || per_sec < 0) return "?";
  if (per_sec >= 1e6) return fmt::format("{:.1f}M", per_sec / 1e6);
  if (per_sec >= 1e4) return fmt::format("{:.1f}k", per_sec / 1e3);
  return fmt::format("{:.0f}", per_sec);
}

}  // namespace

std::string progress_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const int64_t s = static_cast<int64_t>(std::llround(seconds));
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, s / 60 % 60);
}

std::string progress_bar(double fraction, int width) {
  if (!(fraction > 0)) fraction = 0;  // also NaN
  if (fraction > 1) fraction = 1;
  if (width < 0) width = 0;
  const int full = static_cast<int>(fraction * width);
  return "[" + std::string(static_cast<size_t>(full), '#') + std::string(static_cast<size_t>(width - full), '-') +
         "]";
}

Progress::Progress(FILE* out) : Progress(out, out && ::isatty(::fileno(out)) == 1, steady_seconds) {}

Progress::Progress(FILE* out, bool is_terminal, Clock clock)
    : out_(out), tty_(is_terminal), clock_(clock ? std::move(clock) : Clock(steady_seconds)) {}

void Progress::write(const std::string& s) {
  if (!out_) return;
  std::fwrite(s.data(), 1, s.size(), out_);
  std::fflush(out_);
}

void Progress::begin_epoch(int epoch, int n_epochs, int64_t n_batches) {
  epoch_ = epoch;
  n_epochs_ = n_epochs;
  n_batches_ = n_batches;
  epoch_start_ = clock_();
  drawn_this_epoch_ = false;
}

void Progress::batch(int64_t i, double loss, double accuracy, double samples_per_sec) {
  if (!tty_) return;
  const double now = clock_();
  if (drawn_this_epoch_ && now - last_draw_ < MIN_REDRAW_SECONDS) return;
  drawn_this_epoch_ = true;
  last_draw_ = now;
  ++redraws_;
  const int64_t done = i + 1;
  const double frac = n_batches_ > 0 ? double(done) / double(n_batches_) : 0;
  const double eta = done > 0 && n_batches_ >= done ? (now - epoch_start_) / done * (n_batches_ - done) : -1;
  const std::string line =
      fmt::format("epoch {}/{} {} {}/{} loss {:.4f} acc {:.2f}% {} samples/s ETA {}", epoch_ + 1, n_epochs_,
                  progress_bar(frac, 20), done, n_batches_, loss, accuracy * 100, rate(samples_per_sec),
                  progress_duration(eta));
  const size_t pad = line_len_ > line.size() ? line_len_ - line.size() : 0;
  line_len_ = line.size();
  write("\r" + line + std::string(pad, ' '));
}

void Progress::end_epoch(const EpochSummary& s) {
  const std::string line =
      fmt::format("epoch {}/{} train loss {:.4f} train acc {:.2f}% test acc {:.2f}% {:.1f}s", epoch_ + 1, n_epochs_,
                  s.train_loss, s.train_acc * 100, s.test_acc * 100, s.seconds);
  if (!tty_) {
    write(line + "\n");
    return;
  }
  const size_t pad = line_len_ > line.size() ? line_len_ - line.size() : 0;
  line_len_ = 0;
  write("\r" + line + std::string(pad, ' ') + "\n");
}

}  // namespace nnasm
