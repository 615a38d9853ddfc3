// The elementwise generator: register allocation, the loop nest, remainders and tails, and the
// two-pass build (measure, then generate into a buffer of exactly that size).
#include "jit/elementwise.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "isa/tensor.h"
#include "jit/frame.h"

namespace nnasm {

using namespace Xbyak;

namespace {

constexpr int64_t MAX_INNER = int64_t(1) << 28;  // byte displacements stay within int32
constexpr int UNROLL = 4;                          // independent vectors per loop iteration
constexpr size_t MEASURE_BYTES = 256 * 1024;

bool per_copy(Feed f) { return f == Feed::STREAM || f == Feed::ROW; }

const char* feed_letter(Feed f) {
  switch (f) {
    case Feed::STREAM: return "s";
    case Feed::ROW: return "r";
    case Feed::COL: return "c";
    case Feed::SCALAR: return "1";
    case Feed::NONE: return "-";
  }
  return "?";
}

Status emit_elementwise(CodeGenerator& g, const EwSpec& s) {
  // Register map (assigned below, in this order):
  //   rdi            KernelArgs*
  //   rax            scratch (scalar pointers, the tail opmask's bits)
  //   rsi, rdx, rcx, r8–r11, then rbx, rbp, r12–r15 (saved by the Frame)
  //                  pointers of the STREAM/ROW/COL inputs, then of the outputs; then, where
  //                  there are a main loop and rows, idx (a negative byte offset counting up to
  //                  0 in the main loop) and the row counter
  //   vector regs from 0 up: per unrolled copy [per-copy inputs, outputs not aliasing input 0,
  //                  tmps]; from the top down: the AVX2 tail mask, then one register per
  //                  COL/SCALAR input, then one per host scalar
  //   k1             tail mask (AVX-512); k2–k7 snippet scratch
  //   stack          only with a host function, around its call: its output floats and rdi
  VecGen v(g, s.isa);
  const int W = v.width();
  const int n_in = static_cast<int>(s.in.size());
  if (s.inner <= 0 || s.rows <= 0) return Status::error("empty iteration space");
  if (s.inner > MAX_INNER) return Status::errorf("rows of {} elements are beyond the generator's 2^28", s.inner);
  if (s.n_host < 0 || s.n_host > 16 || (s.n_host > 0 && !s.host)) return Status::error("bad host scalar count");

  int top = v.num_vregs();
  const int tail = static_cast<int>(s.inner % W);
  Xmm mask_reg;
  if (tail && !v.avx512()) mask_reg = v.vreg(--top);
  std::vector<Xmm> shared(n_in);
  for (int k = 0; k < n_in; ++k)
    if (s.in[k] == Feed::COL || s.in[k] == Feed::SCALAR) shared[k] = v.vreg(--top);
  std::vector<Xmm> host(s.n_host);
  for (int k = 0; k < s.n_host; ++k) host[k] = v.vreg(--top);
  if (top <= 0) return Status::error("no vector registers left for the loop");
  int n_loaded = 0;
  for (Feed f : s.in) n_loaded += per_copy(f);
  const bool alias = n_in > 0 && per_copy(s.in[0]) && s.n_out > 0;
  const int per = n_loaded + s.n_out - (alias ? 1 : 0) + s.n_tmp;
  const int unroll = per > 0 ? std::min(UNROLL, top / per) : UNROLL;
  if (unroll < 1) return Status::errorf("the snippet needs {} vector registers, {} are free", per, top);
  const int64_t step = int64_t(unroll) * W;
  const int64_t n_iter = s.inner / step;

  static const int gpr_ids[] = {Operand::RSI, Operand::RDX, Operand::RCX, Operand::R8,  Operand::R9,
                                Operand::R10, Operand::R11, Operand::RBX, Operand::RBP, Operand::R12,
                                Operand::R13, Operand::R14, Operand::R15};
  constexpr int n_gprs = sizeof(gpr_ids) / sizeof(gpr_ids[0]);
  constexpr int n_volatile = 7;
  int next_gpr = 0;
  std::vector<Reg64> in_ptr(n_in), out_ptr(s.n_out);
  for (int k = 0; k < n_in; ++k)
    if (s.in[k] != Feed::SCALAR && s.in[k] != Feed::NONE) in_ptr[k] = Reg64(gpr_ids[next_gpr++ % n_gprs]);
  for (int k = 0; k < s.n_out; ++k) out_ptr[k] = Reg64(gpr_ids[next_gpr++ % n_gprs]);
  const Reg64 idx = n_iter >= 2 ? Reg64(gpr_ids[next_gpr++ % n_gprs]) : Reg64();
  const Reg64 rows_left = s.rows > 1 ? Reg64(gpr_ids[next_gpr++ % n_gprs]) : Reg64();
  if (next_gpr > n_gprs) return Status::errorf("{} operands need more general registers than there are", n_in + s.n_out);
  const int saved = std::max(0, next_gpr - n_volatile);

  struct Copy {
    std::vector<Xmm> src, dst, tmp;
  };
  std::vector<Copy> copies(unroll);
  for (int c = 0; c < unroll; ++c) {
    int r = c * per;
    Copy& cp = copies[c];
    cp.src.resize(n_in);
    for (int k = 0; k < n_in; ++k) cp.src[k] = per_copy(s.in[k]) ? v.vreg(r++) : shared[k];
    cp.src.insert(cp.src.end(), host.begin(), host.end());
    for (int k = 0; k < s.n_out; ++k) cp.dst.push_back(k == 0 && alias ? cp.src[0] : v.vreg(r++));
    for (int k = 0; k < s.n_tmp; ++k) cp.tmp.push_back(v.vreg(r++));
  }

  auto at = [&](const Reg64& base, bool use_idx, int64_t elem) {
    const int32_t disp = static_cast<int32_t>(elem * 4);
    return use_idx ? g.ptr[base + idx + disp] : g.ptr[base + disp];
  };
  // One vector of `count` elements at element offset `elem` of the row, with copy c's registers.
  auto emit_copy = [&](int c, bool use_idx, int64_t elem, int count) {
    const Copy& cp = copies[c];
    for (int k = 0; k < n_in; ++k)
      if (per_copy(s.in[k])) v.load(cp.src[k], at(in_ptr[k], use_idx, elem), count);
    s.body(v, cp.dst, cp.src, cp.tmp);
    for (int k = 0; k < s.n_out; ++k) v.store(at(out_ptr[k], use_idx, elem), cp.dst[k], count);
  };

  {
    Frame f(g, saved);
    if (s.host) {
      // rsp is 8 (mod 16) at entry, less 8 per saved register; realign for the call.
      const int frame = 64 + 8 + (saved % 2 ? 8 : 0);
      g.sub(g.rsp, frame);
      g.mov(g.ptr[g.rsp + 64], Frame::args());
      g.mov(g.rsi, g.rsp);
      g.mov(g.rax, reinterpret_cast<uint64_t>(s.host));
      g.call(g.rax);
      g.mov(Frame::args(), g.ptr[g.rsp + 64]);
      for (int k = 0; k < s.n_host; ++k) v.broadcast(host[k], g.ptr[g.rsp + 4 * k]);
      g.add(g.rsp, frame);
    }
    for (int k = 0; k < n_in; ++k) {
      if (s.in[k] == Feed::NONE) continue;
      if (s.in[k] == Feed::SCALAR) {
        f.load_in(g.rax, k);
        v.broadcast(shared[k], g.ptr[g.rax]);
      } else {
        f.load_in(in_ptr[k], k);
        if (k < static_cast<int>(s.in_skip.size()) && s.in_skip[k]) {
          g.mov(g.rax, s.in_skip[k] * 4);
          g.add(in_ptr[k], g.rax);
        }
      }
    }
    for (int k = 0; k < s.n_out; ++k) {
      f.load_out(out_ptr[k], k);
      if (s.out_skip) {
        g.mov(g.rax, s.out_skip * 4);
        g.add(out_ptr[k], g.rax);
      }
    }
    v.set_tail(tail, mask_reg);

    Label row_loop, main_loop;
    if (s.rows > 1) {
      g.mov(rows_left, s.rows);
      g.align(16);
      g.L(row_loop);
    }
    for (int k = 0; k < n_in; ++k)
      if (s.in[k] == Feed::COL) v.broadcast(shared[k], g.ptr[in_ptr[k]]);

    if (n_iter >= 2) {
      g.mov(idx, -n_iter * step * 4);
      g.align(16);
      g.L(main_loop);
      for (int c = 0; c < unroll; ++c) emit_copy(c, true, n_iter * step + c * W, W);
      g.add(idx, static_cast<int32_t>(step * 4));
      g.jnz(main_loop);
    } else if (n_iter == 1) {
      for (int c = 0; c < unroll; ++c) emit_copy(c, false, c * W, W);
    }
    // The remainder, fully unrolled: whole vectors, then the masked tail.
    const int64_t done = n_iter * step;
    const int full = static_cast<int>((s.inner - done) / W);
    for (int j = 0; j < full; ++j) emit_copy(j, false, done + int64_t(j) * W, W);
    if (tail) emit_copy(full, false, done + int64_t(full) * W, tail);

    if (s.rows > 1) {
      for (int k = 0; k < n_in; ++k) {
        if (s.in[k] == Feed::STREAM) g.add(in_ptr[k], static_cast<int32_t>(s.inner * 4));
        if (s.in[k] == Feed::COL) g.add(in_ptr[k], 4);
      }
      for (int k = 0; k < s.n_out; ++k) g.add(out_ptr[k], static_cast<int32_t>(s.inner * 4));
      g.dec(rows_left);
      g.jnz(row_loop, CodeGenerator::T_NEAR);
    }
  }
  v.finish();
  return Status::ok();
}

}  // namespace

Result<KernelRef> elementwise_kernel(const EwSpec& s, KernelCache& cache) {
  std::string feeds;
  for (Feed f : s.in) feeds += feed_letter(f);
  const std::string name = fmt::format("f32_{}__{}", s.op, isa_name(s.isa));
  std::string key = fmt::format("{}|{}x{}|{}>{}|{}", name, s.rows, s.inner, feeds, s.n_out, s.imms);
  if (s.out_skip || !s.in_skip.empty()) key += fmt::format("|skip{}:{}", fmt::join(s.in_skip, ","), s.out_skip);
  return build_kernel_measured(cache, key, name, MEASURE_BYTES,
                               [&](CodeGenerator& g) { return emit_elementwise(g, s); });
}

namespace {
constexpr int64_t PART_MIN_ELEMS = 64 * 1024;  // below this a hand-off costs more than it saves
constexpr int64_t PART_ELEMS = 32 * 1024;      // at least this many per part
constexpr int64_t PART_ALIGN = 16;             // a part's run of a row: whole cache lines
}  // namespace

int elementwise_max_parts(const EwSpec& s, int threads, int arrays) {
  const int64_t n = s.rows * s.inner * arrays / 2;
  if (threads <= 1 || n < PART_MIN_ELEMS) return 1;
  int64_t parts = std::min<int64_t>(threads, n / PART_ELEMS);
  parts = std::min(parts, s.rows > 1 ? s.rows : s.inner / PART_ALIGN);
  return static_cast<int>(std::max<int64_t>(parts, 1));
}

void elementwise_part(EwSpec* s, int part, int n_parts) {
  if (n_parts <= 1) return;
  s->in_skip.assign(s->in.size(), 0);
  if (s->rows > 1) {
    const int64_t r0 = s->rows * part / n_parts, r1 = s->rows * (part + 1) / n_parts;
    for (size_t k = 0; k < s->in.size(); ++k) {
      if (s->in[k] == Feed::STREAM) s->in_skip[k] = r0 * s->inner;
      if (s->in[k] == Feed::COL) s->in_skip[k] = r0;
    }
    s->out_skip = r0 * s->inner;
    s->rows = r1 - r0;
  } else {
    const int64_t units = (s->inner + PART_ALIGN - 1) / PART_ALIGN;
    const int64_t j0 = std::min(s->inner, units * part / n_parts * PART_ALIGN);
    const int64_t j1 = std::min(s->inner, units * (part + 1) / n_parts * PART_ALIGN);
    for (size_t k = 0; k < s->in.size(); ++k)
      if (s->in[k] == Feed::STREAM || s->in[k] == Feed::ROW) s->in_skip[k] = j0;
    s->out_skip = j0;
    s->inner = j1 - j0;
  }
}

namespace {

// How `small`, broadcast numpy-style to `out` (n elements, n > 0), is read in a [rows, inner]
// iteration space: one element (SCALAR, any split), a suffix of out's dimensions after leading
// 1s (ROW), or out's leading dimensions followed by 1s (COL). False for anything else.
bool feed_of(const Shape& small, const Shape& out, Feed* f, int64_t* rows, int64_t* inner) {
  const int64_t n = out.numel();
  if (small.numel() == 1) {
    *f = Feed::SCALAR;
    *rows = 1;
    *inner = n;
    return true;
  }
  const int r = out.rank;
  if (small.rank > r) return false;
  int64_t d[MAX_RANK];
  for (int i = 0; i < r; ++i) d[i] = 1;
  for (int i = 0; i < small.rank; ++i) d[r - small.rank + i] = small.dims[i];
  int k = 0;
  while (k < r && d[k] == 1) ++k;
  bool row = true;
  for (int j = k; j < r; ++j) row = row && d[j] == out.dims[j];
  if (row) {
    *f = Feed::ROW;
    *inner = 1;
    for (int j = k; j < r; ++j) *inner *= out.dims[j];
    *rows = n / *inner;
    return true;
  }
  int e = r;
  while (e > 0 && d[e - 1] == 1) --e;
  bool col = true;
  for (int j = 0; j < e; ++j) col = col && d[j] == out.dims[j];
  if (col) {
    *f = Feed::COL;
    *rows = 1;
    for (int j = 0; j < e; ++j) *rows *= out.dims[j];
    *inner = n / *rows;
    return true;
  }
  return false;
}

}  // namespace

bool binary_layout(const Shape& a, const Shape& b, const Shape& out, EwSpec* s, std::string* pattern) {
  const int64_t n = out.numel();
  if (n <= 0) return false;
  const int64_t na = a.numel(), nb = b.numel();
  if (na == n && nb == n) {
    s->rows = 1;
    s->inner = n;
    s->in = {Feed::STREAM, Feed::STREAM};
    *pattern = "";
    return true;
  }
  auto name = [](Feed f) { return f == Feed::SCALAR ? "scalar" : f == Feed::ROW ? "row" : "col"; };
  Feed f;
  if (na == n && feed_of(b, out, &f, &s->rows, &s->inner)) {
    s->in = {Feed::STREAM, f};
    *pattern = std::string("_b") + name(f);
    return true;
  }
  if (nb == n && feed_of(a, out, &f, &s->rows, &s->inner)) {
    s->in = {f, Feed::STREAM};
    *pattern = std::string("_a") + name(f);
    return true;
  }
  return false;
}

bool broadcast_layout(const std::vector<Shape>& in, const Shape& out, EwSpec* s) {
  const int64_t n = out.numel();
  if (n <= 0) return false;
  s->rows = 1;
  s->inner = n;
  s->in.assign(in.size(), Feed::STREAM);
  bool split = false;  // whether a ROW or COL operand has fixed rows and inner
  for (size_t k = 0; k < in.size(); ++k) {
    if (in[k].numel() == n) continue;
    int64_t rows, inner;
    if (!feed_of(in[k], out, &s->in[k], &rows, &inner)) return false;
    if (s->in[k] == Feed::SCALAR) continue;
    if (split && (rows != s->rows || inner != s->inner)) return false;
    split = true;
    s->rows = rows;
    s->inner = inner;
  }
  return true;
}

namespace {
MultiSnippet multi(const Snippet& body) {
  return [body](VecGen& v, const std::vector<Xmm>& dst, const std::vector<Xmm>& src, const std::vector<Xmm>& tmp) {
    body(v, dst[0], src, tmp);
  };
}
}  // namespace

Result<KernelRef> unary_jit(const JitRequest& r, KernelCache& cache, const OpSnippet& snippet) {
  const int64_t n = r.out[0].shape.numel();
  if (n <= 0 || n > MAX_INNER) return KernelRef();
  EwSpec s;
  s.op = snippet.op;
  s.imms = snippet.imms;
  s.isa = r.isa;
  s.inner = n;
  s.in = {Feed::STREAM};
  s.n_tmp = snippet.n_tmp;
  s.body = multi(snippet.body);
  elementwise_part(&s, r.part, r.n_parts);
  return elementwise_kernel(s, cache);
}

int unary_parts(const JitRequest& r, int threads) {
  EwSpec s;
  s.inner = r.out[0].shape.numel();
  s.in = {Feed::STREAM};
  return elementwise_max_parts(s, threads);
}

int binary_parts(const JitRequest& r, int threads) {
  EwSpec s;
  std::string pattern;
  if (!binary_layout(r.in[0].shape, r.in[1].shape, r.out[0].shape, &s, &pattern)) return 1;
  return elementwise_max_parts(s, threads);
}

Result<KernelRef> binary_jit(const JitRequest& r, KernelCache& cache, const OpSnippet& snippet) {
  EwSpec s;
  std::string pattern;
  if (!binary_layout(r.in[0].shape, r.in[1].shape, r.out[0].shape, &s, &pattern) || s.inner > MAX_INNER)
    return KernelRef();
  s.op = snippet.op + pattern;
  s.imms = snippet.imms;
  s.isa = r.isa;
  s.n_tmp = snippet.n_tmp;
  s.body = multi(snippet.body);
  elementwise_part(&s, r.part, r.n_parts);
  return elementwise_kernel(s, cache);
}

}  // namespace nnasm
