// The IDX reader. Every input (a plain file, bytes in memory, and a gzip stream over either) is a
// sequential Source, so one parser serves all four. Plain sources know how many bytes remain, so
// the data length is checked against the header before anything is allocated; a gzip stream's
// length is only known by inflating it, so its data is inflated into a vector that grows
// geometrically up to the declared size, and one more byte is asked for to detect extra data.
#include "serialize/idx.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>
#include <new>

#include <fmt/format.h>

#include "isa/program.h"

namespace nnasm {

namespace {

// A sequential byte stream.
class Source {
 public:
  virtual ~Source() = default;
  // Reads up to `n` bytes into `buf`; fewer only at the end of the stream.
  virtual Status read(void* buf, size_t n, size_t* got) = 0;
  // The bytes left, when known without reading them.
  virtual bool remaining(uint64_t* left) const = 0;
};

class MemorySource : public Source {
 public:
  explicit MemorySource(std::string_view b) : b_(b) {}
  Status read(void* buf, size_t n, size_t* got) override {
    *got = n < b_.size() - pos_ ? n : b_.size() - pos_;
    if (*got) std::memcpy(buf, b_.data() + pos_, *got);
    pos_ += *got;
    return Status::ok();
  }
  bool remaining(uint64_t* left) const override {
    *left = b_.size() - pos_;
    return true;
  }

 private:
  std::string_view b_;
  size_t pos_ = 0;
};

std::string sys_error(const std::string& path, const char* doing) {
  return fmt::format("{}: cannot {}: {}", path, doing, std::strerror(errno));
}

class FdSource : public Source {
 public:
  FdSource(int fd, uint64_t size, const std::string& path) : fd_(fd), size_(size), path_(path) {}
  Status read(void* buf, size_t n, size_t* got) override {
    *got = 0;
    while (*got < n) {
      const ssize_t r = ::read(fd_, static_cast<char*>(buf) + *got, n - *got);
      if (r < 0) {
        if (errno == EINTR) continue;
        return Status::error(sys_error(path_, "read"));
      }
      if (r == 0) break;
      *got += static_cast<size_t>(r);
    }
    pos_ += *got;
    return Status::ok();
  }
  // From fstat; if the file changes size meanwhile, the reads tell (short data or extra bytes).
  bool remaining(uint64_t* left) const override {
    *left = pos_ < size_ ? size_ - pos_ : 0;
    return true;
  }

 private:
  int fd_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& path_;
};

// Inflates one or more concatenated gzip members (as gzip and zlib's gzread accept) read from
// `in`. zlib checks each member's CRC-32 and length trailer.
class GzipSource : public Source {
 public:
  GzipSource(Source& in, const std::string& what) : in_(in), what_(what) {}
  ~GzipSource() override {
    if (init_) inflateEnd(&zs_);
  }

  Status read(void* buf, size_t n, size_t* got) override {
    *got = 0;
    if (!init_) {
      std::memset(&zs_, 0, sizeof zs_);
      // 16 + MAX_WBITS: gzip wrapper only, so a raw zlib stream is refused.
      if (inflateInit2(&zs_, 16 + MAX_WBITS) != Z_OK)
        return Status::errorf("{}: cannot start the gzip decoder", what_);
      init_ = true;
    }
    while (*got < n) {
      if (ended_) {
        NNASM_TRY(refill_if_empty());
        if (zs_.avail_in == 0) break;  // the end of the last member: a clean end of data
        if (zs_.next_in[0] != 0x1f)
          return Status::errorf("{}: {} bytes of trailing garbage after the gzip stream at compressed byte {}",
                                what_, in_left(), consumed());
        inflateReset(&zs_);
        ended_ = false;
      }
      NNASM_TRY(refill_if_empty());
      if (zs_.avail_in == 0)
        return Status::errorf("{}: gzip stream is truncated (compressed data ends at byte {})", what_, consumed());
      const size_t want = n - *got;
      zs_.next_out = static_cast<Bytef*>(buf) + *got;
      zs_.avail_out = want < UINT_MAX ? static_cast<uInt>(want) : UINT_MAX;
      const uInt in_before = zs_.avail_in;
      const int r = inflate(&zs_, Z_NO_FLUSH);
      const size_t produced = (want < UINT_MAX ? want : UINT_MAX) - zs_.avail_out;
      *got += produced;
      if (r == Z_STREAM_END) {
        ended_ = true;
      } else if (r == Z_OK || r == Z_BUF_ERROR) {
        // Z_BUF_ERROR means no progress was possible; with input and room for output left that
        // cannot be, so it is treated as corruption rather than risking a loop.
        if (r == Z_BUF_ERROR && produced == 0 && zs_.avail_in == in_before && zs_.avail_in > 0)
          return Status::errorf("{}: corrupt gzip stream at compressed byte {}", what_, consumed());
      } else {
        return Status::errorf("{}: corrupt gzip stream at compressed byte {}: {}", what_, consumed(),
                              zs_.msg ? zs_.msg : "inflate failed");
      }
    }
    return Status::ok();
  }
  bool remaining(uint64_t*) const override { return false; }

