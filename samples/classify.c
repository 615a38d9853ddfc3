/* classify.c — a trained model embedded in plain C: loads an inference model file (for example
 * the batch-1 export of `make run`'s Fashion-MNIST MLP) and classifies the Fashion-MNIST test set
 * one image per run, as a game or a tool would one request at a time. Prints the accuracy and the
 * mean time per image; writes the predicted classes, one per line, with --predictions FILE.
 *
 *   nnasm export --inference --batch 1 fashion_mlp.nnm -o fashion_mlp_infer.nnm
 *   build/samples/classify fashion_mlp_infer.nnm [--input x] [--output logits] [--limit N]
 *                          [--data DIR] [--predictions FILE]
 *
 * The images are read with zlib from the gzip IDX files of the Debian package dataset-fashion-mnist
 * (or DIR, or $NNASM_FASHION_MNIST) and scaled to [0,1], as the training samples read them.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "nnasm.h"

enum { PIXELS = 28 * 28, CLASSES = 10, MAX_IMAGES = 1 << 20 };

/* Reads a gzip IDX file: its 4-byte magic, `rank` big-endian dimensions, then u8 data. Returns the
 * data (malloc'd, caller frees) and the first dimension in *n, or NULL with a message. */
static unsigned char* read_idx(const char* path, int rank, long per_item, long* n) {
  gzFile f = gzopen(path, "rb");
  if (!f) {
    fprintf(stderr, "classify: cannot open %s\n", path);
    return NULL;
  }
  unsigned char head[16];
  const int head_bytes = 4 + 4 * rank;
  unsigned char* data = NULL;
  if (gzread(f, head, head_bytes) != head_bytes || head[2] != 0x08 || head[3] != rank) {
    fprintf(stderr, "classify: %s is not a u8 IDX file of rank %d\n", path, rank);
    goto done;
  }
  *n = ((long)head[4] << 24) | ((long)head[5] << 16) | ((long)head[6] << 8) | head[7];
  long item = 1;
  for (int d = 1; d < rank; ++d) {
    const unsigned char* b = head + 4 + 4 * d;
    item *= ((long)b[0] << 24) | ((long)b[1] << 16) | ((long)b[2] << 8) | b[3];
  }
  if (*n <= 0 || *n > MAX_IMAGES || item != per_item) {
    fprintf(stderr, "classify: %s holds %ld items of %ld bytes; expected up to %d of %ld\n", path, *n, item,
            MAX_IMAGES, per_item);
    goto done;
  }
  data = malloc((size_t)(*n * item));
  if (data && gzread(f, data, (unsigned)(*n * item)) != (int)(*n * item)) {
    fprintf(stderr, "classify: %s is truncated\n", path);
    free(data);
    data = NULL;
  }
done:
  gzclose(f);
  return data;
}

static double now_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

static int fail(const char* what, nnasm_status s) {
  fprintf(stderr, "classify: %s: %s: %s\n", what, nnasm_status_string(s), nnasm_last_error());
  return 1;
}

int main(int argc, char** argv) {
  const char *model_path = NULL, *input = "x", *output = "logits", *predictions = NULL;
  const char* data_dir = getenv("NNASM_FASHION_MNIST");
  long limit = MAX_IMAGES;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--input") && v) input = argv[++i];
    else if (!strcmp(a, "--output") && v) output = argv[++i];
    else if (!strcmp(a, "--data") && v) data_dir = argv[++i];
    else if (!strcmp(a, "--predictions") && v) predictions = argv[++i];
    else if (!strcmp(a, "--limit") && v) limit = atol(argv[++i]);
    else if (a[0] != '-' && !model_path) model_path = a;
    else {
      fprintf(stderr, "usage: classify MODEL.nnm [--input x] [--output logits] [--limit N] [--data DIR] "
                      "[--predictions FILE]\n");
      return 2;
    }
  }
  if (!model_path) return fprintf(stderr, "classify: no model file given\n"), 2;
  if (!data_dir || !*data_dir) data_dir = "/usr/share/datasets/fashion-mnist";

  char images_path[4096], labels_path[4096];
  snprintf(images_path, sizeof images_path, "%s/t10k-images-idx3-ubyte.gz", data_dir);
  snprintf(labels_path, sizeof labels_path, "%s/t10k-labels-idx1-ubyte.gz", data_dir);
  long n_images = 0, n_labels = 0;
  unsigned char* images = read_idx(images_path, 3, PIXELS, &n_images);
  unsigned char* labels = images ? read_idx(labels_path, 1, 1, &n_labels) : NULL;
  if (!labels) return free(images), 1;
  if (n_labels != n_images) {
    fprintf(stderr, "classify: %ld images but %ld labels\n", n_images, n_labels);
    return free(images), free(labels), 1;
  }
  const long n = n_images < limit ? n_images : limit;

  nnasm_model* model = NULL;
  nnasm_instance* inst = NULL;
  nnasm_status s = nnasm_model_load_file(model_path, NULL, &model);
  if (s != NNASM_OK) return fail(model_path, s);
  if ((s = nnasm_instance_create(model, &inst)) != NNASM_OK) return fail("instance", s);

  /* The input's own buffer, written in place: no copy per image. */
  void* in_data = NULL;
  size_t in_bytes = 0;
  if ((s = nnasm_instance_tensor_data(inst, input, &in_data, &in_bytes)) != NNASM_OK) return fail(input, s);
  if (in_bytes != PIXELS * sizeof(float)) {
    fprintf(stderr, "classify: input %s holds %zu bytes; one 28x28 image is %zu (export at --batch 1)\n", input,
            in_bytes, PIXELS * sizeof(float));
    return 1;
  }
  FILE* pred = predictions ? fopen(predictions, "w") : NULL;
  if (predictions && !pred) return fprintf(stderr, "classify: cannot write %s\n", predictions), 1;

  long correct = 0;
  const double t0 = now_seconds();
  for (long i = 0; i < n; ++i) {
    float* x = in_data;
    for (int p = 0; p < PIXELS; ++p) x[p] = images[i * PIXELS + p] / 255.0f;
    if ((s = nnasm_instance_run(inst)) != NNASM_OK) return fail("run", s);
    float logits[CLASSES];
    if ((s = nnasm_instance_get_output(inst, output, logits, sizeof logits)) != NNASM_OK) return fail(output, s);
    int best = 0;
    for (int c = 1; c < CLASSES; ++c)
      if (logits[c] > logits[best]) best = c;
    correct += best == labels[i];
    if (pred) fprintf(pred, "%d\n", best);
  }
  const double seconds = now_seconds() - t0;
  if (pred) fclose(pred);
  printf("accuracy: %.2f%% of %ld test images, %.1f us per image\n", 100.0 * correct / n, n, 1e6 * seconds / n);

  nnasm_instance_free(inst);
  nnasm_model_free(model);
  free(images);
  free(labels);
  return 0;
}
