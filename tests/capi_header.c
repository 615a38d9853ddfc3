/* The C API from C: this file is compiled as strict C99 with warnings as errors (see the Makefile),
 * so nnasm.h stays a valid C header; capi_test.cpp calls its functions. */
#include <string.h>

#include "nnasm.h"

/* Loads `listing` from memory, runs it on `x` (n_x floats into input "x"), copies output "y"
 * (n_y floats) out. Returns NNASM_OK or the first failure, with its message in `err`. */
int nnasm_c_run_listing(const char* listing, const float* x, size_t n_x, float* y, size_t n_y, char* err,
                        size_t err_size) {
  nnasm_model_options opts;
  nnasm_model* model = NULL;
  nnasm_instance* instance = NULL;
  nnasm_tensor_info info;
  size_t inputs = 0;
  nnasm_status s;
  nnasm_model_options_init(&opts);
  info.struct_size = sizeof info;
  s = nnasm_model_load_memory(listing, strlen(listing), &opts, &model);
  if (s == NNASM_OK) s = nnasm_model_input_count(model, &inputs);
  if (s == NNASM_OK && inputs > 0) s = nnasm_model_input_info(model, 0, &info);
  if (s == NNASM_OK) s = nnasm_instance_create(model, &instance);
  if (s == NNASM_OK) s = nnasm_instance_set_input(instance, "x", x, n_x * sizeof *x);
  if (s == NNASM_OK) s = nnasm_instance_run(instance);
  if (s == NNASM_OK) s = nnasm_instance_get_output(instance, "y", y, n_y * sizeof *y);
  if (s != NNASM_OK && err_size > 0) {
    strncpy(err, nnasm_last_error(), err_size - 1);
    err[err_size - 1] = '\0';
  }
  nnasm_instance_free(instance);
  nnasm_model_free(model);
  return (int)s;
}