 private:
  Status refill_if_empty() {
    if (zs_.avail_in > 0) return Status::ok();
    size_t got = 0;
    NNASM_TRY(in_.read(inbuf_, sizeof inbuf_, &got));
    base_ += filled_;
    filled_ = got;
    zs_.next_in = inbuf_;
    zs_.avail_in = static_cast<uInt>(got);
    return Status::ok();
  }
  uint64_t consumed() const { return base_ + filled_ - zs_.avail_in; }
  uint64_t in_left() const {
    uint64_t left = 0;
    in_.remaining(&left);
    return left + zs_.avail_in;
  }

  Source& in_;
  const std::string& what_;
  z_stream zs_;
  bool init_ = false;
  bool ended_ = false;
  uint64_t base_ = 0;    // compressed bytes in earlier buffers
  size_t filled_ = 0;    // bytes in inbuf_
  Bytef inbuf_[65536];
};

uint32_t be32(const unsigned char* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3]);
}

size_t type_size(uint8_t type) { return type == IDX_U8 ? 1 : 4; }

// The known IDX codes that this reader does not decode.
const char* unsupported_type_name(uint8_t type) {
  switch (type) {
    case 0x09: return "signed byte";
    case 0x0B: return "int16";
    case 0x0E: return "float64";
    default: return nullptr;
  }
}

// Fills `v` with `n` elements' worth of bytes from `src`. `sized` means the remaining length was
// already checked, so the vector is allocated once; otherwise it grows geometrically as data
// arrives, so that a small corrupt file declaring a huge shape costs no more than what it holds.
// On a short stream, `*got` is the bytes read and the status is ok: the caller words the error.
template <typename T>
Status read_elements(Source& src, size_t n, bool sized, std::vector<T>* v, size_t* got, const std::string& what) {
  const size_t need = n * sizeof(T);
  *got = 0;
  return catch_bad_alloc(
      [&]() -> Status {
        v->clear();
        if (sized) {
          v->resize(n);
          return src.read(v->data(), need, got);
        }
        constexpr size_t kFirst = size_t(1) << 20;
        size_t cap = 0;
        while (*got < need) {
          size_t next = cap == 0 ? kFirst : cap * 2;
          if (next > need) next = need;
          const size_t elems = (next + sizeof(T) - 1) / sizeof(T);
          v->resize(elems);
          cap = next;
          size_t g = 0;
          NNASM_TRY(src.read(reinterpret_cast<unsigned char*>(v->data()) + *got, cap - *got, &g));
          *got += g;
          if (*got < cap) break;
        }
        return Status::ok();
      },
      [&] { return fmt::format("{}: cannot allocate {} elements", what, n); });
}

// Converts `n` big-endian 4-byte words in place to host order.
template <typename T>
void words_from_be(std::vector<T>* v) {
  auto* p = reinterpret_cast<unsigned char*>(v->data());
  for (size_t i = 0; i < v->size(); ++i, p += 4) {
    const uint32_t u = be32(p);
    std::memcpy(p, &u, 4);
  }
}

