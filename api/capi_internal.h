// What the C API's translation units share (api/capi.cpp, api/capi_import.cpp), not installed: the
// error channel, the exception guard, and the load step every way of making a model goes through.
#pragma once
#include <exception>
#include <functional>
#include <new>
#include <string>

#include "api/nnasm.h"
#include "isa/program.h"
#include "isa/status.h"

namespace nnasm::capi {

// Sets the calling thread's last error (nnasm_last_error) and returns `code`.
nnasm_status fail(nnasm_status code, const std::string& msg);

// Runs `body` (returning nnasm_status), turning any escaping exception into a status. Built
// without exceptions (make check-noexcept) there is nothing to catch: the engine reports every
// failure as a Status, and only a failed allocation, which then ends the process, is left.
template <typename F>
nnasm_status guarded(F&& body) {
#if defined(__cpp_exceptions)
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(NNASM_ERR_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return fail(NNASM_ERR_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return fail(NNASM_ERR_INTERNAL, "internal error");
  }
#else
  return body();
#endif
}

// Fills `p` (empty, bound to the new model's context, whose settings the options made) and sets
// `producer` (what made the program, for nnasm_model_metadata); a failure is NNASM_ERR_BAD_MODEL
// with the Status's message.
using FillProgram = std::function<Status(Program* p, std::string* producer)>;

// Makes a model as nnasm_model_load_memory does, its program from `fill`: checks and applies
// `opts` (NULL: defaults), fills, finishes and prepares the program for inference. `what` names
// the source in messages. On failure *out is NULL and the last error says why.
nnasm_status load_program(const nnasm_model_options* opts, const std::string& what, const FillProgram& fill,
                          nnasm_model** out);

}  // namespace nnasm::capi
