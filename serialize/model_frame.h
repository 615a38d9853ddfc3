// The framing of a model file (.nnm), described in docs/model-format.md: a 64-byte header (magic,
// format version, the minimum reader version, the file size, the opcode table hash, a header
// checksum), a table of sections (tag, flags, offset, size, checksum), the sections themselves
// at 64-byte boundaries, and a checksum of the whole file in its last 8 bytes. All checksums are
// XXH3-64; all numbers little-endian.
//
// This file knows nothing of what the sections hold: model_file.cpp fills and reads them. The
// reader checks every number of the header and the table against the bytes actually there before
// anything looks inside a section, so a section handed out is whole and intact.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "isa/status.h"

namespace nnasm {

constexpr uint16_t MODEL_FORMAT_MAJOR = 1;
constexpr uint16_t MODEL_FORMAT_MINOR = 0;
constexpr size_t MODEL_HEADER_BYTES = 64;
constexpr size_t MODEL_SECTION_ENTRY_BYTES = 32;
constexpr size_t MODEL_TRAILER_BYTES = 8;

// Whether `bytes` starts with the model file magic (a listing never does).
bool is_model_file(std::string_view bytes);

struct SectionOut {
  char tag[5] = {};  // four ASCII characters
  bool required = true;  // a reader that does not know the tag must refuse the file
  std::string bytes;
};

// The file image of `sections`, in order. Deterministic: the same sections give the same bytes.
std::string frame_sections(const std::vector<SectionOut>& sections, uint64_t opcode_hash);

struct SectionIn {
  std::string tag;
  bool required = false;
  uint64_t offset = 0;  // in the file
  std::string_view bytes;  // into the file image passed to unframe
};

struct Frame {
  uint16_t major = 0, minor = 0;          // the writer's format version
  uint16_t min_major = 0, min_minor = 0;  // the oldest reader that can read the file
  uint64_t opcode_hash = 0;
  uint64_t file_bytes = 0;
  std::vector<SectionIn> sections;
  // nullptr if absent.
  const SectionIn* find(std::string_view tag) const;
};

// Checks the framing of `file` (magic, versions, header checksum, size, file checksum, the
// section table: counts, bounds, overflow, alignment, order, overlap, checksums, required tags
// this reader knows — `known_tags`) and describes it. Errors read
// "WHAT: byte N: error: PART: MESSAGE", N the offset of the offending field.
Status unframe(std::string_view file, const std::string& what, uint32_t max_sections,
               const std::vector<std::string>& known_tags, Frame* out);

// Little-endian field access, for the framing and for tests that forge files.
uint64_t load_le(const void* p, size_t bytes);
void store_le(void* p, uint64_t v, size_t bytes);
// Recomputes the header checksum, every section checksum and the file checksum of a well-framed
// image after a test changed fields in it (it trusts the table as far as it lies inside the file).
void reseal_model_image(std::string* file);

}  // namespace nnasm