// The parser. `gz` says whether `src` is a decompressed stream, for the wording of offsets.
Status parse(Source& src, bool gz, const std::string& what, IdxArray* out) {
  const char* unit = gz ? "decompressed byte" : "byte";
  unsigned char head[4 + 4 * MAX_RANK];
  size_t got = 0;
  NNASM_TRY(src.read(head, 4, &got));
  if (got == 0) return Status::errorf("{}: empty {}, not an IDX file", what, gz ? "gzip stream" : "file");
  if (head[0] != 0 || (got > 1 && head[1] != 0))
    return Status::errorf("{}: not an IDX file: bad magic at {} 0 (expected 00 00, got {:02x}{})", what, unit,
                          head[0], got > 1 ? fmt::format(" {:02x}", head[1]) : std::string());
  if (got < 4)
    return Status::errorf("{}: file ends inside the IDX header at {} {}", what, unit, got);
  const uint8_t type = head[2];
  if (type != IDX_U8 && type != IDX_I32 && type != IDX_F32) {
    if (const char* name = unsupported_type_name(type))
      return Status::errorf("{}: IDX element type 0x{:02x} ({}) at {} 2 is not supported (0x08 u8, 0x0c i32, "
                            "0x0d f32 are)", what, type, name, unit);
    return Status::errorf("{}: unknown IDX element type 0x{:02x} at {} 2", what, type, unit);
  }
  const int rank = head[3];
  if (rank < 1 || rank > MAX_RANK)
    return Status::errorf("{}: IDX rank {} at {} 3 is outside 1..{}", what, rank, unit, MAX_RANK);
  NNASM_TRY(src.read(head + 4, 4 * size_t(rank), &got));
  if (got < 4 * size_t(rank))
    return Status::errorf("{}: file ends inside the IDX header at {} {} ({} dimensions need {} bytes)", what, unit,
                          4 + got, rank, 4 + 4 * rank);
  Shape shape;
  shape.rank = rank;
  int64_t numel = 1;
  for (int i = 0; i < rank; ++i) {
    const int64_t d = be32(head + 4 + 4 * i);
    if (d == 0) return Status::errorf("{}: dimension {} at {} {} is 0", what, i, unit, 4 + 4 * i);
    shape.dims[i] = d;
    // Checked by division: two 32-bit dimensions can overflow int64 when multiplied.
    if (d > MAX_TENSOR_ELEMENTS / numel)
      return Status::errorf("{}: dimension {} at {} {} makes the shape have more than {} elements", what, i, unit,
                            4 + 4 * i, MAX_TENSOR_ELEMENTS);
    numel *= d;
  }
  NNASM_TRY(check_shape(shape, fmt::format("{}: shape", what)));
  const uint64_t data_start = 4 + 4 * uint64_t(rank);
  const uint64_t need = uint64_t(numel) * type_size(type);
  const std::string desc = fmt::format("{}{}", idx_type_name(type), shape.str());

  uint64_t left = 0;
  const bool sized = src.remaining(&left);
  if (sized && left < need)
    return Status::errorf("{}: data is {} bytes, shorter than the {} bytes that {} needs (file ends at byte {})",
                          what, left, need, desc, data_start + left);
  if (sized && left > need)
    return Status::errorf("{}: data is {} bytes, longer than the {} bytes that {} needs (extra bytes start at "
                          "byte {})", what, left, need, desc, data_start + need);
  if (!sized && need > IDX_MAX_GZIP_DATA_BYTES)
    return Status::errorf("{}: {} declares {} bytes of data, over the {} bytes allowed in a gzip-compressed file",
                          what, desc, need, IDX_MAX_GZIP_DATA_BYTES);

  out->shape = shape;
  out->type = type;
  out->u8.clear();
  out->f32.clear();
  out->i32.clear();
  const size_t n = static_cast<size_t>(numel);
  size_t data_got = 0;
  if (type == IDX_U8) {
    NNASM_TRY(read_elements(src, n, sized, &out->u8, &data_got, what));
  } else if (type == IDX_F32) {
    NNASM_TRY(read_elements(src, n, sized, &out->f32, &data_got, what));
  } else {
    NNASM_TRY(read_elements(src, n, sized, &out->i32, &data_got, what));
  }
  if (data_got < need)
    return Status::errorf("{}: data is {} bytes, shorter than the {} bytes that {} needs (data ends at {} {})",
                          what, data_got, need, desc, unit, data_start + data_got);
  unsigned char probe;
  NNASM_TRY(src.read(&probe, 1, &got));
  if (got != 0)
    return Status::errorf("{}: data is longer than the {} bytes that {} needs (extra bytes start at {} {})", what,
                          need, desc, unit, data_start + need);
  if (type == IDX_F32) words_from_be(&out->f32);
  if (type == IDX_I32) words_from_be(&out->i32);
  return Status::ok();
}

bool is_gzip(const unsigned char* b, size_t n) { return n >= 2 && b[0] == 0x1f && b[1] == 0x8b; }

// Closes the descriptor on every path out of idx_read.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string idx_type_name(uint8_t type) {
  switch (type) {
    case IDX_U8: return "u8";
    case IDX_I32: return "i32";
    case IDX_F32: return "f32";
    default: return fmt::format("0x{:02x}", type);
  }
}

Status idx_read_bytes(std::string_view bytes, const std::string& what, IdxArray* out) {
  MemorySource mem(bytes);
  if (!is_gzip(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size()))
    return parse(mem, false, what, out);
  auto gz = std::make_unique<GzipSource>(mem, what);  // its input buffer is too big for the stack
  return parse(*gz, true, what, out);
}

Status idx_read(const std::string& path, IdxArray* out) {
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) return Status::error(sys_error(path, "open"));
  struct stat st;
  if (::fstat(f.fd, &st) != 0) return Status::error(sys_error(path, "stat"));
  if (!S_ISREG(st.st_mode)) return Status::errorf("{}: not a regular file", path);
  unsigned char magic[2];
  const ssize_t m = ::pread(f.fd, magic, 2, 0);
  if (m < 0) return Status::error(sys_error(path, "read"));
  FdSource file(f.fd, static_cast<uint64_t>(st.st_size), path);
  if (!is_gzip(magic, static_cast<size_t>(m))) return parse(file, false, path, out);
  auto gz = std::make_unique<GzipSource>(file, path);
  return parse(*gz, true, path, out);
}

}  // namespace nnasm
