#include "serialize/model_source.h"

namespace nnasm {

namespace {

bool starts_with(std::string_view b, std::string_view magic) { return b.substr(0, magic.size()) == magic; }

// An ONNX ModelProto starts with field 1 (ir_version, a small varint: tag byte 0x08), then another
// field: a listing never starts with byte 0x08, and a guess wrong here only changes the message.
bool looks_like_onnx(std::string_view b) {
  if (b.size() < 3 || b[0] != 0x08) return false;
  const unsigned char version = static_cast<unsigned char>(b[1]), next = static_cast<unsigned char>(b[2]);
  const unsigned field = next >> 3, wire = next & 7;
  return version > 0 && version < 0x80 && field >= 2 && field <= 20 && (wire == 0 || wire == 2);
}

struct Kind {
  const char* what;
  const char* hint;  // what to do instead, or ""
};

// What `b` is when it is a known format that is not a model, else nullptr.
const Kind* foreign_kind(std::string_view b) {
  static const Kind npy{"a .npy array", ""}, hdf5{"an HDF5 file", ""},
      gzip{"gzip-compressed data", "; decompress it first"}, zip{"a ZIP archive (.npz, PyTorch .pt or Keras)", ""},
      onnx{"an ONNX model", "; convert it with `nnasm import`"};
  if (starts_with(b, "\x93NUMPY")) return &npy;
  if (starts_with(b, "\x89HDF\r\n\x1a\n")) return &hdf5;
  if (starts_with(b, "\x1f\x8b")) return &gzip;
  if (starts_with(b, "PK\x03\x04")) return &zip;
  if (looks_like_onnx(b)) return &onnx;
  return nullptr;
}

}  // namespace

Status check_model_bytes(std::string_view bytes, const std::string& what) {
  if (bytes.empty()) return Status::errorf("{}: error: empty file (expected a listing or an nnasm model file)", what);
  if (const Kind* k = foreign_kind(bytes))
    return Status::errorf("{}: error: {} is {}, not a model (a listing or an nnasm model file){}", what, what, k->what,
                          k->hint);
  return Status::ok();
}

Status check_listing_not_empty(const Program& p, const std::string& what) {
  if (!p.code().empty() || !p.outputs().empty()) return Status::ok();
  return Status::errorf("{}:1:1: error: the listing has no instructions and no outputs (declare one with "
                        "'output %NAME' and compute it under 'forward:')",
                        what);
}

}  // namespace nnasm
