// The one limit on a whole program's size. Importers, the listing parser and the model-file loader
// all check it, so that what one of them accepts the others load (an import never writes a model
// file its own loader refuses).
#pragma once
#include <cstdint>

#include "isa/program.h"
#include "isa/status.h"

namespace nnasm {

// The storage all tensors of one program may need once prepared (params, state, inputs, outputs
// and temporaries, before memory planning): a small file must not make prepare allocate
// gigabytes.
constexpr uint64_t MAX_PROGRAM_BYTES = uint64_t(4) << 30;

// Checks the storage the tensors of `p` need against `limit` bytes (MAX_PROGRAM_BYTES unless a
// caller lowers it); the error names the total and the largest tensor, its shape and its bytes.
Status check_program_bytes(const Program& p, uint64_t limit = MAX_PROGRAM_BYTES);

}  // namespace nnasm
