// Tests of the training progress reporter: log mode prints exactly one line per epoch with the
// numbers and no '\r'; terminal mode redraws with '\r' and is rate-limited by the injected clock
// (a fake one, so nothing depends on real time); durations and bars format as documented.
#include "engine/progress.h"

#include <cstdio>
#include <limits>
#include <string>

#include <gtest/gtest.h>

namespace nnasm {
namespace {

// Captures what a Progress writes through a real FILE*.
class Capture {
 public:
  Capture() : f_(std::tmpfile()) {}
  ~Capture() {
    if (f_) std::fclose(f_);
  }
  FILE* file() const { return f_; }
  std::string text() const {
    std::fflush(f_);
    std::rewind(f_);
    std::string s;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f_)) > 0) s.append(buf, n);
    std::fseek(f_, 0, SEEK_END);
    return s;
  }

 private:
  FILE* f_;
};

size_t count(const std::string& s, char c) {
  size_t n = 0;
  for (char x : s) n += x == c;
  return n;
}

TEST(Progress, LogModePrintsOneLinePerEpoch) {
  Capture cap;
  ASSERT_NE(cap.file(), nullptr);
  double now = 0;
  Progress p(cap.file(), false, [&] { return now; });
  for (int e = 0; e < 3; ++e) {
    p.begin_epoch(e, 3, 100);
    for (int i = 0; i < 100; ++i) {
      now += 0.5;
      p.batch(i, 0.25, 0.5, 1000);
    }
    p.end_epoch({0.4123 - e * 0.1, 0.8531, 0.841, 12.34});
  }
  const std::string out = cap.text();
  EXPECT_EQ(count(out, '\n'), 3u) << out;
  EXPECT_EQ(count(out, '\r'), 0u) << out;
  EXPECT_EQ(p.redraws(), 0);
  EXPECT_NE(out.find("epoch 1/3 train loss 0.4123 train acc 85.31% test acc 84.10% 12.3s\n"), std::string::npos)
      << out;
  EXPECT_NE(out.find("epoch 3/3 train loss 0.2123"), std::string::npos) << out;
}

TEST(Progress, TerminalModeRedrawsAtMostTenTimesASecond) {
  Capture cap;
  double now = 100;
  Progress p(cap.file(), true, [&] { return now; });
  p.begin_epoch(1, 5, 1000);
  // 1000 batches 10 ms apart: 10 s of training, so about 100 redraws (the first always draws).
  for (int i = 0; i < 1000; ++i) {
    now += 0.01;
    p.batch(i, 0.5, 0.75, 6400);
  }
  EXPECT_GE(p.redraws(), 95);
  EXPECT_LE(p.redraws(), 101);
  p.end_epoch({0.5, 0.75, 0.7, 10});
  const std::string out = cap.text();
  EXPECT_EQ(count(out, '\r'), static_cast<size_t>(p.redraws()) + 1) << "one per redraw and one for the summary";
  EXPECT_EQ(count(out, '\n'), 1u);
  EXPECT_NE(out.find("\repoch 2/5 train loss 0.5000 train acc 75.00% test acc 70.00% 10.0s"), std::string::npos);
}

TEST(Progress, TerminalLineShowsBatchBarNumbersAndEta) {
  Capture cap;
  double now = 0;
  Progress p(cap.file(), true, [&] { return now; });
  p.begin_epoch(0, 2, 10);
  now = 13;  // the first batch took 13 s: 9 more take 117 s
  p.batch(0, 2.302585, 0.1, 9.8);
  EXPECT_EQ(cap.text(), "\repoch 1/2 [##------------------] 1/10 loss 2.3026 acc 10.00% 10 samples/s ETA 1m57s");
  now = 13.05;  // too soon: nothing drawn
  p.batch(1, 2.0, 0.2, 12345.6);
  EXPECT_EQ(p.redraws(), 1);
  now = 26;
  p.batch(4, 1.5, 0.4, 12345.6);
  const std::string out = cap.text();
  EXPECT_NE(out.find("\repoch 1/2 [##########----------] 5/10 loss 1.5000 acc 40.00% 12.3k samples/s ETA 26s"),
            std::string::npos)
      << out;
  // A shorter line is padded with spaces over the leftover of the longer one before it.
  now = 200;
  p.batch(9, 1.0, 1.0, 5);
  const std::string all = cap.text();
  const size_t last = all.rfind('\r'), prev = all.rfind('\r', last - 1);
  const std::string before = all.substr(prev, last - prev), after = all.substr(last);
  EXPECT_EQ(after.size(), before.size()) << all;
  EXPECT_NE(after.find("ETA 0s   "), std::string::npos) << after;
  // A new epoch draws its first batch at once, whatever the time since the last redraw.
  p.begin_epoch(1, 2, 10);
  p.batch(0, 1.0, 0.5, 100);
  EXPECT_EQ(p.redraws(), 4);
}

TEST(Progress, DurationFormatting) {
  EXPECT_EQ(progress_duration(0), "0s");
  EXPECT_EQ(progress_duration(7.4), "7s");
  EXPECT_EQ(progress_duration(59.4), "59s");
  EXPECT_EQ(progress_duration(59.6), "1m00s");
  EXPECT_EQ(progress_duration(65), "1m05s");
  EXPECT_EQ(progress_duration(3599), "59m59s");
  EXPECT_EQ(progress_duration(7380), "2h03m");
  EXPECT_EQ(progress_duration(-1), "?");
  EXPECT_EQ(progress_duration(std::numeric_limits<double>::infinity()), "?");
}

TEST(Progress, Bar) {
  EXPECT_EQ(progress_bar(0, 4), "[----]");
  EXPECT_EQ(progress_bar(0.5, 4), "[##--]");
  EXPECT_EQ(progress_bar(1, 4), "[####]");
  EXPECT_EQ(progress_bar(2, 4), "[####]");
  EXPECT_EQ(progress_bar(std::numeric_limits<double>::quiet_NaN(), 4), "[----]");
}

}  // namespace
}  // namespace nnasm
