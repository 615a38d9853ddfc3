// Generated kernels and their cache. A kernel is code generated for one instruction's exact
// shapes and immediates on one ISA, with the one calling convention `void k(const KernelArgs*)`.
// Its pages are writable while it is generated and read+execute after — never both at once.
// The cache (one per Context) maps a descriptor string to a kernel; it is thread-safe, and a
// kernel is immutable and shared by every executor that uses it.
#pragma once
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "isa/status.h"
#include "jit/cpu.h"

namespace Xbyak {
class CodeGenerator;
}

namespace nnasm {

struct KernelArgs;
using KernelFn = void (*)(const KernelArgs* args);

class JitKernel {
 public:
  ~JitKernel();
  KernelFn fn() const { return fn_; }
  const std::string& name() const { return name_; }  // e.g. "f32_relu__avx512_u4"
  size_t code_bytes() const { return bytes_; }
  const void* code() const;

 private:
  friend Result<std::shared_ptr<const JitKernel>> build_kernel(const std::string&, size_t,
                                                               const std::function<Status(Xbyak::CodeGenerator&)>&);
  friend Result<std::shared_ptr<const JitKernel>> build_bound_kernel(const std::string&,
                                                                     void (*)(const KernelArgs*, const void*),
                                                                     std::shared_ptr<const void>);
  JitKernel() = default;
  std::unique_ptr<Xbyak::CodeGenerator> gen_;
  std::shared_ptr<const void> bound_;  // a bound kernel's data
  KernelFn fn_ = nullptr;
  std::string name_;
  size_t bytes_ = 0;
};

// Generates a kernel: `emit` writes code into a fresh generator of at most `max_bytes`; then the
// pages are switched to read+execute. Errors: emit's own, or xbyak's (code too large, a page
// protection failure), caught here and returned. Allocates.
Result<std::shared_ptr<const JitKernel>> build_kernel(const std::string& name, size_t max_bytes,
                                                      const std::function<Status(Xbyak::CodeGenerator&)>& emit);

// A kernel that is C++ code driving other generated kernels (a convolution: im2col, then a
// GEMM kernel, then a bias/activation kernel): a generated entry puts `data` in the second
// argument register and jumps to fn(args, data). The kernel keeps `data` (and through it the
// kernels it calls) alive. Errors: as build_kernel. Allocates.
using BoundFn = void (*)(const KernelArgs* args, const void* data);
Result<std::shared_ptr<const JitKernel>> build_bound_kernel(const std::string& name, BoundFn fn,
                                                            std::shared_ptr<const void> data);

class KernelCache;

// The kernel for `key` from `cache`, generated the first time by running `emit` twice: once into
// a scratch buffer of `measure_bytes` to learn the code's size, then into a code buffer of exactly
// that size (so small kernels do not each hold a large buffer). Errors as build_kernel.
Result<std::shared_ptr<const JitKernel>> build_kernel_measured(KernelCache& cache, const std::string& key,
                                                               const std::string& name, size_t measure_bytes,
                                                               const std::function<Status(Xbyak::CodeGenerator&)>& emit);

class KernelCache {
 public:
  // The kernel for `key`, built by `build` the first time. A failed build is remembered too (so a
  // shape that cannot be generated is not retried per instruction) and returned as its Status.
  Result<std::shared_ptr<const JitKernel>> get(const std::string& key,
                                               const std::function<Result<std::shared_ptr<const JitKernel>>()>& build);
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, Result<std::shared_ptr<const JitKernel>>> map_;
};

}  // namespace nnasm
