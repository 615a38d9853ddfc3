// Shape arithmetic shared by shape inference, kernels and the listing printer.
#include "isa/shape.h"

#include <fmt/format.h>

namespace nnasm {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::I32: return "i32";
    case DType::BF16: return "bf16";
    case DType::I8: return "i8";
    case DType::U8: return "u8";
    default: return "f32";
  }
}

Shape::Shape(std::initializer_list<int64_t> d) {
  rank = static_cast<int>(d.size() < MAX_RANK ? d.size() : MAX_RANK);
  int i = 0;
  for (int64_t v : d) {
    if (i == MAX_RANK) break;
    dims[i++] = v;
  }
}

Shape Shape::of(const int64_t* d, int r) {
  Shape s;
  s.rank = r;
  for (int i = 0; i < r; ++i) s.dims[i] = d[i];
  return s;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= dims[i];
  return n;
}

int64_t Shape::stride(int a) const {
  int64_t n = 1;
  for (int i = a + 1; i < rank; ++i) n *= dims[i];
  return n;
}

bool Shape::operator==(const Shape& o) const {
  if (rank != o.rank) return false;
  for (int i = 0; i < rank; ++i)
    if (dims[i] != o.dims[i]) return false;
  return true;
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < rank; ++i) s += fmt::format(i ? ",{}" : "{}", dims[i]);
  return s + "]";
}

std::string TensorType::str() const { return dtype_name(dtype) + shape.str(); }

int normalize_axis(int64_t axis, int rank) {
  if (axis < 0) axis += rank;
  return (axis < 0 || axis >= rank) ? -1 : static_cast<int>(axis);
}

bool broadcast_shapes(const Shape& a, const Shape& b, Shape* out) {
  Shape r;
  r.rank = a.rank > b.rank ? a.rank : b.rank;
  for (int i = 0; i < r.rank; ++i) {
    int ia = a.rank - r.rank + i, ib = b.rank - r.rank + i;
    int64_t da = ia >= 0 ? a.dims[ia] : 1, db = ib >= 0 ? b.dims[ib] : 1;
    if (da != db && da != 1 && db != 1) return false;
    r.dims[i] = da == 1 ? db : da;
  }
  *out = r;
  return true;
}

}  // namespace nnasm
