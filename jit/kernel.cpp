// Code buffers with W^X discipline, and the kernel cache.
#include "jit/kernel.h"

#include <xbyak/xbyak.h>

#include <fmt/format.h>

#include "jit/aligned_buffer.h"

namespace nnasm {

JitKernel::~JitKernel() = default;

const void* JitKernel::code() const { return gen_ ? gen_->getCode() : nullptr; }

namespace {

// Runs `body` (code generation), turning xbyak's failures into a Status: its exceptions, or with
// XBYAK_NO_EXCEPTION (builds without exceptions) the error code it leaves behind.
template <typename F>
Status xbyak_guard(const std::string& name, F&& body) {
#ifdef XBYAK_NO_EXCEPTION
  Xbyak::ClearError();
  Status s = body();
  if (const int e = Xbyak::GetError()) return Status::errorf("generating {}: xbyak: {}", name, Xbyak::ConvertErrorToString(e));
  return s;
#else
  try {
    return body();
  } catch (const Xbyak::Error& e) {
    return Status::errorf("generating {}: xbyak: {}", name, e.what());
  } catch (const std::exception& e) {
    return Status::errorf("generating {}: {}", name, e.what());
  }
#endif
}

}  // namespace

Result<std::shared_ptr<const JitKernel>> build_kernel(const std::string& name, size_t max_bytes,
                                                      const std::function<Status(Xbyak::CodeGenerator&)>& emit) {
  std::shared_ptr<JitKernel> k(new JitKernel());
  k->name_ = name;
  NNASM_TRY(xbyak_guard(name, [&] {
    // DontSetProtectRWE: the buffer stays read+write (never RWX) until setProtectModeRE.
    k->gen_ = std::make_unique<Xbyak::CodeGenerator>(max_bytes, Xbyak::DontSetProtectRWE);
    NNASM_TRY(emit(*k->gen_));
    if (!k->gen_->setProtectModeRE()) return Status::errorf("generating {}: cannot make the code executable", name);
    k->bytes_ = k->gen_->getSize();
    k->fn_ = k->gen_->getCode<KernelFn>();
    return Status::ok();
  }));
  return std::shared_ptr<const JitKernel>(std::move(k));
}

Result<std::shared_ptr<const JitKernel>> build_bound_kernel(const std::string& name, BoundFn fn,
                                                            std::shared_ptr<const void> data) {
  Result<std::shared_ptr<const JitKernel>> k = build_kernel(name, 32, [&](Xbyak::CodeGenerator& g) {
    g.mov(g.rsi, reinterpret_cast<uint64_t>(data.get()));
    g.mov(g.rax, reinterpret_cast<uint64_t>(fn));
    g.jmp(g.rax);  // a tail call: fn returns to our caller
    return Status::ok();
  });
  if (!k) return k;
  std::const_pointer_cast<JitKernel>(k.value())->bound_ = std::move(data);
  return k;
}

Result<std::shared_ptr<const JitKernel>> KernelCache::get(
    const std::string& key, const std::function<Result<std::shared_ptr<const JitKernel>>()>& build) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(key);
  if (it != map_.end()) return it->second;
  Result<std::shared_ptr<const JitKernel>> r = build();
  map_.emplace(key, r);
  return r;
}

Result<std::shared_ptr<const JitKernel>> build_kernel_measured(KernelCache& cache, const std::string& key,
                                                               const std::string& name, size_t measure_bytes,
                                                               const std::function<Status(Xbyak::CodeGenerator&)>& emit) {
  return cache.get(key, [&]() -> Result<std::shared_ptr<const JitKernel>> {
    size_t bytes = 0;
    {
      // 64-byte aligned like the final buffer, so align() pads alike.
      AlignedBuffer scratch(measure_bytes);
      if (scratch.empty()) return Status::errorf("generating {}: out of memory", name);
      NNASM_TRY(xbyak_guard(name, [&] {
        Xbyak::CodeGenerator m(measure_bytes, scratch.data());
        Status st = emit(m);
        if (!st) return st.with_prefix(fmt::format("generating {}: ", name));
        bytes = m.getSize();
        return Status::ok();
      }));
    }
    return build_kernel(name, bytes, emit);
  });
}

size_t KernelCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return map_.size();
}

}  // namespace nnasm
