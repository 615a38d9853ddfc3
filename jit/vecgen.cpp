// VecGen: register naming, the constant pool, tails and masks for AVX2 and AVX-512.
#include "jit/vecgen.h"

#include <cstring>

namespace nnasm {

using namespace Xbyak;

VecGen::VecGen(CodeGenerator& gen, Isa isa) : g(gen), isa_(isa) {}

Xmm VecGen::vreg(int i) const {
  if (avx512()) return Zmm(i);
  return Ymm(i);
}

size_t VecGen::intern(const std::vector<uint32_t>& words) {
  auto it = index_.find(words);
  if (it != index_.end()) return it->second;
  const size_t off = words_.size() * 4;
  words_.insert(words_.end(), words.begin(), words.end());
  index_.emplace(words, off);
  return off;
}

Address VecGen::pool_entry(size_t offset) const { return g.ptr[g.rip + pool_ + static_cast<int64_t>(offset)]; }

Address VecGen::cst_bits(uint32_t bits) { return cst_u32({bits}); }

Address VecGen::cst_u32(const std::vector<uint32_t>& words) {
  std::vector<uint32_t> entry(16);
  for (size_t l = 0; l < 16; ++l) entry[l] = words[l % words.size()];
  return pool_entry(intern(entry));
}

Address VecGen::cst_u64(const std::vector<uint64_t>& lanes) {
  std::vector<uint32_t> entry(16);
  for (size_t l = 0; l < 8; ++l) {
    entry[2 * l] = static_cast<uint32_t>(lanes[l % lanes.size()]);
    entry[2 * l + 1] = static_cast<uint32_t>(lanes[l % lanes.size()] >> 32);
  }
  return pool_entry(intern(entry));
}

Address VecGen::lane_mask(uint32_t bits) {
  std::vector<uint32_t> words(16, 0);
  for (int l = 0; l < 16; ++l) words[l] = bits >> l & 1 ? 0xffffffffu : 0;
  return pool_entry(intern(words));
}

Address VecGen::cst(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  return cst_bits(bits);
}

void VecGen::finish() {
  if (finished_) return;
  finished_ = true;
  if (words_.empty()) return;
  g.align(64);
  g.L(pool_);
  for (uint32_t w : words_) g.dd(w);
}

void VecGen::set_tail(int count, const Xmm& avx2_reg) {
  tail_ = count;
  if (count <= 0 || count >= width()) return;
  if (!avx512()) {
    // The table: 8 lanes of all-ones, then 8 of zeros; the mask for `count` lanes starts
    // 8 − count lanes into it.
    std::vector<uint32_t> table(16, 0);
    for (int i = 0; i < 8; ++i) table[i] = 0xffffffffu;
    tail_reg_ = avx2_reg;
    g.vmovups(tail_reg_, pool_entry(intern(table) + 4 * static_cast<size_t>(8 - count)));
  } else {
    g.mov(g.eax, (1u << count) - 1);
    g.kmovw(g.k1, g.eax);
  }
}

// Tails of 1, 4 and (on AVX-512) 8 floats use plain narrow moves: a masked store does not
// forward to a following load (Zen 4, and Intel alike), so a one-float tensor written by a masked
// store and read by the next instruction would stall the chain for the store to retire. The
// narrow loads zero the upper lanes, as the masked ones do.
bool VecGen::narrow_move(int count, const Xmm& reg, Xmm* narrow) const {
  const int idx = reg.getIdx();
  if (count == 1 || count == 4) *narrow = Xmm(idx);
  else if (count == 8 && avx512()) *narrow = Ymm(idx);
  else return false;
  return true;
}

void VecGen::load(const Xmm& dst, const Address& src, int count) {
  Xmm narrow;
  if (count == width()) {
    g.vmovups(dst, src);
  } else if (narrow_move(count, dst, &narrow)) {
    if (count == 1) g.vmovss(narrow, src);
    else g.vmovups(narrow, src);
  } else if (avx512()) {
    g.vmovups(dst | g.k1 | g.T_z, src);
  } else {
    g.vmaskmovps(dst, tail_reg_, src);
  }
}

void VecGen::store(const Address& dst, const Xmm& src, int count) {
  Xmm narrow;
  if (count == width()) {
    g.vmovups(dst, src);
  } else if (narrow_move(count, src, &narrow)) {
    if (count == 1) g.vmovss(dst, narrow);
    else g.vmovups(dst, narrow);
  } else if (avx512()) {
    g.vmovups(dst | g.k1, src);
  } else {
    g.vmaskmovps(dst, tail_reg_, src);
  }
}

void VecGen::broadcast(const Xmm& dst, const Address& src) { g.vbroadcastss(dst, src); }

VMask VecGen::mask(int i, const Xmm& avx2_reg) const { return VMask{Opmask(2 + i), avx2_reg}; }

void VecGen::cmp(const VMask& m, const Xmm& a, const Operand& b, int pred) {
  if (avx512()) g.vcmpps(m.k, a, b, static_cast<uint8_t>(pred));
  else g.vcmpps(m.v, a, b, static_cast<uint8_t>(pred));
}

void VecGen::blend(const Xmm& dst, const VMask& m, const Xmm& if_false, const Operand& if_true) {
  if (avx512()) g.vblendmps(dst | m.k, if_false, if_true);
  else g.vblendvps(dst, if_false, if_true, m.v);
}

void VecGen::keep(const Xmm& dst, const VMask& m, const Xmm& src) {
  if (avx512()) g.vmovaps(dst | m.k | g.T_z, src);
  else g.vandps(dst, m.v, src);
}

void VecGen::move_if(const Xmm& dst, const VMask& m, const Operand& src) {
  if (avx512()) g.vmovups(dst | m.k, src);
  else g.vblendvps(dst, dst, src, m.v);
}

}  // namespace nnasm
