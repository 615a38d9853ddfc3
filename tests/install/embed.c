/* A C consumer of the installed nnasm (tests/install/consumer_test.sh builds it with CMake and
 * with pkg-config): loads the listing given as argv[1] (tiny.nnasm: y = softmax(relu(2x))), runs
 * it on x = [-1, 0, 1, 2] and checks y against the same computation here. Prints "embed: ok". */
#include <math.h>
#include <stdio.h>

#include <nnasm.h>

static int fail(const char* what, nnasm_status s) {
  fprintf(stderr, "embed: %s: %s: %s\n", what, nnasm_status_string(s), nnasm_last_error());
  return 1;
}

int main(int argc, char** argv) {
  const float x[4] = {-1, 0, 1, 2};
  float y[4], want[4], sum = 0, worst = 0;
  nnasm_model* model = NULL;
  nnasm_instance* in = NULL;
  nnasm_status s;
  int i;
  if (argc != 2) return fprintf(stderr, "usage: embed LISTING\n"), 2;
  if ((s = nnasm_model_load_file(argv[1], NULL, &model)) != NNASM_OK) return fail("load", s);
  if ((s = nnasm_instance_create(model, &in)) != NNASM_OK) return fail("instance", s);
  if ((s = nnasm_instance_set_input(in, "x", x, sizeof x)) != NNASM_OK) return fail("set_input", s);
  if ((s = nnasm_instance_run(in)) != NNASM_OK) return fail("run", s);
  if ((s = nnasm_instance_get_output(in, "y", y, sizeof y)) != NNASM_OK) return fail("get_output", s);
  for (i = 0; i < 4; ++i) sum += want[i] = expf(2 * x[i] > 0 ? 2 * x[i] : 0);
  for (i = 0; i < 4; ++i) worst = fmaxf(worst, fabsf(want[i] / sum - y[i]));
  nnasm_instance_free(in);
  nnasm_model_free(model);
  if (!(worst < 1e-6f)) return fprintf(stderr, "embed: y differs from softmax(relu(2x)) by %g\n", worst), 1;
  printf("embed: ok %s y = [%.6f, %.6f, %.6f, %.6f]\n", nnasm_version(), y[0], y[1], y[2], y[3]);
  return 0;
}
