// Checks on what was given as a model (a listing or an nnasm model file) before and after it is
// read, shared by the tool and the C API so that both refuse the same files with the same words:
// an empty file, and a listing that declares nothing to compute, would otherwise load as an empty
// program and "run" successfully.
#pragma once
#include <string>
#include <string_view>

#include "isa/program.h"
#include "isa/status.h"

namespace nnasm {

// Refuses bytes that cannot be a model before they are parsed: an empty file gives
// "WHAT: error: empty file (...)", and a file of another format known by its first bytes (.npy,
// ONNX, gzip, ZIP, HDF5) "WHAT: error: WHAT is a .npy array, not a model (a listing or an nnasm
// model file)" (and what to do instead, where there is something) rather than a listing parse
// error at 1:1.
Status check_model_bytes(std::string_view bytes, const std::string& what);

// Refuses a parsed listing with no instructions and no outputs (an empty, blank or comment-only
// file): "WHAT:1:1: error: the listing has no instructions and no outputs".
Status check_listing_not_empty(const Program& p, const std::string& what);

}  // namespace nnasm
