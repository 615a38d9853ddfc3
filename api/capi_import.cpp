// The import half of the C API (api/nnasm_import.h): ONNX bytes through serialize/onnx into a
// model prepared by the same load step as nnasm_model_load_memory (api/capi_internal.h), or into
// a model file. Kept apart from api/capi.cpp so that the runtime library carries no importer.
#include "api/nnasm_import.h"

#include <string>
#include <string_view>

#include <fmt/format.h>

#include "api/capi_internal.h"
#include "engine/context.h"
#include "engine/version.h"
#include "serialize/model_file.h"
#include "serialize/onnx/onnx_import.h"

namespace {

using nnasm::Status;
using nnasm::capi::fail;
using nnasm::capi::guarded;

constexpr const char* WHAT = "<onnx>";

// Imports `bytes` into `p`; the message of a failure lists every node that could not be mapped.
Status import(std::string_view bytes, nnasm::Program* p) {
  nnasm::ImportReport report;
  Status s = nnasm::onnx_import(bytes, WHAT, nnasm::OnnxImportOptions(), p, &report);
  if (s || report.problems.empty()) return s;
  std::string msg = s.message();
  for (const std::string& line : report.problems) msg += "\n  " + line;
  return Status::error(msg);
}

std::string_view view(const void* data, size_t size) {
  return std::string_view(static_cast<const char*>(data), size);
}

}  // namespace

extern "C" {

nnasm_status nnasm_import_onnx(const void* data, size_t size, const nnasm_model_options* opts, nnasm_model** out) {
  return guarded([&]() -> nnasm_status {
    if (out) *out = nullptr;
    if (!data && size) return fail(NNASM_ERR_INVALID_ARGUMENT, "data is NULL");
    return nnasm::capi::load_program(opts, WHAT, [&](nnasm::Program* p, std::string* producer) {
      *producer = fmt::format("nnasm {} (ONNX import)", NNASM_VERSION_STRING);
      return import(view(data, size), p);
    }, out);
  });
}

nnasm_status nnasm_import_onnx_to_model_file(const void* data, size_t size, const char* path) {
  return guarded([&]() -> nnasm_status {
    if (!path) return fail(NNASM_ERR_INVALID_ARGUMENT, "path is NULL");
    if (!data && size) return fail(NNASM_ERR_INVALID_ARGUMENT, "data is NULL");
    nnasm::Context ctx;
    nnasm::Program p(ctx);
    Status s = import(view(data, size), &p);
    if (!s) return fail(NNASM_ERR_BAD_MODEL, s.message());
    s = nnasm::model_save(p, path);
    if (!s) return fail(NNASM_ERR_IO, s.message());
    return NNASM_OK;
  });
}

}  // extern "C"
