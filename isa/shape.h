// Shapes and element types: a fixed-capacity rank 0–6 shape (no heap, so kernels may copy it
// freely on the hot path) and the dtype tag.
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace nnasm {

constexpr int MAX_RANK = 6;

// F32 and I32 are what instructions compute with. BF16, I8 and U8 are storage types for reduced-
// precision inference (weights, their quantized activations): only instructions that say so take
// them (OPF_REDUCED), and model inputs and outputs stay f32 or i32.
enum class DType : uint8_t { F32 = 0, I32 = 1, BF16 = 2, I8 = 3, U8 = 4 };
constexpr int DTYPE_COUNT = 5;
const char* dtype_name(DType t);
inline size_t dtype_size(DType t) { return t == DType::BF16 ? 2 : t == DType::I8 || t == DType::U8 ? 1 : 4; }
inline bool dtype_reduced(DType t) { return t == DType::BF16 || t == DType::I8 || t == DType::U8; }

struct Shape {
  int rank = 0;
  std::array<int64_t, MAX_RANK> dims{};

  Shape() = default;
  Shape(std::initializer_list<int64_t> d);
  static Shape of(const int64_t* d, int rank);

  int64_t operator[](int i) const { return dims[i]; }
  int64_t& operator[](int i) { return dims[i]; }
  int64_t numel() const;
  // Elements after axis `a` (row-major stride of axis a).
  int64_t stride(int a) const;
  bool operator==(const Shape& o) const;
  bool operator!=(const Shape& o) const { return !(*this == o); }
  std::string str() const;  // "[2,3]"
};

// A tensor's type as shape inference sees it.
struct TensorType {
  DType dtype = DType::F32;
  Shape shape;
  bool operator==(const TensorType& o) const { return dtype == o.dtype && shape == o.shape; }
  std::string str() const;  // "f32[2,3]"
};

// Normalizes a possibly negative axis against `rank`; returns -1 if out of range.
int normalize_axis(int64_t axis, int rank);

// Numpy broadcasting of trailing dimensions; false if the shapes are incompatible.
bool broadcast_shapes(const Shape& a, const Shape& b, Shape* out);

}  // namespace nnasm
