#include "serialize/model_source.h"

namespace nnasm {

Status check_model_bytes(std::string_view bytes, const std::string& what) {
  if (bytes.empty()) return Status::errorf("{}: error: empty file (expected a listing or an nnasm model file)", what);
  return Status::ok();
}

Status check_listing_not_empty(const Program& p, const std::string& what) {
  if (!p.code().empty() || !p.outputs().empty()) return Status::ok();
  return Status::errorf("{}:1:1: error: the listing has no instructions and no outputs (declare one with "
                        "'output %NAME' and compute it under 'forward:')",
                        what);
}

}  // namespace nnasm
