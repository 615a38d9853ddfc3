/* A host built against version 1 of the C API (tests/abi/nnasm_v1.h, nnasm.h as it was before
 * struct sizes), linked against this library: it must keep working unchanged. Loads a listing
 * with its own options and a two-argument log callback, reads input and output infos in the
 * version-1 layout, runs, and checks the outputs. Prints what failed and exits 1; 0 when all is
 * well. Built and run by `make test`. */
#include <stdio.h>
#include <string.h>

#include "nnasm_v1.h"

static const char kListing[] =
    "input  %x : f32[1,4]\n"
    "const  @w : f32[4,2] = [1, 0, 0, 1, 1, 1, -1, 2]\n"
    "const  @b : f32[2] = [0.5, -0.5]\n"
    "output %y\n"
    "\n"
    "forward:\n"
    "  LINEAR %x, @w, @b -> %y\n";

static int failures = 0;
static int log_calls = 0;

static void check(int ok, const char* what) {
  if (ok) return;
  fprintf(stderr, "client_v1: %s (last error: %s)\n", what, nnasm_last_error());
  ++failures;
}

static void on_log(void* user, const char* message) {
  check(user == &log_calls, "the log's user pointer");
  check(message != NULL && strstr(message, "instructions") != NULL, "the log's message");
  ++log_calls;
}

int main(void) {
  nnasm_model_options opts;
  nnasm_model* model = NULL;
  nnasm_model* refused = NULL;
  nnasm_instance* in = NULL;
  nnasm_tensor_info xi, yi;
  size_t count = 0;
  const float x[4] = {1, 2, 3, 4};
  float y[2] = {0, 0};
  nnasm_model_options_init(&opts);
  check(opts.abi_version == 1 && opts.threads == 1 && opts.jit == 1, "nnasm_model_options_init fills version 1");
  opts.log = on_log;
  opts.log_user = &log_calls;
  check(nnasm_model_load_memory(kListing, sizeof kListing - 1, &opts, &model) == NNASM_OK, "load");
  if (!model) return 1;
  check(log_calls == 1, "the log callback was called once, with two arguments");
  check(nnasm_model_input_count(model, &count) == NNASM_OK && count == 1, "one input");
  check(nnasm_model_output_count(model, &count) == NNASM_OK && count == 1, "one output");
  check(nnasm_model_input_info(model, 0, &xi) == NNASM_OK, "input info");
  check(strcmp(xi.name, "x") == 0 && xi.dtype == NNASM_F32 && xi.rank == 2 && xi.dims[0] == 1 && xi.dims[1] == 4 &&
            xi.bytes == 16 && xi.buffer_bytes == 64,
        "input info in the version-1 layout");
  check(nnasm_model_output_info(model, 0, &yi) == NNASM_OK, "output info");
  check(strcmp(yi.name, "y") == 0 && yi.rank == 2 && yi.dims[1] == 2 && yi.bytes == 8, "output info in the version-1 layout");
  check(nnasm_model_output_info(model, 1, &yi) == NNASM_ERR_NOT_FOUND, "output 1 is not found");
  check(nnasm_instance_create(model, &in) == NNASM_OK, "instance");
  check(nnasm_instance_set_input(in, "x", x, sizeof x) == NNASM_OK, "set input");
  check(nnasm_instance_run(in) == NNASM_OK, "run");
  check(nnasm_instance_get_output(in, "y", y, sizeof y) == NNASM_OK, "get output");
  check(y[0] == 0.5f && y[1] == 12.5f, "y = x w + b"); /* exact: small integers and halves */
  check(strcmp(nnasm_status_string(NNASM_ERR_ABI), "ABI mismatch") == 0, "status strings");
  opts.isa = "sse9"; /* read where version 1 keeps it */
  check(nnasm_model_load_memory(kListing, sizeof kListing - 1, &opts, &refused) == NNASM_ERR_INVALID_ARGUMENT &&
            strstr(nnasm_last_error(), "isa 'sse9'") != NULL,
        "options read in the version-1 layout");
  opts.isa = NULL;
  opts.abi_version = 7; /* neither version 1 nor a size */
  check(nnasm_model_load_memory(kListing, sizeof kListing - 1, &opts, &refused) == NNASM_ERR_ABI, "ABI 7 refused");
  nnasm_instance_free(in);
  nnasm_model_free(model);
  if (failures == 0) printf("client_v1: a version-1 host runs against nnasm %s (ABI %u)\n", nnasm_version(),
                            (unsigned)nnasm_abi_version());
  return failures == 0 ? 0 : 1;
}
