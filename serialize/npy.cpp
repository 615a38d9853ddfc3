// The .npy reader and writer. The header is a Python dict literal; rather than a general Python
// parser it gets a small strict one that accepts exactly what NumPy writes (keys in any order,
// single or double quotes, an optional trailing comma) and rejects everything else by position.
// Sizes are checked before anything is allocated: the header length against a fixed cap, the
// shape against check_shape, and the data length against the shape.
#include "serialize/npy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <new>
#include <utility>

#include <fmt/format.h>

#include "isa/bf16.h"
#include "isa/program.h"
#include "serialize/atomic_file.h"

namespace nnasm {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
// NumPy itself refuses headers over 10000 bytes by default; a real header for rank <= 6 is under
// 200, so anything near this cap is corruption, not a big array.
constexpr size_t kMaxHeaderLen = 65536;
constexpr size_t kMaxPreamble = 12;  // magic, version, 4-byte length (versions 2 and 3)

bool host_is_little_endian() {
  const uint32_t one = 1;
  unsigned char b;
  std::memcpy(&b, &one, 1);
  return b == 1;
}

// The file stores little-endian words; on a big-endian host each is reversed in place.
void words_from_le(void* data, size_t n) {
  if (host_is_little_endian()) return;
  auto* p = static_cast<unsigned char*>(data);
  for (size_t i = 0; i < n; ++i, p += 4) {
    std::swap(p[0], p[3]);
    std::swap(p[1], p[2]);
  }
}

// Where the header dict starts and how long it is, from the fixed-size preamble.
struct Preamble {
  size_t header_start = 0;
  size_t header_len = 0;
};

// `b` holds the first bytes of the file (all of them if the file is shorter than kMaxPreamble).
Status parse_preamble(std::string_view b, const std::string& what, Preamble* p) {
  if (b.empty()) return Status::errorf("{}: empty file, not a .npy file", what);
  const size_t m = b.size() < kMagicLen ? b.size() : kMagicLen;
  if (b.compare(0, m, std::string_view(kMagic, m)) != 0)
    return Status::errorf("{}: not a .npy file (bad magic; expected \\x93NUMPY)", what);
  if (b.size() < kMagicLen + 2)
    return Status::errorf("{}: file ends inside the preamble ({} bytes)", what, b.size());
  const unsigned major = static_cast<unsigned char>(b[6]), minor = static_cast<unsigned char>(b[7]);
  if (major < 1 || major > 3 || minor != 0)
    return Status::errorf("{}: unsupported .npy format version {}.{} (1.0, 2.0 and 3.0 are supported)",
                          what, major, minor);
  const size_t len_bytes = major == 1 ? 2 : 4;
  if (b.size() < 8 + len_bytes)
    return Status::errorf("{}: file ends inside the preamble ({} bytes)", what, b.size());
  size_t len = 0;
  for (size_t i = 0; i < len_bytes; ++i) len |= size_t(static_cast<unsigned char>(b[8 + i])) << (8 * i);
  if (len > kMaxHeaderLen)
    return Status::errorf("{}: header length {} is absurd (limit {})", what, len, kMaxHeaderLen);
  p->header_start = 8 + len_bytes;
  p->header_len = len;
  return Status::ok();
}

// A strict recursive-descent parser for the header dict. `base` is the dict's byte offset in the
// file, so that messages point at the offending byte.
class HeaderParser {
 public:
  HeaderParser(std::string_view s, size_t base, const std::string& what) : s_(s), base_(base), what_(what) {}

