// The SVG renderer. Layout is fixed in pixels (a 760-wide page, a legend column on the right), so
// the output is reproducible byte for byte and tests can count what it emits. All user text is
// XML-escaped and colors are validated, because both end up inside markup.
#include "serialize/svg_plot.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iterator>
#include <limits>

#include <fmt/format.h>

#include "serialize/atomic_file.h"

namespace nnasm {

namespace {

constexpr int kMaxPanels = 4;
constexpr size_t kMaxMarkedPoints = 100;
constexpr int kMaxTicks = 8;

// Page layout, in pixels.
constexpr double kWidth = 760;
constexpr double kLeft = 70;      // room for y tick labels and the y label
constexpr double kRight = 170;    // the legend column
constexpr double kTitleH = 40;
constexpr double kPanelTop = 30;  // the panel title
constexpr double kPlotH = 240;
constexpr double kPanelBottom = 50;  // x tick labels and the x label
constexpr double kPlotW = kWidth - kLeft - kRight;

// Matplotlib's "tab10", distinguishable for most color-blind readers.
const char* const kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&apos;"; break;
      default:
        // Control characters are not allowed in XML 1.0 text.
        o += static_cast<unsigned char>(c) < 0x20 ? ' ' : c;
    }
  }
  return o;
}

bool valid_color(const std::string& c) {
  if (c.empty()) return false;
  if (c[0] == '#') {
    if (c.size() != 4 && c.size() != 7) return false;
    return std::all_of(c.begin() + 1, c.end(), [](char ch) { return std::isxdigit(static_cast<unsigned char>(ch)); });
  }
  return c.size() <= 32 && std::all_of(c.begin(), c.end(), [](char ch) { return std::isalpha(static_cast<unsigned char>(ch)); });
}

bool finite_point(const std::pair<double, double>& p) { return std::isfinite(p.first) && std::isfinite(p.second); }

struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  void add(double v) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
};

// An axis: its ticks, whose ends are the range drawn.
struct Axis {
  PlotTicks ticks;
  double lo = 0, hi = 1;
  explicit Axis(const Range& r) : ticks(plot_ticks(r.lo, r.hi, kMaxTicks)) {
    lo = ticks.values.front();
    hi = ticks.values.back();
  }
  // 0..1 along the axis.
  double frac(double v) const { return (v - lo) / (hi - lo); }
};

std::string num(double v) { return fmt::format("{:.2f}", v); }

