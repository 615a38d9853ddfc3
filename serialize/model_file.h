// Model files (.nnm): one file holding a whole program — its listing (forward, backward and update
// sections, tensor declarations, mode), the values of its params and state (optimizer moments,
// step counters, running statistics) and where training stood (the context's seed and the
// forward-run index), so that training resumes exactly where it stopped. The layout is in
// docs/model-format.md; the framing in model_frame.h.
//
// The program is stored as its normalized listing, so a model file and a listing convert both ways
// (`nnasm dump`, `nnasm build`), and instructions are named by mnemonic, never by a number that a
// later instruction set could reuse.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "isa/program.h"
#include "isa/program_size.h"
#include "isa/status.h"

namespace nnasm {

// What a loader accepts; everything is checked before anything is allocated.
struct ModelLimits {
  uint64_t max_file_bytes = uint64_t(4) << 30;
  uint32_t max_sections = 64;
  uint64_t max_listing_bytes = uint64_t(256) << 20;
  uint64_t max_tensors = uint64_t(1) << 20;
  // The storage every tensor of the program needs once prepared (isa/program.h).
  uint64_t max_program_bytes = MAX_PROGRAM_BYTES;
};

struct SectionSummary {
  std::string tag;
  uint64_t offset = 0, bytes = 0;
};

// What a model file says about itself.
struct ModelMeta {
  uint16_t major = 0, minor = 0;  // format version of the file
  uint64_t file_bytes = 0;
  uint64_t opcode_hash = 0;
  bool same_opcode_table = true;  // written by a build with this build's instruction set
  std::string producer;           // "nnasm 0.1.0 (format 1.0)"
  uint64_t seed = 0;              // the context's seed: fresh params and dropout masks follow it
  uint64_t run_index = 0;         // forward runs done when saved (Executor::run_index)
  uint64_t tensors_with_values = 0, tensors_without_values = 0;
  std::vector<SectionSummary> sections;
};

struct ModelSaveOptions {
  uint64_t run_index = 0;  // an executor's run_index(), to resume training where it stopped
};

// The file image of `p` (finished) and the values of its params, state and valueless consts. A
// tensor not initialized yet is stored with the values prepare would give it (its init spec and
// the context's seed), computed on the side: `p` is not changed. (The format can also mark a
// tensor "not initialized", which loading leaves to prepare; this writer only does that when it
// cannot allocate the scratch.) Deterministic: save → load → save is byte-identical.
std::string model_encode(const Program& p, const ModelSaveOptions& o = {});
// Encodes and writes atomically (serialize/atomic_file.h): a crash leaves the old file or the new.
Status model_save(const Program& p, const std::string& path, const ModelSaveOptions& o = {});

// Decodes a model file image into `out`, an empty Program bound to a Context, whose seed is set
// to the file's. `what` names the file in messages, which read "WHAT: byte N: error: PART: ..."
// with N the offset of the offending field. Never trusts a number from the file. `meta` may be
// null. On error `out` holds a partial program and should be discarded.
Status model_decode(std::string_view bytes, const std::string& what, Program* out, ModelMeta* meta = nullptr,
                    const ModelLimits& limits = {});
// Reads the file at `path` (its size checked against the limit first) and decodes it.
Status model_load(const std::string& path, Program* out, ModelMeta* meta = nullptr, const ModelLimits& limits = {});

// Reads a whole regular file into `out` if it is no larger than `max_bytes` (checked before
// reading); a device, FIFO or directory is refused unread. Messages name `path`.
Status read_file_limited(const std::string& path, uint64_t max_bytes, std::string* out);

// Which tensors copy_values took values for, and which it left alone.
struct ValuesReport {
  std::vector<std::string> copied;     // '@' tensors of `to` that took values from `from`
  std::vector<std::string> fresh;      // '@' tensors of `to` with no counterpart, or none with values: initialized at prepare
  std::vector<std::string> unused;     // '@' tensors of `from` that `to` does not have
};
// Gives each param, state and valueless const of `to` the values of the tensor of the same name in
// `from` (a loaded model), which must have the same role kind ('@') and type. Errors name the
// tensor and both types; on error `to` may hold some values already.
Status copy_values(const Program& from, Program* to, ValuesReport* report);

}  // namespace nnasm