  // `elem_size`: bytes per element in the file; `descr`: its dtype string.
  Status parse(TensorType* type, size_t* elem_size, std::string* descr_out) {
    skip_ws();
    if (!eat('{')) return fail("header is not a dict (expected '{')");
    bool have_descr = false, have_order = false, have_shape = false;
    std::string descr;
    bool fortran = false;
    Shape shape;
    int rank_seen = 0;
    skip_ws();
    while (!eat('}')) {
      const size_t key_pos = pos_;
      std::string key;
      NNASM_TRY(parse_string(&key, "a quoted key or '}'"));
      skip_ws();
      if (!eat(':')) return fail("expected ':' after key");
      skip_ws();
      if (key == "descr") {
        if (have_descr) return fail_at(key_pos, "duplicate key 'descr'");
        have_descr = true;
        NNASM_TRY(parse_string(&descr, "a quoted dtype string for 'descr'"));
      } else if (key == "fortran_order") {
        if (have_order) return fail_at(key_pos, "duplicate key 'fortran_order'");
        have_order = true;
        NNASM_TRY(parse_bool(&fortran));
      } else if (key == "shape") {
        if (have_shape) return fail_at(key_pos, "duplicate key 'shape'");
        have_shape = true;
        NNASM_TRY(parse_shape(&shape, &rank_seen));
      } else {
        return fail_at(key_pos, fmt::format("unexpected key '{}'", key));
      }
      skip_ws();
      if (eat(',')) {
        skip_ws();
        continue;
      }
      skip_ws();
      if (!eat('}')) return fail("expected ',' or '}' in header dict");
      break;
    }
    skip_ws();
    if (pos_ != s_.size()) return fail("unexpected text after the header dict");

    if (!have_descr) return Status::errorf("{}: header has no 'descr' key", what_);
    if (!have_order) return Status::errorf("{}: header has no 'fortran_order' key", what_);
    if (!have_shape) return Status::errorf("{}: header has no 'shape' key", what_);
    // int64 is narrowed to i32 and bool widened to f32 0/1 (ONNX BOOL's form) as they are read.
    if (descr == "<f4" || descr == "|b1") {
      type->dtype = DType::F32;
    } else if (descr == "<i4" || descr == "<i8") {
      type->dtype = DType::I32;
    } else if (descr == "|i1" || descr == "|u1") {
      type->dtype = descr == "|i1" ? DType::I8 : DType::U8;
    } else {
      return Status::errorf("{}: unsupported dtype '{}' (little-endian '<f4', '<i4', '<i8', int8 '|i1', uint8 '|u1' "
                            "and bool '|b1' are supported)",
                            what_, descr);
    }
    *elem_size = descr == "<i8" ? 8 : descr[0] == '|' ? 1 : 4;
    *descr_out = descr;
    if (fortran) return Status::errorf("{}: fortran_order True is not supported (C order only)", what_);
    if (rank_seen > MAX_RANK)
      return Status::errorf("{}: rank {} is more than the supported {}", what_, rank_seen, MAX_RANK);
    NNASM_TRY(check_shape(shape, fmt::format("{}: shape", what_)));
    type->shape = shape;
    return Status::ok();
  }

 private:
  Status fail(const std::string& msg) const { return fail_at(pos_, msg); }
  Status fail_at(size_t pos, const std::string& msg) const {
    return Status::errorf("{}: malformed header at byte {}: {}", what_, base_ + pos, msg);
  }
  bool eat(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t' || s_[pos_] == '\r')) ++pos_;
  }
  bool eat_word(std::string_view w) {
    if (s_.substr(pos_, w.size()) != w) return false;
    const size_t end = pos_ + w.size();
    // "Trueish" is not True.
    if (end < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[end])) || s_[end] == '_')) return false;
    pos_ = end;
    return true;
  }

  // A Python string literal without escapes, which NumPy never needs in a header.
  Status parse_string(std::string* out, const char* expected) {
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"'))
      return fail(fmt::format("expected {}", expected));
    const char q = s_[pos_++];
    const size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] != q) {
      if (s_[pos_] == '\\' || s_[pos_] == '\n') return fail("escapes and newlines in strings are not supported");
      ++pos_;
    }
    if (pos_ >= s_.size()) return fail_at(start - 1, "unterminated string");
    *out = std::string(s_.substr(start, pos_ - start));
    ++pos_;
    return Status::ok();
  }

  Status parse_bool(bool* out) {
    if (eat_word("True")) {
      *out = true;
    } else if (eat_word("False")) {
      *out = false;
    } else {
      return fail("expected True or False for 'fortran_order'");
    }
    return Status::ok();
  }

  // A tuple of non-negative integers: (), (n,), (n, m), (n, m,). Python 2's `3L` is accepted
  // because old NumPy wrote it. Only the first MAX_RANK dims are kept; `rank` counts all.
  Status parse_shape(Shape* shape, int* rank) {
    if (!eat('(')) return fail("expected a tuple for 'shape'");
    *rank = 0;
    skip_ws();
    if (eat(')')) return Status::ok();
    for (;;) {
      if (pos_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
        if (pos_ < s_.size() && s_[pos_] == '-') return fail("negative dimension in 'shape'");
        return fail("expected a non-negative integer in 'shape'");
      }
      int64_t v = 0;
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
        v = v * 10 + (s_[pos_++] - '0');
        if (v > MAX_TENSOR_ELEMENTS) return fail(fmt::format("dimension is over the limit of {} elements", MAX_TENSOR_ELEMENTS));
      }
      eat('L');
      if (*rank < MAX_RANK) shape->dims[*rank] = v;
      ++*rank;
      skip_ws();
      const bool comma = eat(',');
      skip_ws();
      if (eat(')')) {
        // (3) is the integer 3 in Python, not a tuple.
        if (*rank == 1 && !comma) return fail("'shape' (n) is not a tuple; NumPy writes (n,)");
        break;
      }
      if (!comma) return fail("expected ',' or ')' in 'shape'");
    }
    shape->rank = *rank < MAX_RANK ? *rank : MAX_RANK;
    return Status::ok();
  }

  std::string_view s_;
  size_t base_;
  const std::string& what_;
  size_t pos_ = 0;
};

