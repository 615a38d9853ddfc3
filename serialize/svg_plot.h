// Line plots of training curves as standalone SVG: one to four panels stacked vertically (e.g.
// "loss" over "accuracy"), sharing the x axis range, each with grid lines, round tick values, its
// series as polylines with point markers, and a legend. No scripts, no external fonts or styles,
// so any browser or image viewer shows the file as is.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "isa/status.h"

namespace nnasm {

struct PlotSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y); points with a NaN or infinity are skipped
  // "#rgb", "#rrggbb" or a CSS color name of letters only ("steelblue"); empty picks the next
  // color of a built-in palette.
  std::string color;
};

struct PlotPanel {
  std::string title;    // shown above the panel, e.g. "loss"
  std::string y_label;  // may be empty
  std::vector<PlotSeries> series;
};

struct PlotSpec {
  std::string title;    // shown at the top
  std::string x_label;  // shown under every panel, e.g. "epoch"
  std::vector<PlotPanel> panels;
};

// Renders `spec` as an SVG document. A series with no finite point gets a legend entry but no
// line; a single point or all-equal values get an axis range padded around them; a panel with
// no data gets the range 0..1. Markers are drawn for series of at most 100 points, where they
// still read as points. Errors: no panels or more than 4, a color that is not one of the forms
// above (naming the series). Thread-safe.
Result<std::string> svg_plot_render(const PlotSpec& spec);

// Renders and writes `spec` to `path` atomically (see atomic_file.h), mode 0644. Errors: those of
// svg_plot_render, I/O failures naming `path`. Thread-safe for distinct paths.
Status svg_plot_write(const std::string& path, const PlotSpec& spec);

// Tick values for an axis covering [lo, hi]: multiples of one step of 1, 2 or 5 times a power of
// ten, at most about `max_ticks` of them, the first at or below lo and the last at or above hi
// (so they also give the axis range), with their labels: fixed notation with exactly the step's
// decimals ("0.0", "0.2", ...), or scientific ("2e-08") for very large or small values; never
// "-0". A non-finite or reversed range becomes 0..1; an empty one is widened as the renderer does.
struct PlotTicks {
  std::vector<double> values;
  std::vector<std::string> labels;
};
PlotTicks plot_ticks(double lo, double hi, int max_ticks);

}  // namespace nnasm