void emit_panel(std::string& s, const PlotPanel& panel, const std::string& x_label, const Axis& xa, double top,
                int* palette_next) {
  Range yr;
  for (const PlotSeries& ser : panel.series)
    for (const auto& p : ser.points)
      if (finite_point(p)) yr.add(p.second);
  const Axis ya(yr);
  const double bottom = top + kPlotH, right = kLeft + kPlotW;
  auto px = [&](double x) { return kLeft + xa.frac(x) * kPlotW; };
  auto py = [&](double y) { return bottom - ya.frac(y) * kPlotH; };
  auto out = std::back_inserter(s);

  fmt::format_to(out, "<g class=\"panel\">\n");
  fmt::format_to(out, "<text x=\"{}\" y=\"{}\" font-size=\"14\" font-weight=\"bold\">{}</text>\n", num(kLeft),
                 num(top - 10), escape(panel.title));
  fmt::format_to(out, "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#ffffff\" stroke=\"#999999\"/>\n",
                 num(kLeft), num(top), num(kPlotW), num(kPlotH));
  for (size_t i = 0; i < xa.ticks.values.size(); ++i) {
    const double v = xa.ticks.values[i];
    fmt::format_to(out, "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#e5e5e5\"/>\n", num(px(v)),
                   num(top), num(bottom));
    fmt::format_to(out, "<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", num(px(v)),
                   num(bottom + 16), xa.ticks.labels[i]);
  }
  for (size_t i = 0; i < ya.ticks.values.size(); ++i) {
    const double v = ya.ticks.values[i];
    fmt::format_to(out, "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#e5e5e5\"/>\n", num(kLeft),
                   num(py(v)), num(right));
    fmt::format_to(out, "<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", num(kLeft - 6),
                   num(py(v) + 4), ya.ticks.labels[i]);
  }
  if (!x_label.empty())
    fmt::format_to(out, "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", num(kLeft + kPlotW / 2),
                   num(bottom + 36), escape(x_label));
  if (!panel.y_label.empty())
    fmt::format_to(out, "<text x=\"{0}\" y=\"{1}\" text-anchor=\"middle\" transform=\"rotate(-90 {0} {1})\">{2}</text>\n",
                   num(18), num(top + kPlotH / 2), escape(panel.y_label));

  for (size_t k = 0; k < panel.series.size(); ++k) {
    const PlotSeries& ser = panel.series[k];
    const std::string color = ser.color.empty() ? kPalette[(*palette_next)++ % 10] : ser.color;
    std::vector<std::pair<double, double>> pts;
    for (const auto& p : ser.points)
      if (finite_point(p)) pts.push_back(p);
    fmt::format_to(out, "<g class=\"series\">\n<title>{}</title>\n", escape(ser.name));
    if (!pts.empty()) {
      fmt::format_to(out, "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"", color);
      for (size_t i = 0; i < pts.size(); ++i)
        fmt::format_to(out, "{}{},{}", i ? " " : "", num(px(pts[i].first)), num(py(pts[i].second)));
      fmt::format_to(out, "\"/>\n");
      if (pts.size() <= kMaxMarkedPoints)
        for (const auto& p : pts)
          fmt::format_to(out, "<circle cx=\"{}\" cy=\"{}\" r=\"3\" fill=\"{}\"/>\n", num(px(p.first)),
                         num(py(p.second)), color);
    }
    const double ly = top + 12 + 20 * double(k);
    fmt::format_to(out, "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"2\"/>\n",
                   num(right + 12), num(ly), num(right + 36), num(ly), color);
    fmt::format_to(out, "<circle cx=\"{}\" cy=\"{}\" r=\"3\" fill=\"{}\"/>\n", num(right + 24), num(ly), color);
    fmt::format_to(out, "<text class=\"legend\" x=\"{}\" y=\"{}\">{}</text>\n</g>\n", num(right + 42), num(ly + 4),
                   escape(ser.name));
  }
  fmt::format_to(out, "</g>\n");
}

}  // namespace