// The array as the file stores it: "f32[2]", "int64[2,3]", "bool[4]".
std::string stored_str(const TensorType& t, const std::string& descr) {
  if (descr != "<i8" && descr != "|b1") return t.str();
  std::string s = t.str();
  return (descr == "<i8" ? "int64" : "bool") + s.substr(s.find('['));
}

// Checks the header and the data length; fills `type`. `header` is the dict text, `data_len` the
// number of bytes after it.
Status check_layout(std::string_view header, size_t header_start, size_t data_len, const std::string& what,
                    TensorType* type, size_t* elem_size, std::string* descr) {
  NNASM_TRY(HeaderParser(header, header_start, what).parse(type, elem_size, descr));
  const uint64_t need = uint64_t(type->shape.numel()) * *elem_size;
  if (data_len < need)
    return Status::errorf("{}: data is {} bytes, shorter than the {} bytes that {} needs", what, data_len, need,
                          stored_str(*type, *descr));
  if (data_len > need)
    return Status::errorf("{}: data is {} bytes, longer than the {} bytes that {} needs", what, data_len, need,
                          stored_str(*type, *descr));
  return Status::ok();
}

// Sizes the vector of `out`'s dtype to `n` elements and returns its storage.
Result<void*> allocate_elements(NpyArray* out, size_t n, const std::string& what) {
  return catch_bad_alloc(
      [&]() -> Result<void*> {
        out->f32.clear();
        out->i32.clear();
        out->bytes.clear();
        if (out->type.dtype == DType::I8 || out->type.dtype == DType::U8) {
          out->bytes.resize(n);
          return static_cast<void*>(out->bytes.data());
        }
        if (out->type.dtype == DType::F32) {
          out->f32.resize(n);
          return static_cast<void*>(out->f32.data());
        }
        out->i32.resize(n);
        return static_cast<void*>(out->i32.data());
      },
      [&] { return fmt::format("{}: cannot allocate {} elements", what, n); });
}

std::string sys_error(const std::string& path, const char* doing) {
  return fmt::format("{}: cannot {}: {}", path, doing, std::strerror(errno));
}

// Reads exactly `n` bytes unless the file ends first; returns the count read, or -1 on error.
ssize_t read_full(int fd, void* buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::read(fd, static_cast<char*>(buf) + got, n - got);
    if (r < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  return static_cast<ssize_t>(got);
}

// Closes the descriptor on every path out of npy_read.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::string shape_tuple(const Shape& s) {
  if (s.rank == 0) return "()";
  if (s.rank == 1) return fmt::format("({},)", s.dims[0]);
  std::string t = "(";
  for (int i = 0; i < s.rank; ++i) t += fmt::format(i ? ", {}" : "{}", s.dims[i]);
  return t + ")";
}

