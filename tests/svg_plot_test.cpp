// Tests of the training-log writers: the SVG plot (well-formed markup by a small tag-balance
// check, the series and their point counts, round tick labels, edge cases: one point, equal
// values, NaN, empty series, hostile text and colors) and the CSV log (layout, shortest
// round-trip numbers, quoting, width errors, atomic replacement).
#include "serialize/svg_plot.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "serialize/csv_log.h"
#include "tests/temp_dir_test.h"

namespace nnasm {
namespace {

// Checks that every element opened is closed in order, skipping the XML declaration and
// self-closing tags; returns "" or what is wrong.
std::string tag_balance(const std::string& s) {
  std::vector<std::string> stack;
  size_t i = 0;
  while ((i = s.find('<', i)) != std::string::npos) {
    const size_t end = s.find('>', i);
    if (end == std::string::npos) return "unterminated tag at " + std::to_string(i);
    const std::string tag = s.substr(i + 1, end - i - 1);
    i = end + 1;
    if (tag.empty()) return "empty tag";
    if (tag[0] == '?') continue;
    if (tag.back() == '/') continue;
    const std::string name = tag.substr(tag[0] == '/' ? 1 : 0, tag.find_first_of(" \n/", 1) - (tag[0] == '/'));
    if (tag[0] != '/') {
      stack.push_back(name);
      continue;
    }
    if (stack.empty() || stack.back() != name) return "unexpected </" + name + ">";
    stack.pop_back();
  }
  return stack.empty() ? "" : "unclosed <" + stack.back() + ">";
}

size_t count_of(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t i = s.find(what); i != std::string::npos; i = s.find(what, i + 1)) ++n;
  return n;
}

// The point counts of each polyline, in order.
std::vector<size_t> polyline_points(const std::string& s) {
  std::vector<size_t> v;
  for (size_t i = s.find("<polyline"); i != std::string::npos; i = s.find("<polyline", i + 1)) {
    const size_t a = s.find("points=\"", i) + 8, b = s.find('"', a);
    const std::string pts = s.substr(a, b - a);
    v.push_back(pts.empty() ? 0 : count_of(pts, " ") + 1);
  }
  return v;
}

std::vector<std::string> tick_labels(const std::string& s) {
  std::vector<std::string> v;
  const std::string open = "<text class=\"tick\"";
  for (size_t i = s.find(open); i != std::string::npos; i = s.find(open, i + 1)) {
    const size_t a = s.find('>', i) + 1;
    v.push_back(s.substr(a, s.find('<', a) - a));
  }
  return v;
}

// True if `v` is k·m·10^e for an integer k and m in {1, 2, 5} for some e: a round number.
bool round_step(double step) {
  const double e = std::floor(std::log10(step));
  const double m = step / std::pow(10.0, e);
  for (double c : {1.0, 2.0, 5.0, 10.0})
    if (std::abs(m - c) < 1e-9) return true;
  return false;
}

PlotSpec training_spec(int epochs) {
  PlotSpec spec;
  spec.title = "fashion-mnist MLP";
  spec.x_label = "epoch";
  PlotPanel loss{"loss", "cross-entropy", {{"train loss", {}, "#1f77b4"}}};
  PlotPanel acc{"accuracy", "", {{"train acc", {}, "#1f77b4"}, {"test acc", {}, "darkorange"}}};
  for (int e = 1; e <= epochs; ++e) {
    loss.series[0].points.push_back({e, 2.3 / e});
    acc.series[0].points.push_back({e, 1 - 0.5 / e});
    acc.series[1].points.push_back({e, 0.97 - 0.5 / e});
  }
  spec.panels = {loss, acc};
  return spec;
}

TEST(SvgPlot, TwoPanelsWellFormedWithSeriesAndRoundTicks) {
  Result<std::string> r = svg_plot_render(training_spec(12));
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  const std::string& s = *r;
  ASSERT_EQ(s.rfind("<?xml", 0), 0u);
  EXPECT_EQ(s.find("<svg"), s.find('\n') + 1) << "<svg right after the xml declaration";
  EXPECT_EQ(s.substr(s.size() - 7), "</svg>\n");
  EXPECT_EQ(tag_balance(s), "");
  EXPECT_EQ(s.find("<script"), std::string::npos);
  EXPECT_EQ(s.find("href"), std::string::npos) << "no external resources";
  for (const char* name : {"train loss", "train acc", "test acc", "fashion-mnist MLP", "accuracy", "epoch"})
    EXPECT_NE(s.find(name), std::string::npos) << name;
  EXPECT_EQ(polyline_points(s), (std::vector<size_t>{12, 12, 12}));
  EXPECT_EQ(count_of(s, "<circle"), 36u + 3u) << "a marker per point and one per legend entry";

  const std::vector<std::string> ticks = tick_labels(s);
  ASSERT_GE(ticks.size(), 12u);
  std::vector<double> v;
  for (const std::string& t : ticks) {
    char* end = nullptr;
    v.push_back(std::strtod(t.c_str(), &end));
    EXPECT_EQ(*end, '\0') << "tick label '" << t << "' is not a number";
    EXPECT_EQ(t.find("000001"), std::string::npos) << "tick label '" << t << "' shows rounding noise";
  }
  // Consecutive ticks of one axis differ by one round step.
  for (size_t i = 1; i < v.size(); ++i) {
    const double d = v[i] - v[i - 1];
    if (d > 0) {
      EXPECT_TRUE(round_step(d)) << ticks[i - 1] << " -> " << ticks[i];
    }
  }
}

TEST(SvgPlot, TicksAreRoundAndCoverTheRange) {
  PlotTicks t = plot_ticks(0.137, 0.912, 8);
  ASSERT_FALSE(t.values.empty());
  EXPECT_LE(t.values.front(), 0.137);
  EXPECT_GE(t.values.back(), 0.912);
  EXPECT_EQ(t.labels, (std::vector<std::string>{"0.0", "0.2", "0.4", "0.6", "0.8", "1.0"}));
  t = plot_ticks(1, 30, 8);
  EXPECT_EQ(t.values, (std::vector<double>{0, 5, 10, 15, 20, 25, 30}));
  EXPECT_EQ(t.labels, (std::vector<std::string>{"0", "5", "10", "15", "20", "25", "30"}));
  t = plot_ticks(-0.3, 0.2, 6);
  EXPECT_EQ(t.labels, (std::vector<std::string>{"-0.3", "-0.2", "-0.1", "0.0", "0.1", "0.2"}));
  t = plot_ticks(1e-6, 5e-6, 5);
  EXPECT_EQ(t.labels, (std::vector<std::string>{"0.000001", "0.000002", "0.000003", "0.000004", "0.000005"}));
  t = plot_ticks(1e-9, 5e-9, 5);
  EXPECT_EQ(t.labels, (std::vector<std::string>{"1e-09", "2e-09", "3e-09", "4e-09", "5e-09"}));
  t = plot_ticks(1e299, 1e300, 6);
  EXPECT_EQ(t.labels.back(), "1e+300");
  // Ranges that are empty, degenerate or beyond double's comfortable range still give an axis.
  for (auto r : std::vector<std::pair<double, double>>{{5, 5}, {0, 0}, {-0.0, 0.0}, {1e-320, 2e-320}, {3, 1},
                                                       {-1e308, 1e308}, {1e17, 1e17 + 16}}) {
    t = plot_ticks(r.first, r.second, 8);
    ASSERT_GE(t.values.size(), 2u) << r.first << " " << r.second;
    EXPECT_LE(t.values.size(), 10u);
    EXPECT_LT(t.values.front(), t.values.back());
    for (const std::string& l : t.labels) EXPECT_LE(l.size(), 20u) << l;
  }
}

TEST(SvgPlot, EdgeCases) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  PlotSpec spec;
  spec.title = "edges <&> \"quoted\"";
  spec.x_label = "step";
  spec.panels.push_back({"single", "", {{"one", {{3, 0.5}}, ""}}});
  spec.panels.push_back({"flat", "", {{"flat", {{1, 2}, {2, 2}, {3, 2}}, ""}, {"empty", {}, ""}}});
  spec.panels.push_back({"gaps", "", {{"holes", {{1, 1}, {2, nan}, {nan, 3}, {4, 4}}, ""}}});
  spec.panels.push_back({"nothing", "", {}});
  Result<std::string> r = svg_plot_render(spec);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  const std::string& s = *r;
  EXPECT_EQ(tag_balance(s), "");
  EXPECT_EQ(s.find("nan"), std::string::npos);
  EXPECT_EQ(s.find("inf"), std::string::npos);
  EXPECT_NE(s.find("edges &lt;&amp;&gt; &quot;quoted&quot;"), std::string::npos);
  EXPECT_EQ(polyline_points(s), (std::vector<size_t>{1, 3, 2})) << "the empty series draws no line";
  EXPECT_NE(s.find(">empty</text>"), std::string::npos) << "but has a legend entry";
  for (const std::string& t : tick_labels(s)) EXPECT_EQ(t.find('e'), std::string::npos) << t;
}

