// Reading and writing the contents of one model file section with cereal's portable binary
// archive (little-endian on disk, byte-swapped on big-endian hosts). The reader never lets cereal
// see a size it has not checked: every count and length is read as a number, checked against the
// bytes left in the section and against a limit, and only then is anything allocated or read.
// cereal (and its exceptions) stay inside section_codec.cpp.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "isa/status.h"

namespace nnasm {

class SectionWriter {
 public:
  SectionWriter();
  ~SectionWriter();
  void u8(uint8_t v);
  void u32(uint32_t v);
  void u64(uint64_t v);
  void i64(int64_t v);
  // A length (u64) and the bytes.
  void string(std::string_view s);
  // `n` bytes of `elem_size`-byte elements (1 or 4), stored little-endian element by element.
  void array(const void* p, uint64_t n, size_t elem_size);
  // The section's bytes.
  std::string take();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class SectionReader {
 public:
  // `bytes` is the section (already checksummed); `file_offset` where it starts in the file;
  // `what` the file's name and `section` the tag, for messages.
  SectionReader(std::string_view bytes, uint64_t file_offset, std::string what, std::string section);
  ~SectionReader();
  // Reads the archive's preamble. Call first.
  Status open();
  Status u8(uint8_t* v, const char* field);
  Status u32(uint32_t* v, const char* field);
  Status u64(uint64_t* v, const char* field);
  Status i64(int64_t* v, const char* field);
  // A length, checked against `limit` and the bytes left, then the bytes.
  Status string(std::string* s, uint64_t limit, const char* field);
  // A count of items of at least `min_item_bytes` each, checked against `limit` and the bytes left.
  Status count(uint64_t* n, uint64_t min_item_bytes, uint64_t limit, const char* field);
  // `n` bytes of `elem_size`-byte elements into `dst`, after checking that they are there.
  Status array(void* dst, uint64_t n, size_t elem_size, const char* field);
  // Error unless every byte was read.
  Status finish();

  uint64_t remaining() const;
  uint64_t offset() const;  // in the file, of the next byte
  // "WHAT: byte N: error: section TAG: MESSAGE" at the next byte.
  Status error(const std::string& msg) const;
  Status error_at(uint64_t file_offset, const std::string& msg) const;

 private:
  Status need(uint64_t n, const char* field) const;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  uint64_t file_offset_;
  std::string what_, section_;
};

}  // namespace nnasm