PlotTicks plot_ticks(double lo, double hi, int max_ticks) {
  if (max_ticks < 2) max_ticks = 2;
  // Beyond these magnitudes the arithmetic below overflows or underflows (10^e for |e| > 308);
  // training curves never get there, so such a range is shown as 0..1.
  constexpr double kMaxMagnitude = 1e300, kMinSpan = 1e-12;
  if (!std::isfinite(lo) || !std::isfinite(hi) || lo > hi || std::abs(lo) > kMaxMagnitude ||
      std::abs(hi) > kMaxMagnitude) {
    lo = 0;
    hi = 1;
  }
  // A range too thin to divide (one point, or all values equal up to rounding) is padded around
  // its middle by a tenth of its magnitude, or by one around zero.
  const double mid = lo / 2 + hi / 2;
  if (!(hi - lo > std::abs(mid) * 1e-9)) {
    const double pad = mid != 0 ? std::abs(mid) * 0.1 : 1;
    lo = mid - pad;
    hi = mid + pad;
  }
  if (hi - lo < kMinSpan) {
    lo = mid - kMinSpan / 2;
    hi = mid + kMinSpan / 2;
  }
  const double raw = (hi - lo) / (max_ticks - 1);
  int e = static_cast<int>(std::floor(std::log10(raw)));
  const double r = raw / std::pow(10.0, e);
  constexpr double kSlack = 1 + 1e-9;  // so that a step of 0.999999999·10^e counts as 10^e
  int m = r <= kSlack ? 1 : r <= 2 * kSlack ? 2 : r <= 5 * kSlack ? 5 : 10;
  if (m == 10) {
    m = 1;
    ++e;
  }
  // step = m·10^e. Values are computed as integers over an exact power of ten where e < 0, so
  // 0.1·3 prints and compares as 0.3.
  const double scale = std::pow(10.0, std::abs(e));
  auto value = [&](double k) { return e < 0 ? k * m / scale : k * m * scale; };
  const double step = value(1);
  // With the same slack, 5e-6 / 1e-6 = 5.000000000000001 ends the axis at 5, not 6.
  double k0 = std::floor(lo / step + 1e-9), k1 = std::ceil(hi / step - 1e-9);
  // Cannot happen after the clamping above; kept so that no input can make the loop run away.
  if (!(k1 - k0 <= 4.0 * max_ticks)) k1 = k0 + 1;
  if (k1 - k0 < 1) k1 = k0 + 1;  // an axis needs two distinct ends
  PlotTicks t;
  for (double k = k0; k <= k1; ++k) t.values.push_back(value(k));
  // Fixed notation with exactly the step's decimals while that stays short; beyond, scientific
  // with as many significant digits as the largest k·m has, so labels stay round either way.
  const double biggest = std::max(std::abs(t.values.front()), std::abs(t.values.back()));
  const bool fixed = e >= -6 && biggest < 1e9;
  const int digits = static_cast<int>(std::floor(std::log10(std::max(std::abs(k0), std::abs(k1)) * m))) + 1;
  for (double v : t.values) {
    if (v == 0) v = 0;  // no "-0"
    t.labels.push_back(fixed ? fmt::format("{:.{}f}", v, e < 0 ? -e : 0) : fmt::format("{:.{}g}", v, std::max(digits, 1)));
  }
  return t;
}

Result<std::string> svg_plot_render(const PlotSpec& spec) {
  if (spec.panels.empty() || spec.panels.size() > kMaxPanels)
    return Status::errorf("plot '{}': has {} panels, must have 1 to {}", spec.title, spec.panels.size(), kMaxPanels);
  Range xr;
  for (const PlotPanel& panel : spec.panels)
    for (const PlotSeries& ser : panel.series) {
      if (!ser.color.empty() && !valid_color(ser.color))
        return Status::errorf("plot '{}': series '{}': color '{}' is not #rgb, #rrggbb or a color name", spec.title,
                              ser.name, ser.color);
      for (const auto& p : ser.points)
        if (finite_point(p)) xr.add(p.first);
    }
  const Axis xa(xr);
  const double panel_h = kPanelTop + kPlotH + kPanelBottom;
  const double height = kTitleH + panel_h * double(spec.panels.size());

  std::string s = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  auto out = std::back_inserter(s);
  fmt::format_to(out,
                 "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
                 "font-family=\"sans-serif\" font-size=\"12\">\n",
                 kWidth, height);
  fmt::format_to(out, "<rect width=\"{}\" height=\"{}\" fill=\"#ffffff\"/>\n", kWidth, height);
  fmt::format_to(out, "<text x=\"{}\" y=\"26\" text-anchor=\"middle\" font-size=\"16\" font-weight=\"bold\">{}</text>\n",
                 num(kWidth / 2), escape(spec.title));
  int palette_next = 0;
  for (size_t i = 0; i < spec.panels.size(); ++i)
    emit_panel(s, spec.panels[i], spec.x_label, xa, kTitleH + panel_h * double(i) + kPanelTop, &palette_next);
  s += "</svg>\n";
  return s;
}

Status svg_plot_write(const std::string& path, const PlotSpec& spec) {
  Result<std::string> svg = svg_plot_render(spec);
  if (!svg) return svg.status().with_prefix(path + ": ");
  return write_file_atomic(path, *svg);
}

}  // namespace nnasm
