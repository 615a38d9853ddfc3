// The reference GEMM, written on Eigen's packet primitives so that every element of C is summed in
// an order fixed by K and the transposes alone. Eigen's own GEMM could not promise that: its GEMV
// (few rows) and its blocked kernel (packing panels, peeled and tail rows) sum one element of C in
// orders that depend on M and on where the row falls in a panel, so a sample's output changed with
// its batch and its place in it.
//
// The two orders (W is the build's float packet: 4 with SSE or NEON):
// - op(B) = B (B stored [K,N]): c ← c + a₀·b₀, then + a₁·b₁, …, + a_{K-1}·b_{K-1}, one product at a
//   time in k order; W columns of a row of C to a packet (W rows of a column when N < W).
//   Splitting k into blocks only stores the running sum in C and reloads it, which changes nothing.
// - op(B) = Bᵀ (B stored [N,K], a row of B per column of C): a dot product of two contiguous rows,
//   W lanes (k mod W) summed in k order, the lanes combined by Eigen's predux, the K mod W last
//   products added one at a time, the sum added to c.
// Packing, register tiles and cache blocks choose only which elements are computed together,
// never the order within one; tails go through the same packet arithmetic on zero-padded copies,
// so an element does not depend on its row's or column's place either.
#include "ops/linalg/gemm.h"

#include <algorithm>
#include <array>
#include <utility>

#include <Eigen/Core>

