/* nnasm_import.h — importing other formats into nnasm models through the C API (api/nnasm.h):
 * ONNX bytes become a model ready to run, or a model file (.nnm) that nnasm_model_load_* loads
 * without the importer. Valid C99 and C++. The importer (protobuf) lives in the import library, so
 * a host that ships only .nnm files links none of it.
 *
 * Errors: NNASM_ERR_BAD_MODEL for bytes that are not an ONNX model and for a model with nodes or
 * types nnasm cannot map; nnasm_last_error() then lists every such node by name and op type
 * ("node 'Conv_12' (op ConvTranspose, opset 13): not supported"). Graph inputs need static
 * shapes. Thread safety: as nnasm_model_load_memory. Never throws or aborts, on any bytes. */
#ifndef NNASM_IMPORT_H
#define NNASM_IMPORT_H

#include "nnasm.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Imports the ONNX model in `size` bytes at `data` and prepares it as nnasm_model_load_memory
 * does (`opts` may be NULL); the bytes are not kept. On failure *out is NULL. */
nnasm_status nnasm_import_onnx(const void* data, size_t size, const nnasm_model_options* opts, nnasm_model** out);

/* Imports the ONNX model in `size` bytes at `data` and writes it as a model file at `path`
 * (atomically: a failure leaves what was there). NNASM_ERR_IO when the file cannot be written. */
nnasm_status nnasm_import_onnx_to_model_file(const void* data, size_t size, const char* path);

#ifdef __cplusplus
}
#endif

#endif /* NNASM_IMPORT_H */
