// What the CPU can run and what we allow: the probe (Xbyak::util::Cpu, once per process, then
// immutable), the ISA levels our kernels target, and the user's cap (NNASM_ISA) and switch
// (NNASM_JIT=0 for platforms that forbid generated code).
#pragma once
#include <cstdint>
#include <string>

namespace nnasm {

// Ordered: a kernel declares the lowest level it needs.
enum class Isa : uint8_t { REF = 0, AVX2 = 1, AVX512 = 2 };
const char* isa_name(Isa isa);  // "ref", "avx2", "avx512"
bool isa_from_name(const std::string& name, Isa* out);

struct CpuInfo {
  std::string vendor;    // e.g. "AuthenticAMD"
  std::string features;  // the features our kernels care about, space-separated
  Isa best = Isa::REF;   // AVX2 needs AVX2+FMA; AVX512 needs F, VL, BW and DQ as well
  // One core's share of the level-2 data cache in bytes: its size over the cores that share it
  // (xbyak divides CPUID's count of logical processors by the SMT width), which is what each
  // thread has with the default of one thread per core (engine/usable_cpus.h); 0 when unknown
  // (xbyak reads the cache hierarchy on Intel only). How a large GEMV splits follows it.
  int64_t l2_bytes = 0;
  // AVX512_BF16 (CPUID leaf 7 subleaf 1, EAX bit 5): vdpbf16ps and vcvtne2ps2bf16. Apart from
  // `best`: LINEAR_BF16's AVX-512 kernel uses them where present and widens bf16 to f32 where not.
  bool avx512_bf16 = false;
  // AVX512_VNNI (EVEX vpdpbusd) and AVX-VNNI (its VEX form on ymm): LINEAR_I8's u8·i8 products
  // summed into i32 in one instruction where present, widened to i16 pairs (vpmaddwd) where not.
  bool avx512_vnni = false;
  bool avx_vnni = false;
};
// Probed once; thread-safe.
const CpuInfo& cpu_info();

// How a context generates code: the level in use is min(cpu best, cap); disabled means
// reference kernels only.
struct JitConfig {
  bool enabled = true;
  Isa cap = Isa::AVX512;
  // Generate each section's dispatch stream (jit/stream.h) rather than loop over the
  // steps; needs `enabled`. Off only to measure what the stream saves.
  bool stream = true;
  Isa isa() const;  // the level in use
};
// From the environment: NNASM_JIT=0 disables; NNASM_ISA=avx512|avx2|ref caps (an unknown value
// is ignored with the warning in `*warning`, if given).
JitConfig jit_config_from_env(std::string* warning = nullptr);

}  // namespace nnasm