namespace nnasm {
namespace {

namespace ei = Eigen::internal;
using Packet = ei::packet_traits<float>::type;
constexpr int64_t W = ei::packet_traits<float>::size;

// The tile loops run a constant number of times; g++ -O2 keeps them rolled unless told, and the
// accumulator arrays then live in memory instead of registers, which is far slower.
#define UNROLL _Pragma("GCC unroll 16")

constexpr int64_t align16(int64_t n) { return (n + 15) / 16 * 16; }
constexpr int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// kc rows × w columns of B (row stride ldb) into rows of `width` floats (a multiple of W, at
// least w), zero-padded; dst is packet-aligned.
void pack_rows(int64_t kc, const float* b, int64_t ldb, int64_t w, int64_t width, float* dst) {
  const int64_t wv = w / W * W;
  for (int64_t p = 0; p < kc; ++p, b += ldb, dst += width) {
    for (int64_t j = 0; j < wv; j += W) ei::pstore(dst + j, ei::ploadu<Packet>(b + j));
    if (wv == width) continue;
    // The last columns one by one (a copy loop here would become a memcpy call per row).
    alignas(64) float last[W];
    UNROLL
    for (int j = 0; j < W; ++j) last[j] = wv + j < w ? b[wv + j] : 0.f;
    ei::pstore(dst + wv, ei::pload<Packet>(last));
    for (int64_t j = wv + W; j < width; j += W) ei::pstore(dst + j, ei::pzero(Packet()));
  }
}

// dst[x·ldd + y] = src[y·lds + x] for x < xs, y < ys: blocks of one packet per row transposed in
// registers, the edges one float at a time. (A template on the packet type only because g++ warns
// about the attributes of a vector type written directly as PacketBlock's argument.)
template <typename P>
void transpose(const float* src, int64_t lds, int64_t xs, int64_t ys, float* dst, int64_t ldd) {
  constexpr int n = ei::unpacket_traits<P>::size;
  const int64_t xv = xs / n * n, yv = ys / n * n;
  // In squares of TB×TB floats, so that the lines read and written stay in L1 whatever the strides.
  constexpr int64_t TB = 16;
  for (int64_t y0 = 0; y0 < yv; y0 += TB)
    for (int64_t x0 = 0; x0 < xv; x0 += TB)
      for (int64_t y = y0; y < std::min(y0 + TB, yv); y += n)
        for (int64_t x = x0; x < std::min(x0 + TB, xv); x += n) {
          ei::PacketBlock<P, n> block;
          UNROLL
          for (int q = 0; q < n; ++q) block.packet[q] = ei::ploadu<P>(src + (y + q) * lds + x);
          ei::ptranspose(block);
          UNROLL
          for (int q = 0; q < n; ++q) ei::pstoreu(dst + (x + q) * ldd + y, block.packet[q]);
        }
  for (int64_t y = yv; y < ys; ++y)
    for (int64_t x = 0; x < xs; ++x) dst[x * ldd + y] = src[y * lds + x];
  for (int64_t x = xv; x < xs; ++x)
    for (int64_t y = 0; y < yv; ++y) dst[x * ldd + y] = src[y * lds + x];
}

// ---- op(B) = B: sequential k order ---------------------------------------------------------------

// Register tiles: SEQ_MR rows × SEQ_NV packets with B packed; with B read in place, tiles of
// r ≤ SEQ_MR rows take kSmallNv[r - 1] packets. Sized for SSE's 16 registers: r·nv accumulators,
// nv of B (one when r = 1), one of A and a product; 4×3 runs as fast with g++ but clang then spills
// accumulators.
constexpr int SEQ_MR = 3, SEQ_NV = 3, SEQ_NV_MAX = 8;
constexpr int kSmallNv[SEQ_MR] = {8, 4, 3};
// Cache blocks: SEQ_KC rows of B × SEQ_NC columns packed (about 240 KiB, the L2 of a small core).
constexpr int64_t SEQ_KC = 256;
constexpr int64_t SEQ_NC = 20 * SEQ_NV * W;
// With more rows than this, B is packed into panels; with fewer it is read in place.
constexpr int64_t SEQ_PACK_M = 16;
// From this many columns, a row tile of A is copied broadcast to packets (taking the shuffles out
// of the inner loop) when B is packed.
constexpr int64_t SEQ_BCAST_N = 4 * SEQ_NV * W;

// C rows [0, MR) × NV packets (row stride ldc) += A rows × a B panel over kc steps; row p of the
// panel is at b + p·ldb. BCAST: `a` holds a(r, p) already broadcast to a packet at a + r·ars +
// p·acs; otherwise a(r, p) is the float there.
template <bool BCAST, int MR, int NV>
void seq_tile(int64_t kc, const float* a, int64_t ars, int64_t acs, const float* b, int64_t ldb, float* c,
              int64_t ldc) {
  Packet acc[MR][NV];
  UNROLL
  for (int r = 0; r < MR; ++r)
    UNROLL
    for (int v = 0; v < NV; ++v) acc[r][v] = ei::ploadu<Packet>(c + r * ldc + v * W);
  // Two k steps an iteration: less loop overhead per multiply.
#pragma GCC unroll 2
  for (int64_t p = 0; p < kc; ++p) {
    Packet bv[NV];
    UNROLL
    for (int v = 0; v < NV; ++v) bv[v] = ei::ploadu<Packet>(b + p * ldb + v * W);
    UNROLL
    for (int r = 0; r < MR; ++r) {
      const Packet ar = BCAST ? ei::pload<Packet>(a + r * ars + p * acs) : ei::pset1<Packet>(a[r * ars + p * acs]);
      UNROLL
      for (int v = 0; v < NV; ++v) acc[r][v] = ei::pmadd(ar, bv[v], acc[r][v]);
    }
  }
  UNROLL
  for (int r = 0; r < MR; ++r)
    UNROLL
    for (int v = 0; v < NV; ++v) ei::pstoreu(c + r * ldc + v * W, acc[r][v]);
}

using SeqTile = void (*)(int64_t, const float*, int64_t, int64_t, const float*, int64_t, float*, int64_t);
template <int N>
using SeqRow = std::array<SeqTile, N>;

template <bool BCAST, int MR, int... NV>
constexpr SeqRow<sizeof...(NV)> seq_row(std::integer_sequence<int, NV...>) {
  return {seq_tile<BCAST, MR, NV + 1>...};
}
template <bool BCAST, int NV, int... MR>
constexpr std::array<SeqRow<NV>, sizeof...(MR)> seq_table(std::integer_sequence<int, MR...>) {
  return {seq_row<BCAST, MR + 1>(std::make_integer_sequence<int, NV>())...};
}
// [rows - 1][packets - 1]: kSeqPacked reads broadcast A, kSeqInPlace plain A.
constexpr auto kSeqPacked = seq_table<true, SEQ_NV>(std::make_integer_sequence<int, SEQ_MR>());
constexpr auto kSeqInPlace = seq_table<false, SEQ_NV_MAX>(std::make_integer_sequence<int, SEQ_MR>());

// How gemm_seq splits a shape; the same for gemm_scratch_floats.
struct SeqPlan {
  bool pack_b;   // B is copied into panels (many row tiles read each)
  bool bcast_a;  // each row tile of A is copied broadcast (many panels read it)
  int64_t nc;    // columns of B per cache block
  int64_t b_floats, a_floats, total;  // scratch: B panels, broadcast A, then one C tile
  explicit SeqPlan(const GemmShape& s) {
    pack_b = s.m > SEQ_PACK_M;
    bcast_a = pack_b && s.n >= SEQ_BCAST_N;
    nc = pack_b ? std::min(SEQ_NC, s.n) : s.n;
    const int64_t kc = std::min(SEQ_KC, s.k), nr = SEQ_NV * W;
    b_floats = pack_b ? align16(kc * round_up(nc, nr)) : 0;
    a_floats = bcast_a ? align16(kc * SEQ_MR * W) : 0;
    total = b_floats + a_floats + align16(SEQ_MR * nr);
  }
  // Packets per panel for a tile of mr rows.
  int64_t nv(int64_t mr) const { return pack_b ? SEQ_NV : kSmallNv[mr - 1]; }
};

// Columns [0, w) of mr rows of C (row stride ldc) through a zero-padded copy `ctmp` of nv packets a
// row, starting `from` columns before c (columns the tile recomputes and discards).
void seq_via_copy(SeqTile tile, int64_t kc, const float* a, int64_t ars, int64_t acs, const float* b, int64_t ldb,
                  float* c, int64_t ldc, int64_t mr, int64_t nv, int64_t from, int64_t w, float* ctmp) {
  const int64_t width = nv * W;
  for (int64_t r = 0; r < mr; ++r) {
    std::fill(ctmp + r * width, ctmp + (r + 1) * width, 0.f);
    std::copy(c + r * ldc - from, c + r * ldc + w, ctmp + r * width);
  }
  tile(kc, a, ars, acs, b, ldb, ctmp, width);
  for (int64_t r = 0; r < mr; ++r) std::copy(ctmp + r * width + from, ctmp + r * width + from + w, c + r * ldc);
}

void gemm_seq(const GemmShape& s, const float* a, const float* b, float* c, float* scratch) {
  const SeqPlan plan(s);
  float* bpack = scratch;
  float* apack = scratch + plan.b_floats;
  float* ctmp = apack + plan.a_floats;
  const int64_t ars = s.trans_a ? 1 : s.k, acs = s.trans_a ? s.m : 1;
  for (int64_t k0 = 0; k0 < s.k; k0 += SEQ_KC) {
    const int64_t kc = std::min(SEQ_KC, s.k - k0);
    const float* bk = b + k0 * s.n;
    for (int64_t j0 = 0; j0 < s.n; j0 += plan.nc) {
      const int64_t nc = std::min(plan.nc, s.n - j0);
      if (plan.pack_b) {
        const int64_t nr = SEQ_NV * W;
        for (int64_t q = 0; q * nr < nc; ++q)
          pack_rows(kc, bk + j0 + q * nr, s.n, std::min(nr, nc - q * nr), nr, bpack + q * kc * nr);
      }
      for (int64_t i0 = 0; i0 < s.m; i0 += SEQ_MR) {
        const int64_t mr = std::min<int64_t>(SEQ_MR, s.m - i0);
        const int64_t nv = plan.nv(mr), nr = nv * W;
        const int64_t full = nc / nr, tail = nc % nr;
        const int64_t nvf = tail / W, rem = tail % W;  // the tail: whole packets, then single columns
        // Panel q (columns j0 + q·nr …) of B: at bq + q·panel, row stride ldb.
        const float* bq = plan.pack_b ? bpack : bk + j0;
        const int64_t ldb = plan.pack_b ? nr : s.n, panel = plan.pack_b ? kc * nr : nr;
        const float* ai = a + i0 * ars + k0 * acs;
        int64_t tr = ars, tk = acs;
        const SeqTile* tiles = plan.bcast_a ? kSeqPacked[mr - 1].data() : kSeqInPlace[mr - 1].data();
        if (plan.bcast_a) {
          for (int64_t p = 0; p < kc; ++p)
            for (int64_t r = 0; r < mr; ++r)
              ei::pstore(apack + (p * mr + r) * W, ei::pset1<Packet>(ai[r * ars + p * acs]));
          ai = apack;
          tr = W;
          tk = mr * W;
        }
        float* ci = c + i0 * s.n + j0;
        for (int64_t q = 0; q < full; ++q) tiles[nv - 1](kc, ai, tr, tk, bq + q * panel, ldb, ci + q * nr, s.n);
        if (tail == 0) continue;
        const float* bt = bq + full * panel;  // the tail's panel
        float* ct = ci + full * nr;
        if (plan.pack_b) {  // the packed panel is zero-padded: the whole tail through a padded copy
          const int64_t nvt = (tail + W - 1) / W;
          seq_via_copy(tiles[nvt - 1], kc, ai, tr, tk, bt, ldb, ct, s.n, mr, nvt, 0, tail, ctmp);
          continue;
        }
        if (nvf > 0) tiles[nvf - 1](kc, ai, tr, tk, bt, ldb, ct, s.n);
        // B's last packet in place (N ≥ W here), overlapping columns done already.
        if (rem > 0)
          seq_via_copy(tiles[0], kc, ai, tr, tk, bk + s.n - W, s.n, ct + nvf * W, s.n, mr, 1, W - rem, rem, ctmp);
      }
    }
  }
}

// ---- op(B) = B, fewer columns than a packet: rows of C in the lanes -------------------------------

// The same order as seq_tile (c ← c + a₀·b₀, + a₁·b₁, … one k at a time) with W rows of one column
// of C in a packet: a packet of columns would leave lanes idle, and the few accumulators of a
// narrow C would each wait on their own previous addition.
constexpr int NARROW_NV = 8;         // packets of rows per tile
constexpr int64_t NARROW_MB = 256;   // rows of Aᵀ per packed block

// C (NV packets of rows of one column, contiguous at c) += a block of Aᵀ (row p at at + p·ldat)
// times a column of B (element p at b[p·ldb]), over kc steps.
template <int NV>
void narrow_tile(int64_t kc, const float* at, int64_t ldat, const float* b, int64_t ldb, float* c) {
  Packet acc[NV];
  UNROLL
  for (int v = 0; v < NV; ++v) acc[v] = ei::pload<Packet>(c + v * W);
  for (int64_t p = 0; p < kc; ++p) {
    const Packet bp = ei::pset1<Packet>(b[p * ldb]);
    UNROLL
    for (int v = 0; v < NV; ++v) acc[v] = ei::pmadd(ei::pload<Packet>(at + p * ldat + v * W), bp, acc[v]);
  }
  UNROLL
  for (int v = 0; v < NV; ++v) ei::pstore(c + v * W, acc[v]);
}

using NarrowTile = void (*)(int64_t, const float*, int64_t, const float*, int64_t, float*);
template <int... NV>
constexpr std::array<NarrowTile, sizeof...(NV)> narrow_table(std::integer_sequence<int, NV...>) {
  return {narrow_tile<NV + 1>...};
}
constexpr auto kNarrow = narrow_table(std::make_integer_sequence<int, NARROW_NV>());  // [packets - 1]

// Scratch: a block of Aᵀ, then one column of a C tile.
int64_t narrow_at_floats(const GemmShape& s) {
  return align16(std::min(SEQ_KC, s.k) * round_up(std::min(NARROW_MB, s.m), W));
}

void gemm_narrow(const GemmShape& s, const float* a, const float* b, float* c, float* scratch) {
  float* at = scratch;
  float* ctmp = scratch + narrow_at_floats(s);
  for (int64_t k0 = 0; k0 < s.k; k0 += SEQ_KC) {
    const int64_t kc = std::min(SEQ_KC, s.k - k0);
    for (int64_t i0 = 0; i0 < s.m; i0 += NARROW_MB) {
      const int64_t rows = std::min(NARROW_MB, s.m - i0), ld = round_up(rows, W);
      if (s.trans_a) {  // A stored [K,M]: the block's rows of Aᵀ are in place, padded here
        pack_rows(kc, a + k0 * s.m + i0, s.m, rows, ld, at);
      } else {
        // Zero each row's last packet (its padding), then write the rows over it.
        for (int64_t p = 0; p < kc; ++p) ei::pstore(at + (p + 1) * ld - W, ei::pzero(Packet()));
        transpose<Packet>(a + i0 * s.k + k0, s.k, kc, rows, at, ld);
      }
      for (int64_t j = 0; j < s.n; ++j)
        for (int64_t t0 = 0; t0 < rows; t0 += NARROW_NV * W) {
          const int64_t n = std::min(NARROW_NV * W, rows - t0), nv = (n + W - 1) / W;
          float* cj = c + (i0 + t0) * s.n + j;
          for (int64_t r = 0; r < nv * W; ++r) ctmp[r] = r < n ? cj[r * s.n] : 0.f;
          kNarrow[nv - 1](kc, at + t0, ld, b + k0 * s.n + j, s.n, ctmp);
          for (int64_t r = 0; r < n; ++r) cj[r * s.n] = ctmp[r];
        }
    }
  }
}

// ---- op(B) = Bᵀ: lane-split dot products -----------------------------------------------------------

// Register tiles: DOT_MR rows × DOT_NR columns; fewer rows than DOT_MR in all take kDotNr[rows - 1]
// columns (more accumulators in flight when few rows share each load of B).
constexpr int DOT_MR = 3, DOT_NR = 3, DOT_NR_MAX = 8;
constexpr int kDotNr[DOT_MR - 1] = {8, 4};
// Rows of A (times K) kept together while every row of B passes over them (about 128 KiB).
constexpr int64_t DOT_A_FLOATS = 32 * 1024;

// c(r, j) += a row r · b row j, over k. Rows of a and b are contiguous, lda / ldb apart.
template <int MR, int NR>
void dot_tile(int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc) {
  Packet acc[MR][NR];
  UNROLL
  for (int r = 0; r < MR; ++r)
    UNROLL
    for (int j = 0; j < NR; ++j) acc[r][j] = ei::pzero(Packet());
  const int64_t kv = k / W * W;
  for (int64_t p = 0; p < kv; p += W) {
    Packet av[MR], bv[NR];
    UNROLL
    for (int r = 0; r < MR; ++r) av[r] = ei::ploadu<Packet>(a + r * lda + p);
    UNROLL
    for (int j = 0; j < NR; ++j) bv[j] = ei::ploadu<Packet>(b + j * ldb + p);
    UNROLL
    for (int r = 0; r < MR; ++r)
      UNROLL
      for (int j = 0; j < NR; ++j) acc[r][j] = ei::pmadd(av[r], bv[j], acc[r][j]);
  }
  UNROLL
  for (int r = 0; r < MR; ++r)
    UNROLL
    for (int j = 0; j < NR; ++j) {
      float t = ei::predux(acc[r][j]);
      for (int64_t p = kv; p < k; ++p) t += a[r * lda + p] * b[j * ldb + p];
      c[r * ldc + j] += t;
    }
}

using DotTile = void (*)(int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t);

template <int MR, int... NR>
constexpr std::array<DotTile, sizeof...(NR)> dot_row(std::integer_sequence<int, NR...>) {
  return {dot_tile<MR, NR + 1>...};
}
template <int... MR>
constexpr std::array<std::array<DotTile, DOT_NR_MAX>, sizeof...(MR)> dot_table(std::integer_sequence<int, MR...>) {
  return {dot_row<MR + 1>(std::make_integer_sequence<int, DOT_NR_MAX>())...};
}
// kDot[rows - 1][columns - 1]
constexpr auto kDot = dot_table(std::make_integer_sequence<int, DOT_MR>());

// Rows of A per block: as many as fit DOT_A_FLOATS, whole tiles, at least one tile.
int64_t dot_block_rows(const GemmShape& s) {
  const int64_t rows = std::max<int64_t>(DOT_MR, DOT_A_FLOATS / std::max<int64_t>(s.k, 1) / DOT_MR * DOT_MR);
  return std::min(rows, s.m);
}

void gemm_dot(const GemmShape& s, const float* a, const float* b, float* c, float* scratch) {
  const int64_t mb = dot_block_rows(s);
  const int64_t tile_nr = s.m < DOT_MR ? kDotNr[s.m - 1] : DOT_NR;
  for (int64_t i0 = 0; i0 < s.m; i0 += mb) {
    const int64_t rows = std::min(mb, s.m - i0);
    const float* ab = scratch;
    if (!s.trans_a) {
      ab = a + i0 * s.k;
    } else {  // A stored [K,M]: this block's rows out contiguous
      transpose<Packet>(a + i0, s.m, rows, s.k, scratch, s.k);
    }
    for (int64_t j0 = 0; j0 < s.n; j0 += tile_nr) {
      const int64_t nr = std::min(tile_nr, s.n - j0);
      for (int64_t r0 = 0; r0 < rows; r0 += DOT_MR) {
        const int64_t mr = std::min<int64_t>(DOT_MR, rows - r0);
        kDot[mr - 1][nr - 1](s.k, ab + r0 * s.k, s.k, b + j0 * s.k, s.k, c + (i0 + r0) * s.n + j0, s.n);
      }
    }
  }
}

// A single row of A reads the same whether A is stored transposed or not.
GemmShape normalized(GemmShape s) {
  if (s.m == 1) s.trans_a = false;
  return s;
}

}  // namespace

size_t gemm_scratch_floats(const GemmShape& shape) {
  const GemmShape s = normalized(shape);
  if (s.m <= 0 || s.n <= 0 || s.k <= 0) return 0;
  if (!s.trans_b && s.n < W) return static_cast<size_t>(narrow_at_floats(s) + NARROW_NV * W);
  if (!s.trans_b) return static_cast<size_t>(SeqPlan(s).total);
  return s.trans_a ? static_cast<size_t>(dot_block_rows(s) * s.k) : 0;
}

void gemm_accumulate(const GemmShape& shape, const float* a, const float* b, float* c, float* scratch) {
  const GemmShape s = normalized(shape);
  if (s.m <= 0 || s.n <= 0 || s.k <= 0) return;
  if (s.trans_b) gemm_dot(s, a, b, c, scratch);
  else if (s.n < W) gemm_narrow(s, a, b, c, scratch);
  else gemm_seq(s, a, b, c, scratch);
}

}  // namespace nnasm
