// Model files: the PROG section (producer, seed, run index, listing) and the DATA section (one
// record per param, state tensor and valueless const), over the framing of model_frame.h.
#include "serialize/model_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <unordered_set>

#include <fmt/format.h>

#include "engine/context.h"
#include "engine/init.h"
#include "engine/version.h"
#include "serialize/atomic_file.h"
#include "serialize/listing.h"
#include "serialize/model_frame.h"
#include "serialize/section_codec.h"

namespace nnasm {
namespace {

constexpr char kProgTag[] = "PROG";
constexpr char kDataTag[] = "DATA";
constexpr uint64_t kMaxNameBytes = 4096;
constexpr uint64_t kMaxProducerBytes = 4096;
// The smallest DATA record: a name length, role, dtype, rank and the has-values flag.
constexpr uint64_t kMinRecordBytes = 8 + 1 + 1 + 1 + 1;

// The tensors whose values the DATA section holds: what persists across runs, except consts whose
// values the listing already spells out.
bool stored(const TensorDesc& d) { return d.sigil() == '@' && !(d.role == Role::CONST && !d.values.empty()); }

SectionOut section(const char* tag, std::string bytes) {
  SectionOut s;
  std::memcpy(s.tag, tag, 4);
  s.bytes = std::move(bytes);
  return s;
}

std::string encode_prog(const Program& p, const ModelSaveOptions& o) {
  SectionWriter w;
  w.string(fmt::format("nnasm {} (format {}.{})", NNASM_VERSION_STRING, MODEL_FORMAT_MAJOR, MODEL_FORMAT_MINOR));
  w.u64(Context::of(p)->seed());
  w.u64(o.run_index);
  w.string(program_print(p));
  return w.take();
}

std::string encode_data(const Program& p) {
  SectionWriter w;
  uint64_t n = 0;
  for (TensorId id : p.tensors()) n += stored(p.desc(id));
  w.u64(n);
  for (TensorId id : p.tensors()) {
    const Tensor& t = Context::of(p)->at(id);
    if (!stored(t.desc)) continue;
    w.string(t.desc.name);
    w.u8(static_cast<uint8_t>(t.desc.role));
    w.u8(static_cast<uint8_t>(t.desc.type.dtype));
    w.u8(static_cast<uint8_t>(t.desc.type.shape.rank));
    for (int i = 0; i < t.desc.type.shape.rank; ++i) w.i64(t.desc.type.shape[i]);
    // A tensor nothing initialized yet is stored with the values prepare would give it, so that a
    // file never depends on how a later version draws its initial values.
    const Tensor* src = &t;
    Tensor fresh;
    if (t.data.empty()) {
      fresh.desc = t.desc;
      if (!fresh.allocate()) {  // the only way out of memory shows here: store it uninitialized
        w.u8(0);
        continue;
      }
      init_tensor(fresh, Context::of(p)->seed());
      src = &fresh;
    }
    w.u8(1);
    w.array(src->data.data(), uint64_t(t.numel()) * dtype_size(t.desc.type.dtype), dtype_size(t.desc.type.dtype));
  }
  return w.take();
}

Status decode_prog(SectionReader& r, const ModelLimits& lim, const Frame& fr, Program* out,
                   ModelMeta* meta) {
  NNASM_TRY(r.open());
  NNASM_TRY(r.string(&meta->producer, kMaxProducerBytes, "producer"));
  NNASM_TRY(r.u64(&meta->seed, "seed"));
  NNASM_TRY(r.u64(&meta->run_index, "run index"));
  const uint64_t listing_at = r.offset();
  std::string listing;
  NNASM_TRY(r.string(&listing, lim.max_listing_bytes, "listing"));
  NNASM_TRY(r.finish());
  Context::of(*out)->set_seed(meta->seed);
  Status s = program_parse(listing, "listing", out);
  if (s) s = out->finish().with_prefix("listing: error: ");
  if (!s) {
    std::string why = s.message();
    if (!meta->same_opcode_table)
      why += fmt::format(" (the file was written by a build with another instruction set: opcode table {:016x}, "
                         "this build {:016x})",
                         fr.opcode_hash, opcode_table_hash());
    return r.error_at(listing_at, "the program's listing does not load: " + why);
  }
  // Prepare will allocate every tensor the listing declares: bound that before anyone does.
  const Status big = check_program_bytes(*out, lim.max_program_bytes);
  if (!big) return r.error_at(listing_at, big.message());
  return Status::ok();
}

Status decode_data(SectionReader& r, const ModelLimits& lim, Program* out, ModelMeta* meta) {
  NNASM_TRY(r.open());
  uint64_t n = 0;
  NNASM_TRY(r.count(&n, kMinRecordBytes, lim.max_tensors, "tensor count"));
  std::unordered_set<TensorId> seen;
  for (uint64_t k = 0; k < n; ++k) {
    const uint64_t at = r.offset();
    std::string name;
    NNASM_TRY(r.string(&name, kMaxNameBytes, "tensor name"));
    const TensorId id = out->find(name);
    const std::string which = fmt::format("tensor {} ('{}')", k, name);
    if (id == NO_TENSOR) return r.error_at(at, which + ": not in the program's listing");
    if (!seen.insert(id).second) return r.error_at(at, which + ": a second record for it");
    Tensor& t = Context::of(*out)->at(id);
    if (!stored(t.desc))
      return r.error_at(at, fmt::format("{}: the listing declares it {} %{}, which has no stored values", which,
                                        role_name(t.desc.role), name));
    uint8_t role = 0, dtype = 0, rank = 0, has = 0;
    const uint64_t role_at = r.offset();
    NNASM_TRY(r.u8(&role, "role"));
    if (role != static_cast<uint8_t>(t.desc.role))
      return r.error_at(role_at, fmt::format("{}: role {}, the listing declares a {}", which, role, role_name(t.desc.role)));
    const uint64_t type_at = r.offset();
    NNASM_TRY(r.u8(&dtype, "dtype"));
    NNASM_TRY(r.u8(&rank, "rank"));
    if (rank > MAX_RANK) return r.error_at(type_at, fmt::format("{}: rank {} is over {}", which, rank, MAX_RANK));
    Shape shape;
    shape.rank = rank;
    for (int i = 0; i < rank; ++i) NNASM_TRY(r.i64(&shape[i], "dimension"));
    if (dtype >= DTYPE_COUNT)
      return r.error_at(type_at, fmt::format("{}: dtype byte {} is no element type (0 f32, 1 i32, 2 bf16, 3 i8, 4 u8)",
                                             which, dtype));
    if (dtype != static_cast<uint8_t>(t.desc.type.dtype) || shape != t.desc.type.shape) {
      const std::string dt = dtype_name(static_cast<DType>(dtype));
      return r.error_at(type_at, fmt::format("{}: type {}{}, the listing declares {}", which, dt, shape.str(),
                                             t.desc.type.str()));
    }
    const uint64_t has_at = r.offset();
    NNASM_TRY(r.u8(&has, "has-values flag"));
    if (has > 1) return r.error_at(has_at, fmt::format("{}: has-values flag {}, expected 0 or 1", which, has));
    if (!has) {
      ++meta->tensors_without_values;
      continue;
    }
    // The size comes from the listing's type, already checked against the shape limits; the
    // reader checks it against the bytes left before the tensor's storage is allocated.
    const size_t es = dtype_size(t.desc.type.dtype);
    const uint64_t bytes = uint64_t(t.numel()) * es;
    if (bytes > r.remaining())
      return r.error(fmt::format("{}: {} values need {} bytes, the section has {} left", which, t.numel(), bytes,
                                 r.remaining()));
    if (!t.allocate(Context::of(*out)->allocator())) return r.error(fmt::format("{}: cannot allocate {} bytes", which, bytes));
    NNASM_TRY(r.array(t.data.data(), bytes, es, "values"));
    ++meta->tensors_with_values;
  }
  NNASM_TRY(r.finish());
  for (TensorId id : out->tensors())
    if (stored(out->desc(id)) && !seen.count(id))
      return r.error(fmt::format("{} @{} of the listing has no record (values or 'not initialized')",
                                 role_name(out->desc(id).role), out->desc(id).name));
  return Status::ok();
}

}  // namespace

std::string model_encode(const Program& p, const ModelSaveOptions& o) {
  std::vector<SectionOut> sections;
  sections.push_back(section(kProgTag, encode_prog(p, o)));
  sections.push_back(section(kDataTag, encode_data(p)));
  return frame_sections(sections, opcode_table_hash());
}

Status model_save(const Program& p, const std::string& path, const ModelSaveOptions& o) {
  return write_file_atomic(path, model_encode(p, o));
}

Status model_decode(std::string_view bytes, const std::string& what, Program* out, ModelMeta* meta,
                    const ModelLimits& limits) {
  ModelMeta local;
  ModelMeta& m = meta ? *meta : local;
  m = ModelMeta();
  if (bytes.size() > limits.max_file_bytes)
    return Status::errorf("{}: byte 0: error: file: {} bytes, over the limit of {}", what, bytes.size(),
                          limits.max_file_bytes);
  Frame fr;
  NNASM_TRY(unframe(bytes, what, limits.max_sections, {kProgTag, kDataTag}, &fr));
  m.major = fr.major;
  m.minor = fr.minor;
  m.file_bytes = fr.file_bytes;
  m.opcode_hash = fr.opcode_hash;
  m.same_opcode_table = fr.opcode_hash == opcode_table_hash();
  for (const SectionIn& s : fr.sections) m.sections.push_back({s.tag, s.offset, s.bytes.size()});
  for (const char* tag : {kProgTag, kDataTag})
    if (!fr.find(tag)) return Status::errorf("{}: byte 32: error: section table: no {} section", what, tag);
  const SectionIn* prog = fr.find(kProgTag);
  SectionReader pr(prog->bytes, prog->offset, what, kProgTag);
  NNASM_TRY(decode_prog(pr, limits, fr, out, &m));
  const SectionIn* data = fr.find(kDataTag);
  SectionReader dr(data->bytes, data->offset, what, kDataTag);
  return decode_data(dr, limits, out, &m);
}

Status read_file_limited(const std::string& path, uint64_t max_bytes, std::string* out) {
  // A device or a FIFO is refused before it is opened: /dev/zero would otherwise be read up to
  // the limit (gigabytes) only to be refused then, and opening a FIFO blocks until a writer comes.
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return Status::errorf("{}: error: cannot read: {}", path, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return Status::errorf("{}: error: cannot read: not a regular file", path);
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return Status::errorf("{}: error: cannot read: {}", path, std::strerror(errno));
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> closer(f, std::fclose);
  // Checked again on what was opened: the path may have been replaced in between.
  if (fstat(fileno(f), &st) != 0) return Status::errorf("{}: error: cannot read: {}", path, std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return Status::errorf("{}: error: cannot read: not a regular file", path);
  if (static_cast<uint64_t>(st.st_size) > max_bytes)
    return Status::errorf("{}: error: {} bytes, over the limit of {}", path, st.st_size, max_bytes);
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  const size_t got = bytes.empty() ? 0 : std::fread(bytes.data(), 1, bytes.size(), f);
  if (got != bytes.size()) return Status::errorf("{}: error: cannot read: file changed while being read", path);
  *out = std::move(bytes);
  return Status::ok();
}

Status model_load(const std::string& path, Program* out, ModelMeta* meta, const ModelLimits& limits) {
  std::string bytes;
  NNASM_TRY(read_file_limited(path, limits.max_file_bytes, &bytes));
  return model_decode(bytes, path, out, meta, limits);
}

Status copy_values(const Program& from, Program* to, ValuesReport* report) {
  ValuesReport rep;
  std::unordered_set<std::string> taken;
  for (TensorId id : to->tensors()) {
    Tensor& t = Context::of(*to)->at(id);
    if (!stored(t.desc)) continue;
    const TensorId src_id = from.find(t.desc.name);
    const Tensor* src = src_id == NO_TENSOR ? nullptr : &Context::of(from)->at(src_id);
    if (!src || !stored(src->desc)) {
      rep.fresh.push_back(t.desc.name);
      continue;
    }
    if (!(src->desc.type == t.desc.type))
      return Status::errorf("@{}: the listing declares {}, the weights have {}", t.desc.name, t.desc.type.str(),
                            src->desc.type.str());
    taken.insert(t.desc.name);
    if (src->data.empty()) {  // stored as "not initialized yet": it stays that way
      rep.fresh.push_back(t.desc.name);
      continue;
    }
    if (!t.allocate(Context::of(*to)->allocator()))
      return Status::errorf("@{}: cannot allocate {} bytes", t.desc.name, storage_bytes(t.desc.type));
    std::memcpy(t.data.data(), src->data.data(), size_t(t.numel()) * dtype_size(t.desc.type.dtype));
    rep.copied.push_back(t.desc.name);
  }
  for (TensorId id : from.tensors())
    if (stored(from.desc(id)) && !taken.count(from.desc(id).name)) rep.unused.push_back(from.desc(id).name);
  if (report) *report = std::move(rep);
  return Status::ok();
}

}  // namespace nnasm
