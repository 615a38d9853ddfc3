// cereal's portable binary archives over memory, with the bounds checks of section_codec.h.
#include "serialize/section_codec.h"

#include <exception>
#include <istream>
#include <sstream>
#include <streambuf>

#include <cereal/archives/portable_binary.hpp>
#include <fmt/format.h>

namespace nnasm {
namespace {

// A read-only stream over bytes that stay where they are (a model's weights are not copied to be
// read); its position is the reader's offset within the section.
class MemoryBuf : public std::streambuf {
 public:
  MemoryBuf(const char* b, size_t n) {
    char* p = const_cast<char*>(b);  // never written: this buffer has no put area
    setg(p, p, p + n);
  }
  uint64_t pos() const { return static_cast<uint64_t>(gptr() - eback()); }
  uint64_t left() const { return static_cast<uint64_t>(egptr() - gptr()); }
};

using LittleOut = cereal::PortableBinaryOutputArchive;
using LittleIn = cereal::PortableBinaryInputArchive;

}  // namespace

struct SectionWriter::Impl {
  std::ostringstream os{std::ios::binary};
  LittleOut ar{os, LittleOut::Options::LittleEndian()};
};

SectionWriter::SectionWriter() : impl_(std::make_unique<Impl>()) {}
SectionWriter::~SectionWriter() = default;
void SectionWriter::u8(uint8_t v) { impl_->ar(v); }
void SectionWriter::u32(uint32_t v) { impl_->ar(v); }
void SectionWriter::u64(uint64_t v) { impl_->ar(v); }
void SectionWriter::i64(int64_t v) { impl_->ar(v); }
void SectionWriter::string(std::string_view s) {
  u64(s.size());
  array(s.data(), s.size(), 1);
}
void SectionWriter::array(const void* p, uint64_t n, size_t elem_size) {
  if (n == 0) return;
  if (elem_size == 4)
    impl_->ar(cereal::binary_data(static_cast<const uint32_t*>(p), n));
  else if (elem_size == 2)
    impl_->ar(cereal::binary_data(static_cast<const uint16_t*>(p), n));
  else
    impl_->ar(cereal::binary_data(static_cast<const uint8_t*>(p), n));
}
std::string SectionWriter::take() { return impl_->os.str(); }

struct SectionReader::Impl {
  Impl(std::string_view b) : buf(b.data(), b.size()), is(&buf) {}
  MemoryBuf buf;
  std::istream is;
  std::unique_ptr<LittleIn> ar;  // made by open(), which reads its preamble
};

SectionReader::SectionReader(std::string_view bytes, uint64_t file_offset, std::string what, std::string section)
    : impl_(std::make_unique<Impl>(bytes)), file_offset_(file_offset), what_(std::move(what)), section_(std::move(section)) {}
SectionReader::~SectionReader() = default;

uint64_t SectionReader::remaining() const { return impl_->buf.left(); }
uint64_t SectionReader::offset() const { return file_offset_ + impl_->buf.pos(); }

Status SectionReader::error_at(uint64_t at, const std::string& msg) const {
  return Status::errorf("{}: byte {}: error: section {}: {}", what_, at, section_, msg);
}
Status SectionReader::error(const std::string& msg) const { return error_at(offset(), msg); }

Status SectionReader::need(uint64_t n, const char* field) const {
  if (n <= remaining()) return Status::ok();
  return error(fmt::format("{}: needs {} bytes, the section has {} left", field, n, remaining()));
}

Status SectionReader::open() {
  // cereal's preamble: one byte, 1 for little-endian data (0, big-endian, is never written).
  NNASM_TRY(need(1, "archive preamble"));
  const auto flag = static_cast<unsigned char>(impl_->buf.sgetc());
  if (flag != 1) return error(fmt::format("archive preamble: byte 0x{:02x}, expected 0x01 (little-endian)", flag));
  try {
    impl_->ar = std::make_unique<LittleIn>(impl_->is, LittleIn::Options::LittleEndian());
  } catch (const std::exception& e) {
    return error(fmt::format("archive preamble: {}", e.what()));
  }
  return Status::ok();
}

namespace {
template <typename T>
Status read_scalar(SectionReader& r, LittleIn& ar, T* v, const char* field) {
  if (r.remaining() < sizeof(T))
    return r.error(fmt::format("{}: needs {} bytes, the section has {} left", field, sizeof(T), r.remaining()));
  try {
    ar(*v);
  } catch (const std::exception& e) {
    return r.error(fmt::format("{}: {}", field, e.what()));
  }
  return Status::ok();
}
}  // namespace

Status SectionReader::u8(uint8_t* v, const char* field) { return read_scalar(*this, *impl_->ar, v, field); }
Status SectionReader::u32(uint32_t* v, const char* field) { return read_scalar(*this, *impl_->ar, v, field); }
Status SectionReader::u64(uint64_t* v, const char* field) { return read_scalar(*this, *impl_->ar, v, field); }
Status SectionReader::i64(int64_t* v, const char* field) { return read_scalar(*this, *impl_->ar, v, field); }

Status SectionReader::count(uint64_t* n, uint64_t min_item_bytes, uint64_t limit, const char* field) {
  const uint64_t at = offset();
  uint64_t v = 0;
  NNASM_TRY(u64(&v, field));
  if (v > limit) return error_at(at, fmt::format("{}: {} is over the limit of {}", field, v, limit));
  if (min_item_bytes && v > remaining() / min_item_bytes)
    return error_at(at, fmt::format("{}: {} items of at least {} bytes do not fit in the {} bytes left", field, v,
                                    min_item_bytes, remaining()));
  *n = v;
  return Status::ok();
}

Status SectionReader::string(std::string* s, uint64_t limit, const char* field) {
  uint64_t n = 0;
  NNASM_TRY(count(&n, 1, limit, field));
  s->resize(n);
  return array(s->data(), n, 1, field);
}

Status SectionReader::array(void* dst, uint64_t n, size_t elem_size, const char* field) {
  if (elem_size != 1 && elem_size != 2 && elem_size != 4) return error(fmt::format("{}: element size {}", field, elem_size));
  NNASM_TRY(need(n, field));
  if (n % elem_size != 0) return error(fmt::format("{}: {} bytes is not whole {}-byte elements", field, n, elem_size));
  if (n == 0) return Status::ok();
  try {
    if (elem_size == 4)
      (*impl_->ar)(cereal::binary_data(static_cast<uint32_t*>(dst), n));
    else if (elem_size == 2)
      (*impl_->ar)(cereal::binary_data(static_cast<uint16_t*>(dst), n));
    else
      (*impl_->ar)(cereal::binary_data(static_cast<uint8_t*>(dst), n));
  } catch (const std::exception& e) {
    return error(fmt::format("{}: {}", field, e.what()));
  }
  return Status::ok();
}

Status SectionReader::finish() {
  if (remaining() == 0) return Status::ok();
  return error(fmt::format("{} bytes left over after the last field", remaining()));
}

}  // namespace nnasm
