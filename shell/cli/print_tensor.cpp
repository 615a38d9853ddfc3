// The tool's tensor printer, modelled on numpy's array printing (threshold=1000, edgeitems=3,
// linewidth=75) so that output can be compared by eye with a Python session. Values are formatted
// first, then laid out, because the common column width depends on every value shown.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "isa/bf16.h"
#include "shell/cli/cli.h"

namespace nnasm {

namespace {

constexpr int64_t kThreshold = 1000;
constexpr int64_t kEdgeItems = 3;
constexpr size_t kLineWidth = 75;

class TensorPrinter {
 public:
  TensorPrinter(const TensorType& t, const void* data) : t_(t), data_(data) {
    summarize_ = t.shape.numel() > kThreshold;
  }

  std::string str() {
    if (t_.shape.rank == 0) return element(0);
    // Pass 1 finds the widest value among those shown; pass 2 lays them out.
    measuring_ = true;
    block(0, 0);
    measuring_ = false;
    out_.clear();
    col_ = 0;
    block(0, 0);
    return out_;
  }

 private:
  std::string element(int64_t i) const {
    const char* at = static_cast<const char*>(data_) + i * static_cast<int64_t>(dtype_size(t_.dtype));
    if (t_.dtype == DType::I32) {
      int32_t v;
      std::memcpy(&v, at, 4);
      return fmt::format("{}", v);
    }
    if (t_.dtype == DType::I8) return fmt::format("{}", static_cast<int>(*reinterpret_cast<const int8_t*>(at)));
    if (t_.dtype == DType::U8) return fmt::format("{}", static_cast<int>(*reinterpret_cast<const uint8_t*>(at)));
    float v;
    if (t_.dtype == DType::BF16) {
      uint16_t h;
      std::memcpy(&h, at, 2);
      v = bf16_to_f32(h);
    } else {
      std::memcpy(&v, at, 4);
    }
    return fmt::format("{:.6g}", v);
  }

  // Whether axis `a` shows only its first and last kEdgeItems entries.
  bool elided(int a) const { return summarize_ && t_.shape[a] > 2 * kEdgeItems; }

  // The shown indices of axis `a` in order, with -1 where the "..." goes.
  std::vector<int64_t> shown(int a) const {
    std::vector<int64_t> v;
    const int64_t d = t_.shape[a];
    if (!elided(a)) {
      for (int64_t i = 0; i < d; ++i) v.push_back(i);
      return v;
    }
    for (int64_t i = 0; i < kEdgeItems; ++i) v.push_back(i);
    v.push_back(-1);
    for (int64_t i = d - kEdgeItems; i < d; ++i) v.push_back(i);
    return v;
  }

  void put(const std::string& s) {
    if (measuring_) return;
    out_ += s;
    const size_t nl = s.rfind('\n');
    col_ = nl == std::string::npos ? col_ + s.size() : s.size() - nl - 1;
  }

  // The sub-array of axis `a` starting at flat element `base`.
  void block(int a, int64_t base) {
    const int rank = t_.shape.rank;
    const int64_t stride = t_.shape.stride(a);
    const std::vector<int64_t> idx = shown(a);
    put("[");
    if (a == rank - 1) {
      for (size_t k = 0; k < idx.size(); ++k) {
        std::string item;
        if (idx[k] < 0) {
          item = "...";
        } else {
          item = element(base + idx[k]);
          if (measuring_) {
            width_ = std::max(width_, item.size());
            continue;
          }
          item = std::string(width_ - item.size(), ' ') + item;
        }
        if (k == 0) {
          put(item);
        } else if (col_ + 2 + item.size() + 1 > kLineWidth) {
          // Wrapped rows continue under the first value, as numpy does.
          put(",\n" + std::string(a + 1, ' ') + item);
        } else {
          put(", " + item);
        }
      }
    } else {
      const std::string sep = "," + std::string(rank - a - 1, '\n') + std::string(a + 1, ' ');
      for (size_t k = 0; k < idx.size(); ++k) {
        if (k) put(sep);
        if (idx[k] < 0) {
          put("...");
        } else {
          block(a + 1, base + idx[k] * stride);
        }
      }
    }
    put("]");
  }

  const TensorType& t_;
  const void* data_;
  bool summarize_ = false;
  bool measuring_ = false;
  size_t width_ = 0;
  std::string out_;
  size_t col_ = 0;
};

}  // namespace

std::string format_tensor(const TensorType& type, const void* data) { return TensorPrinter(type, data).str(); }

}  // namespace nnasm
