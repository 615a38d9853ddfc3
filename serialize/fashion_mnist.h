// Fashion-MNIST (Zalando's 28×28 grey-scale clothing images in 10 classes, 60000 for training and
// 10000 for testing) loaded from its four IDX files into float images in [0,1] and int32 labels,
// ready to be fed to a program's input tensors.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "isa/status.h"

namespace nnasm {

// Where the Debian package dataset-fashion-mnist (`make deps`) installs the files.
constexpr const char* FASHION_MNIST_DEFAULT_DIR = "/usr/share/datasets/fashion-mnist";
// Overrides the default directory when set and non-empty.
constexpr const char* FASHION_MNIST_ENV = "NNASM_FASHION_MNIST";

struct Dataset {
  std::vector<float> images;     // n×rows×cols, row-major, pixel/255
  std::vector<int32_t> labels;   // n, each in 0..9
  int64_t n = 0, rows = 0, cols = 0;
};

// The directory fashion_mnist_load reads when given an empty `dir`: $NNASM_FASHION_MNIST if set
// and non-empty, else FASHION_MNIST_DEFAULT_DIR.
std::string fashion_mnist_dir(const std::string& dir);

// Loads the training set (train-images-idx3-ubyte, train-labels-idx1-ubyte) or the test set
// (t10k-...) from `dir`, each file either plain or with a .gz suffix (the plain one is preferred
// when both exist). An empty `dir` means fashion_mnist_dir(""). Errors: a missing file (naming
// the path, `make deps` and the environment variable), anything idx_read refuses, images that are
// not u8 of rank 3 or labels not u8 of rank 1, differing image and label counts, a label outside
// 0..9. Allocates the images as floats (about 190 MB for the training set). Thread-safe as long as
// nothing changes the environment meanwhile.
Status fashion_mnist_load(const std::string& dir, bool train, Dataset* out);

}  // namespace nnasm
