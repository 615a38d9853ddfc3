// A consumer of the installed importers (libnnasm_import; tests/install/consumer_test.sh builds it
// with CMake's nnasm::import and with pkg-config's nnasm_import): links and calls into them.
// Prints "import: ok N op types".
#include <cstdio>

#include <nnasm/serialize/onnx/onnx_import.h>

int main() {
  size_t n = nnasm::onnx_supported_ops().size();
  if (n == 0) return std::fprintf(stderr, "import: the ONNX importer maps no op types\n"), 1;
  std::printf("import: ok %zu op types\n", n);
  return 0;
}
