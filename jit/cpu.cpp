// CPU probe and the JIT configuration read from the environment.
#include "jit/cpu.h"

#include <cstdlib>

#include <xbyak/xbyak_util.h>

namespace nnasm {

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::REF: return "ref";
    case Isa::AVX2: return "avx2";
    case Isa::AVX512: return "avx512";
  }
  return "?";
}

bool isa_from_name(const std::string& name, Isa* out) {
  for (Isa i : {Isa::REF, Isa::AVX2, Isa::AVX512})
    if (name == isa_name(i)) {
      *out = i;
      return true;
    }
  return false;
}

namespace {
CpuInfo probe() {
  using C = Xbyak::util::Cpu;
  C cpu;
  CpuInfo info;
  const struct {
    C::Type type;
    const char* name;
  } known[] = {{C::tSSE42, "sse4.2"},       {C::tAVX, "avx"},           {C::tFMA, "fma"},
               {C::tAVX2, "avx2"},          {C::tF16C, "f16c"},         {C::tAVX512F, "avx512f"},
               {C::tAVX512VL, "avx512vl"},  {C::tAVX512BW, "avx512bw"}, {C::tAVX512DQ, "avx512dq"},
               {C::tAVX512_VNNI, "avx512_vnni"}, {C::tAVX512_BF16, "avx512_bf16"},
               {C::tAVX_VNNI, "avx_vnni"}};
  for (const auto& k : known)
    if (cpu.has(k.type)) info.features += std::string(info.features.empty() ? "" : " ") + k.name;
  char vendor[13] = {};
  unsigned regs[4];
  C::getCpuid(0, regs);
  for (int i = 0; i < 4; ++i) {
    vendor[i] = static_cast<char>(regs[1] >> (8 * i));
    vendor[4 + i] = static_cast<char>(regs[3] >> (8 * i));
    vendor[8 + i] = static_cast<char>(regs[2] >> (8 * i));
  }
  info.vendor = vendor;
  // Levels count from L1 (index 0); a hypervisor may report none.
  if (cpu.getDataCacheLevels() >= 2 && cpu.getCoresSharingDataCache(1) > 0)
    info.l2_bytes = int64_t(cpu.getDataCacheSize(1)) / cpu.getCoresSharingDataCache(1);
  if (cpu.has(C::tAVX2) && cpu.has(C::tFMA)) info.best = Isa::AVX2;
  if (info.best == Isa::AVX2 && cpu.has(C::tAVX512F) && cpu.has(C::tAVX512VL) && cpu.has(C::tAVX512BW) &&
      cpu.has(C::tAVX512DQ))
    info.best = Isa::AVX512;
  info.avx512_bf16 = cpu.has(C::tAVX512_BF16);
  info.avx512_vnni = cpu.has(C::tAVX512_VNNI);
  info.avx_vnni = cpu.has(C::tAVX_VNNI);
  return info;
}
}  // namespace

const CpuInfo& cpu_info() {
  static const CpuInfo info = probe();
  return info;
}

Isa JitConfig::isa() const {
  if (!enabled) return Isa::REF;
  return cap < cpu_info().best ? cap : cpu_info().best;
}

JitConfig jit_config_from_env(std::string* warning) {
  JitConfig c;
  if (const char* j = std::getenv("NNASM_JIT")) c.enabled = std::string(j) != "0";
  if (const char* i = std::getenv("NNASM_ISA")) {
    Isa cap;
    if (isa_from_name(i, &cap)) c.cap = cap;
    else if (warning) *warning = std::string("NNASM_ISA=") + i + " is not avx512, avx2 or ref; ignored";
  }
  return c;
}

}  // namespace nnasm
