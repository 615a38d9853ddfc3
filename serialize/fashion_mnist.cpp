// The Fashion-MNIST loader: finds the files (plain or .gz), reads them with idx_read, checks that
// they describe one data set (u8 images of rank 3, u8 labels 0..9, equal counts) and converts.
#include "serialize/fashion_mnist.h"

#include <sys/stat.h>

#include <cstdlib>
#include <new>

#include <fmt/format.h>

#include "serialize/idx.h"

namespace nnasm {

namespace {

bool is_file(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The path of `base` in `dir`, plain or .gz.
Status find_file(const std::string& dir, const std::string& base, std::string* path) {
  const std::string plain = dir + "/" + base;
  if (is_file(plain)) {
    *path = plain;
    return Status::ok();
  }
  if (is_file(plain + ".gz")) {
    *path = plain + ".gz";
    return Status::ok();
  }
  return Status::errorf(
      "{}.gz: no such file (nor {}); Fashion-MNIST is not installed there: run `make deps` (Debian package "
      "dataset-fashion-mnist, installed in {}) or set {} to a directory holding the four IDX files",
      plain, base, FASHION_MNIST_DEFAULT_DIR, FASHION_MNIST_ENV);
}

}  // namespace

std::string fashion_mnist_dir(const std::string& dir) {
  if (!dir.empty()) return dir;
  const char* env = std::getenv(FASHION_MNIST_ENV);
  return env && *env ? env : FASHION_MNIST_DEFAULT_DIR;
}

Status fashion_mnist_load(const std::string& dir_arg, bool train, Dataset* out) {
  const std::string dir = fashion_mnist_dir(dir_arg);
  const std::string prefix = train ? "train" : "t10k";
  std::string images_path, labels_path;
  NNASM_TRY(find_file(dir, prefix + "-images-idx3-ubyte", &images_path));
  NNASM_TRY(find_file(dir, prefix + "-labels-idx1-ubyte", &labels_path));

  IdxArray images, labels;
  NNASM_TRY(idx_read(images_path, &images));
  if (images.type != IDX_U8 || images.shape.rank != 3)
    return Status::errorf("{}: expected u8 images of rank 3 (n, rows, cols), got {}{}", images_path,
                          idx_type_name(images.type), images.shape.str());
  NNASM_TRY(idx_read(labels_path, &labels));
  if (labels.type != IDX_U8 || labels.shape.rank != 1)
    return Status::errorf("{}: expected u8 labels of rank 1, got {}{}", labels_path, idx_type_name(labels.type),
                          labels.shape.str());
  if (labels.shape[0] != images.shape[0])
    return Status::errorf("{} has {} images but {} has {} labels", images_path, images.shape[0], labels_path,
                          labels.shape[0]);
  for (size_t i = 0; i < labels.u8.size(); ++i)
    if (labels.u8[i] > 9)
      return Status::errorf("{}: label {} (at byte {}) is {}, outside 0..9", labels_path, i, 8 + i, labels.u8[i]);

  NNASM_TRY(catch_bad_alloc(
      [&] {
        out->images.resize(images.u8.size());
        out->labels.resize(labels.u8.size());
        return Status::ok();
      },
      [&] { return fmt::format("{}: cannot allocate {} floats for the images", images_path, images.u8.size()); }));
  for (size_t i = 0; i < images.u8.size(); ++i) out->images[i] = images.u8[i] / 255.0f;  // division keeps 255 exactly 1
  for (size_t i = 0; i < labels.u8.size(); ++i) out->labels[i] = labels.u8[i];
  out->n = images.shape[0];
  out->rows = images.shape[1];
  out->cols = images.shape[2];
  return Status::ok();
}

}  // namespace nnasm
