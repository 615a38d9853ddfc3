// A thin layer over xbyak that lets one piece of generator code emit for AVX2 (8 floats in ymm)
// and AVX-512 (16 floats in zmm): the vector width and register names, a constant pool placed
// after the kernel's code, exact tails (an opmask on AVX-512, a mask from a table and vmaskmovps
// on AVX2), and compare/blend helpers whose mask lives in an opmask or a vector register.
// Snippets (jit/vmath.h, the elementwise ops) are written against this class.
#pragma once
#include <cstdint>
#include <map>
#include <vector>

#include <xbyak/xbyak.h>

#include "jit/cpu.h"

namespace nnasm {

// The result of a vector compare: an opmask register on AVX-512, a vector of all-ones/all-zeros
// lanes on AVX2. Made by VecGen::mask.
struct VMask {
  Xbyak::Opmask k;
  Xbyak::Xmm v;
};

class VecGen {
 public:
  // Requires isa to be AVX2 or AVX512.
  VecGen(Xbyak::CodeGenerator& g, Isa isa);
  VecGen(const VecGen&) = delete;
  VecGen& operator=(const VecGen&) = delete;

  Xbyak::CodeGenerator& g;  // for the instructions this class does not wrap

  Isa isa() const { return isa_; }
  bool avx512() const { return isa_ == Isa::AVX512; }
  int width() const { return avx512() ? 16 : 8; }  // floats per vector
  int vbytes() const { return 4 * width(); }
  int num_vregs() const { return avx512() ? 32 : 16; }
  // Vector register i (0 ≤ i < num_vregs()): zmm i or ymm i.
  Xbyak::Xmm vreg(int i) const;

  // ---- constant pool ----
  // A memory operand holding `v` in every lane (64 bytes, 64-aligned, so the same constant
  // serves ymm and zmm). Equal bit patterns share one entry. The pool is written by finish().
  Xbyak::Address cst(float v);
  Xbyak::Address cst_bits(uint32_t bits);
  // Integer entries: sixteen 32-bit lanes, lane l holding words[l % words.size()], or eight
  // 64-bit lanes, lane l holding lanes[l % lanes.size()] (permute indices, 64-bit multipliers
  // and counters). Require a size that divides 16 (8).
  Xbyak::Address cst_u32(const std::vector<uint32_t>& words);
  Xbyak::Address cst_u64(const std::vector<uint64_t>& lanes);
  // A vector whose lane l is all-ones where bit l of `bits` is set, else zero: an AVX2 mask for
  // vmaskmovps (AVX-512 code uses opmasks instead).
  Xbyak::Address lane_mask(uint32_t bits);
  // Emits the pool. Call once, after the code (after the Frame has emitted its `ret`).
  void finish();

  // ---- tails ----
  // Prepares the mask for loads/stores of `count` (< width()) elements: k1 on AVX-512;
  // on AVX2 `avx2_reg` is loaded from a mask table in the pool and must stay reserved while
  // masked loads/stores are emitted.
  void set_tail(int count, const Xbyak::Xmm& avx2_reg);
  int tail() const { return tail_; }
  // count == width(): a plain vmovups. count == tail(): masked (lanes past count read as 0 and
  // are never written; no fault past the end).
  void load(const Xbyak::Xmm& dst, const Xbyak::Address& src, int count);
  void store(const Xbyak::Address& dst, const Xbyak::Xmm& src, int count);
  void broadcast(const Xbyak::Xmm& dst, const Xbyak::Address& src);  // one float to every lane

  // ---- masks for snippets ----
  // Opmask k2+i (i < 6) on AVX-512, `avx2_reg` on AVX2. Snippets may clobber k2..k7.
  VMask mask(int i, const Xbyak::Xmm& avx2_reg) const;
  // m = a <pred> b per lane; pred is a vcmpps predicate (CMP_*).
  void cmp(const VMask& m, const Xbyak::Xmm& a, const Xbyak::Operand& b, int pred);
  // dst = m ? if_true : if_false.
  void blend(const Xbyak::Xmm& dst, const VMask& m, const Xbyak::Xmm& if_false, const Xbyak::Operand& if_true);
  // dst = m ? src : +0.
  void keep(const Xbyak::Xmm& dst, const VMask& m, const Xbyak::Xmm& src);
  // dst = m ? src : dst (on AVX2 one blend, on AVX-512 a masked move).
  void move_if(const Xbyak::Xmm& dst, const VMask& m, const Xbyak::Operand& src);

  // vcmpps predicates (the ordered/quiet forms, so NaN compares false unless noted).
  // _UQ: also true when either side is NaN.
  static constexpr int CMP_EQ = 0x00, CMP_LT = 0x11, CMP_LE = 0x12, CMP_UNORD = 0x03, CMP_NEQ_UQ = 0x04,
                       CMP_NLT_UQ = 0x15, CMP_NLE_UQ = 0x16, CMP_NGE_UQ = 0x19, CMP_GE = 0x1d, CMP_GT = 0x1e;

 private:
  // For tails a plain narrow move serves: sets *narrow to the register's xmm/ymm view.
  bool narrow_move(int count, const Xbyak::Xmm& reg, Xbyak::Xmm* narrow) const;
  Xbyak::Address pool_entry(size_t offset) const;
  size_t intern(const std::vector<uint32_t>& words);  // 16 words; returns the byte offset

  Isa isa_;
  Xbyak::Label pool_;
  std::vector<uint32_t> words_;                     // the pool, 16 words per entry
  std::map<std::vector<uint32_t>, size_t> index_;  // entry → byte offset
  int tail_ = 0;
  Xbyak::Xmm tail_reg_;
  bool finished_ = false;
};

}  // namespace nnasm