TEST(SvgPlot, Errors) {
  PlotSpec spec;
  EXPECT_FALSE(svg_plot_render(spec).is_ok());
  spec.panels.assign(5, PlotPanel{});
  EXPECT_FALSE(svg_plot_render(spec).is_ok());
  spec.panels.assign(1, PlotPanel{"p", "", {{"s", {{1, 1}}, "red\" onload=\"x"}}});
  Result<std::string> r = svg_plot_render(spec);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("series 's'"), std::string::npos) << r.status().message();
}

class LogFiles : public TempDirTest {};

TEST_F(LogFiles, SvgWriteIsAtomicAndNamesThePath) {
  ASSERT_TRUE(svg_plot_write(path("plot.svg"), training_spec(3)).is_ok());
  EXPECT_EQ(get("plot.svg"), *svg_plot_render(training_spec(3)));
  EXPECT_EQ(entries(), std::vector<std::string>{"plot.svg"}) << "no temporary left behind";
  Status s = svg_plot_write(path("no/dir/plot.svg"), training_spec(3));
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("no/dir/plot.svg"), std::string::npos) << s.message();
  s = svg_plot_write(path("bad.svg"), PlotSpec{});
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.message().rfind(path("bad.svg") + ": ", 0), 0u) << s.message();
}

TEST_F(LogFiles, CsvLayoutNumbersAndQuoting) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  ASSERT_TRUE(csv_write(path("log.csv"), {"epoch", "loss, train", "say \"hi\""},
                        {{1, 0.1, 1e-7}, {2, 2.0 / 3, nan}, {3, -0.0, 123456789012}})
                  .is_ok());
  EXPECT_EQ(get("log.csv"),
            "epoch,\"loss, train\",\"say \"\"hi\"\"\"\n"
            "1,0.1,1e-07\n"
            "2,0.6666666666666666,nan\n"
            "3,-0,123456789012\n");
  // Rewriting replaces the file whole.
  ASSERT_TRUE(csv_write(path("log.csv"), {"a"}, {}).is_ok());
  EXPECT_EQ(get("log.csv"), "a\n");
  EXPECT_EQ(entries(), std::vector<std::string>{"log.csv"});
}

TEST_F(LogFiles, CsvErrors) {
  Status s = csv_write(path("w.csv"), {"a", "b"}, {{1, 2}, {3}});
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("row 1 has 1 values but the header has 2 columns"), std::string::npos) << s.message();
  EXPECT_TRUE(entries().empty());
  s = csv_write(path("none/w.csv"), {"a"}, {{1}});
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find(path("none/w.csv")), std::string::npos) << s.message();
}

}  // namespace
}  // namespace nnasm
