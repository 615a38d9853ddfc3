// Model file framing: writing and checking the header, the section table and the checksums (see
// model_frame.h and docs/model-format.md for the layout).
#include "serialize/model_frame.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <xxhash.h>

namespace nnasm {
namespace {

// PNG's trick: a high byte, then CR LF, ^Z and LF, so that text-mode transfers and truncation to
// 7 bits show up as a bad magic rather than as corrupt sections.
constexpr char kMagic[8] = {'\x89', 'N', 'N', 'M', '\r', '\n', '\x1a', '\n'};

// Header fields: offsets into the 64-byte header.
enum : size_t {
  H_MAGIC = 0, H_MAJOR = 8, H_MINOR = 10, H_MIN_MAJOR = 12, H_MIN_MINOR = 14, H_FILE_BYTES = 16,
  H_OPCODE_HASH = 24, H_SECTION_COUNT = 32, H_FLAGS = 36, H_TABLE_OFFSET = 40, H_RESERVED = 48,
  H_HEADER_HASH = 56
};
// Section table entry fields.
enum : size_t { E_TAG = 0, E_FLAGS = 4, E_OFFSET = 8, E_SIZE = 16, E_HASH = 24 };
constexpr uint32_t SECTION_REQUIRED = 1;

size_t align64(size_t n) { return (n + 63) / 64 * 64; }

uint64_t hash(std::string_view b) { return XXH3_64bits(b.data(), b.size()); }

// A section tag as text: printable ASCII as is, anything else as \xNN.
std::string tag_text(std::string_view t) {
  std::string s;
  for (unsigned char c : t) s += c >= 0x20 && c < 0x7f ? std::string(1, static_cast<char>(c)) : fmt::format("\\x{:02x}", c);
  return s;
}

}  // namespace

uint64_t load_le(const void* p, size_t bytes) {
  const auto* b = static_cast<const unsigned char*>(p);
  uint64_t v = 0;
  for (size_t i = 0; i < bytes; ++i) v |= uint64_t(b[i]) << (8 * i);
  return v;
}

void store_le(void* p, uint64_t v, size_t bytes) {
  auto* b = static_cast<unsigned char*>(p);
  for (size_t i = 0; i < bytes; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
}

bool is_model_file(std::string_view bytes) {
  return bytes.size() >= sizeof kMagic && std::memcmp(bytes.data(), kMagic, sizeof kMagic) == 0;
}

const SectionIn* Frame::find(std::string_view tag) const {
  for (const SectionIn& s : sections)
    if (s.tag == tag) return &s;
  return nullptr;
}

std::string frame_sections(const std::vector<SectionOut>& sections, uint64_t opcode_hash) {
  const size_t table_end = MODEL_HEADER_BYTES + sections.size() * MODEL_SECTION_ENTRY_BYTES;
  size_t end = align64(table_end);
  std::vector<size_t> offsets;
  for (const SectionOut& s : sections) {
    offsets.push_back(end);
    end = align64(end + s.bytes.size());
  }
  std::string f(end + MODEL_TRAILER_BYTES, '\0');
  char* h = f.data();
  std::memcpy(h + H_MAGIC, kMagic, sizeof kMagic);
  store_le(h + H_MAJOR, MODEL_FORMAT_MAJOR, 2);
  store_le(h + H_MINOR, MODEL_FORMAT_MINOR, 2);
  store_le(h + H_MIN_MAJOR, 1, 2);  // what a 1.0 reader understands: everything written so far
  store_le(h + H_MIN_MINOR, 0, 2);
  store_le(h + H_FILE_BYTES, f.size(), 8);
  store_le(h + H_OPCODE_HASH, opcode_hash, 8);
  store_le(h + H_SECTION_COUNT, sections.size(), 4);
  store_le(h + H_TABLE_OFFSET, MODEL_HEADER_BYTES, 8);
  for (size_t i = 0; i < sections.size(); ++i) {
    char* e = h + MODEL_HEADER_BYTES + i * MODEL_SECTION_ENTRY_BYTES;
    std::memcpy(e + E_TAG, sections[i].tag, 4);
    store_le(e + E_FLAGS, sections[i].required ? SECTION_REQUIRED : 0, 4);
    store_le(e + E_OFFSET, offsets[i], 8);
    store_le(e + E_SIZE, sections[i].bytes.size(), 8);
    store_le(e + E_HASH, hash(sections[i].bytes), 8);
    std::memcpy(h + offsets[i], sections[i].bytes.data(), sections[i].bytes.size());
  }
  reseal_model_image(&f);
  return f;
}

void reseal_model_image(std::string* file) {
  std::string& f = *file;
  if (f.size() < MODEL_HEADER_BYTES + MODEL_TRAILER_BYTES) return;
  char* h = f.data();
  const size_t body = f.size() - MODEL_TRAILER_BYTES;
  const uint64_t count = load_le(h + H_SECTION_COUNT, 4), table = load_le(h + H_TABLE_OFFSET, 8);
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t e = table + i * MODEL_SECTION_ENTRY_BYTES;
    if (table > body || e > body || body - e < MODEL_SECTION_ENTRY_BYTES) break;
    const uint64_t off = load_le(h + e + E_OFFSET, 8), size = load_le(h + e + E_SIZE, 8);
    if (off <= body && size <= body - off) store_le(h + e + E_HASH, hash(std::string_view(h + off, size)), 8);
  }
  store_le(h + H_HEADER_HASH, hash(std::string_view(h, H_HEADER_HASH)), 8);
  store_le(h + body, hash(std::string_view(h, body)), 8);
}

Status unframe(std::string_view f, const std::string& what, uint32_t max_sections,
               const std::vector<std::string>& known_tags, Frame* out) {
  auto fail = [&](uint64_t at, const std::string& part, const std::string& msg) {
    return Status::errorf("{}: byte {}: error: {}: {}", what, at, part, msg);
  };
  const char* h = f.data();
  if (f.size() < sizeof kMagic || !is_model_file(f))
    return fail(0, "header", "not an nnasm model file (bad magic; expected \\x89NNM\\r\\n\\x1a\\n)");
  // The version fields stay where they are in every format version, so a reader can always say
  // that a file is too new rather than that it is corrupt.
  if (f.size() < H_FILE_BYTES) return fail(f.size(), "header", fmt::format("file ends inside the header ({} bytes)", f.size()));
  Frame fr;
  fr.major = load_le(h + H_MAJOR, 2);
  fr.minor = load_le(h + H_MINOR, 2);
  fr.min_major = load_le(h + H_MIN_MAJOR, 2);
  fr.min_minor = load_le(h + H_MIN_MINOR, 2);
  if (fr.min_major > MODEL_FORMAT_MAJOR || (fr.min_major == MODEL_FORMAT_MAJOR && fr.min_minor > MODEL_FORMAT_MINOR))
    return fail(H_MIN_MAJOR, "header",
                fmt::format("written by a newer nnasm (format {}.{}, readable from {}.{}); this reader reads format {}.{}",
                            fr.major, fr.minor, fr.min_major, fr.min_minor, MODEL_FORMAT_MAJOR, MODEL_FORMAT_MINOR));
  if (f.size() < MODEL_HEADER_BYTES + MODEL_TRAILER_BYTES)
    return fail(f.size(), "header", fmt::format("file is truncated: {} bytes, a model file has at least {}", f.size(),
                                                MODEL_HEADER_BYTES + MODEL_TRAILER_BYTES));
  if (load_le(h + H_HEADER_HASH, 8) != hash(f.substr(0, H_HEADER_HASH)))
    return fail(H_HEADER_HASH, "header", "checksum mismatch: the header is corrupt");
  fr.file_bytes = load_le(h + H_FILE_BYTES, 8);
  if (fr.file_bytes != f.size())
    return fail(H_FILE_BYTES, "header",
                fmt::format("the header says the file has {} bytes, it has {}: {}", fr.file_bytes, f.size(),
                            fr.file_bytes > f.size() ? "truncated" : "trailing bytes after the model"));
  const size_t body = f.size() - MODEL_TRAILER_BYTES;
  if (load_le(h + H_FLAGS, 4) != 0 || load_le(h + H_RESERVED, 8) != 0)
    return fail(H_FLAGS, "header", "reserved fields are not zero");
  fr.opcode_hash = load_le(h + H_OPCODE_HASH, 8);

  const uint64_t count = load_le(h + H_SECTION_COUNT, 4);
  if (count > max_sections)
    return fail(H_SECTION_COUNT, "header", fmt::format("{} sections, more than the limit of {}", count, max_sections));
  const uint64_t table = load_le(h + H_TABLE_OFFSET, 8);
  // count ≤ 2^32, so count * 32 cannot overflow; table may be anything.
  if (table < MODEL_HEADER_BYTES || table > body || count * MODEL_SECTION_ENTRY_BYTES > body - table)
    return fail(H_TABLE_OFFSET, "header",
                fmt::format("the section table ({} entries at byte {}) does not fit in the file ({} bytes)", count,
                            table, f.size()));
  uint64_t prev_end = table + count * MODEL_SECTION_ENTRY_BYTES;
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t e = table + i * MODEL_SECTION_ENTRY_BYTES;
    SectionIn s;
    s.tag = std::string(h + e + E_TAG, 4);
    const std::string part = fmt::format("section table: entry {} ({})", i, tag_text(s.tag));
    const uint64_t flags = load_le(h + e + E_FLAGS, 4);
    if (flags & ~uint64_t(SECTION_REQUIRED)) return fail(e + E_FLAGS, part, fmt::format("unknown flags 0x{:x}", flags));
    s.required = flags & SECTION_REQUIRED;
    s.offset = load_le(h + e + E_OFFSET, 8);
    const uint64_t size = load_le(h + e + E_SIZE, 8);
    if (s.offset % 64 != 0) return fail(e + E_OFFSET, part, fmt::format("offset {} is not a multiple of 64", s.offset));
    if (s.offset < prev_end)
      return fail(e + E_OFFSET, part,
                  fmt::format("offset {} overlaps the {} before it (which end at byte {})", s.offset,
                              i ? "previous section" : "header and section table", prev_end));
    if (s.offset > body || size > body - s.offset)
      return fail(e + E_SIZE, part,
                  fmt::format("{} bytes at byte {} run past the end of the sections (byte {})", size, s.offset, body));
    for (const SectionIn& other : fr.sections)
      if (other.tag == s.tag) return fail(e + E_TAG, part, "a second section with this tag");
    s.bytes = f.substr(s.offset, size);
    if (load_le(h + e + E_HASH, 8) != hash(s.bytes))
      return fail(e + E_HASH, part, fmt::format("checksum mismatch: the section at byte {} is corrupt", s.offset));
    if (s.required && std::find(known_tags.begin(), known_tags.end(), s.tag) == known_tags.end())
      return fail(e + E_TAG, part, "a required section this reader does not know: written by a newer nnasm");
    prev_end = s.offset + size;
    fr.sections.push_back(std::move(s));
  }
  // Last, so that damage inside a section is reported as that section's; what is left for this
  // check is the table's own bytes, the padding and the trailer.
  if (load_le(h + body, 8) != hash(f.substr(0, body)))
    return fail(body, "file", "checksum mismatch: the file is corrupt");
  *out = std::move(fr);
  return Status::ok();
}

}  // namespace nnasm