// Element k's position as [i, j, ...] in `s`, for messages.
std::string position(const Shape& s, int64_t k) {
  std::vector<int64_t> at(static_cast<size_t>(s.rank));
  for (int d = s.rank - 1; d >= 0; --d) {
    at[d] = k % s.dims[d];
    k /= s.dims[d];
  }
  return fmt::format("[{}]", fmt::join(at, ", "));
}

// The `n` elements at `src` (the file's bytes, `elem_size` each) into out's vector, allocated to
// n already: 4-byte words as they are, int64 narrowed to i32 and bool bytes as 0.0f and 1.0f,
// each value checked.
Status decode_elements(const unsigned char* src, size_t n, size_t elem_size, const std::string& what, NpyArray* out) {
  if (elem_size == 4) {
    std::memcpy(out->type.dtype == DType::F32 ? static_cast<void*>(out->f32.data()) : out->i32.data(), src, n * 4);
    words_from_le(out->type.dtype == DType::F32 ? static_cast<void*>(out->f32.data()) : out->i32.data(), n);
    return Status::ok();
  }
  if (out->type.dtype == DType::I8 || out->type.dtype == DType::U8) {
    if (n) std::memcpy(out->bytes.data(), src, n);
    return Status::ok();
  }
  for (size_t k = 0; k < n; ++k) {
    if (elem_size == 1) {
      if (src[k] > 1)
        return Status::errorf("{}: element {} {} is byte {}, not a bool (0 or 1)", what, k,
                              position(out->type.shape, static_cast<int64_t>(k)), src[k]);
      out->f32[k] = src[k];
      continue;
    }
    uint64_t u = 0;
    for (int b = 0; b < 8; ++b) u |= uint64_t(src[k * 8 + b]) << (8 * b);
    const auto v = static_cast<int64_t>(u);
    if (v < INT32_MIN || v > INT32_MAX)
      return Status::errorf("{}: element {} {} is {}, outside the range of i32, which nnasm narrows int64 to", what, k,
                            position(out->type.shape, static_cast<int64_t>(k)), v);
    out->i32[k] = static_cast<int32_t>(v);
  }
  return Status::ok();
}

}  // namespace

Status npy_read_bytes(std::string_view bytes, const std::string& what, NpyArray* out) {
  Preamble p;
  NNASM_TRY(parse_preamble(bytes.substr(0, kMaxPreamble), what, &p));
  if (bytes.size() - p.header_start < p.header_len)
    return Status::errorf("{}: file ends inside the header (header length {}, {} bytes present)", what,
                          p.header_len, bytes.size() - p.header_start);
  const size_t data_start = p.header_start + p.header_len;
  TensorType type;
  size_t elem_size;
  NNASM_TRY(check_layout(bytes.substr(p.header_start, p.header_len), p.header_start, bytes.size() - data_start,
                         what, &type, &elem_size, &out->descr));
  out->type = type;
  const size_t n = static_cast<size_t>(type.shape.numel());
  Result<void*> dst = allocate_elements(out, n, what);
  if (!dst) return dst.status();
  return decode_elements(reinterpret_cast<const unsigned char*>(bytes.data()) + data_start, n, elem_size, what, out);
}

Status npy_read(const std::string& path, NpyArray* out) {
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) return Status::error(sys_error(path, "open"));
  struct stat st;
  if (::fstat(f.fd, &st) != 0) return Status::error(sys_error(path, "stat"));
  if (!S_ISREG(st.st_mode)) return Status::errorf("{}: not a regular file", path);
  const size_t file_size = static_cast<size_t>(st.st_size);

  char pre[kMaxPreamble];
  const ssize_t got = read_full(f.fd, pre, sizeof pre);
  if (got < 0) return Status::error(sys_error(path, "read"));
  Preamble p;
  NNASM_TRY(parse_preamble(std::string_view(pre, static_cast<size_t>(got)), path, &p));
  if (file_size < p.header_start + p.header_len)
    return Status::errorf("{}: file ends inside the header (header length {}, {} bytes present)", path,
                          p.header_len, file_size < p.header_start ? 0 : file_size - p.header_start);

  // The preamble read may have taken the first bytes of the header (version 1 has a 10-byte one).
  std::string header(pre + p.header_start, static_cast<size_t>(got) - p.header_start);
  if (header.size() > p.header_len) header.resize(p.header_len);
  if (::lseek(f.fd, static_cast<off_t>(p.header_start + header.size()), SEEK_SET) < 0)
    return Status::error(sys_error(path, "seek in"));
  const size_t rest = p.header_len - header.size();
  header.resize(p.header_len);
  const ssize_t hgot = read_full(f.fd, &header[p.header_len - rest], rest);
  if (hgot < 0) return Status::error(sys_error(path, "read"));
  if (static_cast<size_t>(hgot) != rest) return Status::errorf("{}: file ends inside the header", path);

  const size_t data_start = p.header_start + p.header_len;
  TensorType type;
  size_t elem_size;
  NNASM_TRY(check_layout(header, p.header_start, file_size - data_start, path, &type, &elem_size, &out->descr));
  out->type = type;
  const size_t n = static_cast<size_t>(type.shape.numel());
  Result<void*> dst = allocate_elements(out, n, path);
  if (!dst) return dst.status();
  // 4-byte words go straight into the vector; int64 and bool bytes through a buffer of the file's
  // data (its size already checked against the file's).
  std::string raw;
  void* into = *dst;
  if (elem_size != 4) {
    Result<void*> buf = catch_bad_alloc(
        [&]() -> Result<void*> {
          raw.resize(n * elem_size);
          return static_cast<void*>(&raw[0]);
        },
        [&] { return fmt::format("{}: cannot allocate {} bytes", path, n * elem_size); });
    if (!buf) return buf.status();
    into = *buf;
  }
  const ssize_t dgot = read_full(f.fd, into, n * elem_size);
  if (dgot < 0) return Status::error(sys_error(path, "read"));
  // The file changed size between fstat and now.
  if (static_cast<size_t>(dgot) != n * elem_size)
    return Status::errorf("{}: data ends after {} of {} bytes", path, dgot, n * elem_size);
  if (elem_size == 4) {
    words_from_le(*dst, n);
    return Status::ok();
  }
  return decode_elements(static_cast<const unsigned char*>(into), n, elem_size, path, out);
}

Status npy_write(const std::string& path, const TensorType& type, const void* data) {
  NNASM_TRY(check_shape(type.shape, fmt::format("{}: shape", path)));
  if (!data) return Status::errorf("{}: no data to write", path);
  // NumPy has no bf16: a bf16 tensor is written as the f32 values it holds exactly.
  const DType dt = type.dtype;
  const char* descr = dt == DType::I32 ? "<i4" : dt == DType::I8 ? "|i1" : dt == DType::U8 ? "|u1" : "<f4";
  std::string header =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr, shape_tuple(type.shape));
  // NumPy pads with spaces and a final newline so that the data starts on a 64-byte boundary.
  const size_t unpadded = kMagicLen + 4 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::string pre(kMagic, kMagicLen);
  pre += '\x01';
  pre += '\x00';
  pre += static_cast<char>(header.size() & 0xff);
  pre += static_cast<char>(header.size() >> 8);
  pre += header;

  AtomicFileWriter w;
  NNASM_TRY(w.open(path));
  NNASM_TRY(w.write(pre.data(), pre.size()));

  // Encoded in chunks so that the output is little-endian whatever the host, without a copy of
  // the whole tensor.
  const size_t n = static_cast<size_t>(type.shape.numel());
  const auto* src = static_cast<const unsigned char*>(data);
  constexpr size_t kChunk = 16384;
  if (dt == DType::I8 || dt == DType::U8) {
    if (n) NNASM_TRY(w.write(src, n));
    return w.commit();
  }
  std::vector<unsigned char> buf(kChunk * 4);
  for (size_t i = 0; i < n; i += kChunk) {
    const size_t m = n - i < kChunk ? n - i : kChunk;
    if (dt == DType::BF16) {
      for (size_t k = 0; k < m; ++k) {
        uint16_t h;
        std::memcpy(&h, src + (i + k) * 2, 2);
        const float f = bf16_to_f32(h);
        std::memcpy(buf.data() + k * 4, &f, 4);
      }
    } else {
      std::memcpy(buf.data(), src + i * 4, m * 4);
    }
    words_from_le(buf.data(), m);  // its own inverse
    NNASM_TRY(w.write(buf.data(), m * 4));
  }
  return w.commit();
}

}  // namespace nnasm
