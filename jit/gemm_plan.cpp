// The GEMM planner and the public entry points of jit/gemm.h: what kernel shape, tile and
// blocking an instruction gets, the cache descriptor, and the name. The code itself is written by
// jit/gemm_kernel.cpp.
#include "jit/gemm.h"

#include <algorithm>

#include <fmt/format.h>

#include "jit/gemm_plan.h"

namespace nnasm {
namespace gemm {
namespace {

// K block: a B panel (KC×NR floats) and an A panel (MR×KC) are streamed per micro-kernel
// call; KC·NC floats of B stay in L2 (1 MiB per core on the machines we tune for) while
// every row panel of A passes over them.
constexpr int64_t KC_MAX = 256;
constexpr int64_t NC_MAX = 512;
constexpr int64_t PAGE_BYTES = 4096;
// A GEMV's K segments, from 2·KSEG_BYTES of B: about KSEG_BYTES of B each but at least
// KSEG_JOIN of them, at least KSEG_MIN_ROWS rows each, at most KSEG_MAX (a part per thread at
// most; more segments only add slots to combine). KSEG_JOIN: a GEMV that reads the output of a
// column split joins that split's job, one run of segments per part, only where its segments
// divide evenly among the parts (Executor::join); 8 lets the batch-1 MLP's 128 KiB second layer
// join at 2, 4 and 8 threads, where its former 2 segments allowed 2 only, and the layer ran on
// one thread after the first layer's job. 16 would allow 16 threads too, but at 2 threads the
// part that finishes last then adds 8 slots that the other core wrote: the 2-thread batch-1 MLP
// ran slower than with 2 segments, and with 4 or 8 level (scratch A/B, alternating blocks in one
// process; the 1-thread run level too).
constexpr int64_t KSEG_BYTES = int64_t(64) << 10;
constexpr int64_t KSEG_JOIN = 8;
constexpr int64_t KSEG_MIN_ROWS = 16;
constexpr int64_t KSEG_MAX = 16;
// Rows of B ahead that a tiled kernel reading B in place prefetches (Plan::b_prefetch): about
// 110 cycles of a 14×32 tile's k steps. 8 measured faster than 16 and 32 on 64×1536·1536×512.
constexpr int64_t B_PREFETCH_ROWS = 8;
// The least K block that two_k_blocks makes (a block's C pass costs about what 8–16 k steps do).
constexpr int64_t KBLOCK_MIN = 64;
// A tiled product's K split keeps a slot of M×N floats per K block: at most this many bytes.
constexpr int64_t TILED_SLOTS_MAX = int64_t(512) << 10;
// Byte offsets are 32-bit displacements in the generated code.
constexpr int64_t MAX_OPERAND_BYTES = (int64_t(1) << 31) - (int64_t(1) << 16);

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Row-major stride (in matrices) of batch axis `ax` of `s`, or 0 where the axis is missing or
// broadcast (as BroadcastWalk).
int64_t batch_stride(const Shape& s, int ax, int64_t out_dim) {
  if (ax < 0 || (s.dims[ax] == 1 && out_dim != 1)) return 0;
  return s.stride(ax);
}

}  // namespace

bool make_plan(const GemmJitDesc& d, Isa isa, Plan* out) {
  Plan p;
  const bool avx512 = isa == Isa::AVX512;
  p.isa = isa;
  p.vlen = avx512 ? 16 : 8;
  p.nregs = avx512 ? 32 : 16;
  p.m = d.m;
  p.n = d.n;
  p.ldb = p.ldc = d.n;
  const int64_t n0 = d.n_end ? d.n_begin : 0, n1 = d.n_end ? d.n_end : d.n;
  if (n0 < 0 || n1 > d.n || n0 >= n1) return false;
  p.k = d.k;
  p.ta = d.trans_a;
  p.tb = d.trans_b;
  p.bias = d.bias;
  p.accumulate = d.accumulate;
  if (d.accumulate && (d.bias || d.act != Activation::NONE)) return false;
  p.act = d.act;
  p.act_alpha = d.act_alpha;
  if (p.m <= 0 || p.n <= 0 || p.k <= 0) return false;

  const int64_t a_mat = p.m * p.k * 4, b_mat = p.k * p.n * 4, c_mat = p.m * p.n * 4;
  const int64_t batch = d.batch.numel();
  if (a_mat > MAX_OPERAND_BYTES / d.a_batch.numel() || b_mat > MAX_OPERAND_BYTES / d.b_batch.numel() ||
      c_mat > MAX_OPERAND_BYTES / batch)
    return false;

  // Batch loops, outermost first, without unit dimensions, with dimensions that step through
  // memory alike merged.
  const Shape &y = d.batch, &a = d.a_batch, &b = d.b_batch;
  for (int i = 0; i < y.rank; ++i) {
    if (y[i] == 1) continue;
    BatchLoop l{y[i], batch_stride(a, i - (y.rank - a.rank), y[i]) * a_mat,
                batch_stride(b, i - (y.rank - b.rank), y[i]) * b_mat, y.stride(i) * c_mat};
    if (!p.loops.empty()) {
      BatchLoop& o = p.loops.back();
      if (o.a_step == l.a_step * l.count && o.b_step == l.b_step * l.count && o.c_step == l.c_step * l.count) {
        o = BatchLoop{o.count * l.count, l.a_step, l.b_step, l.c_step};
        continue;
      }
    }
    p.loops.push_back(l);
  }
  // One B for a contiguous stack of row-major A: one taller product.
  if (p.loops.size() == 1 && p.loops[0].b_step == 0 && p.loops[0].a_step == a_mat && !p.ta) {
    p.m *= p.loops[0].count;
    p.loops.clear();
  }
  p.a_rs = p.ta ? 4 : p.k * 4;
  // The N blocking of the whole product (so a slice's block is never larger), then the
  // slice.
  const int64_t nr_tiled = avx512 ? 32 : 16;
  const int64_t nc_whole = ceil_div(ceil_div(p.n, ceil_div(p.n, NC_MAX)), nr_tiled) * nr_tiled;
  p.n = n1 - n0;
  p.c_skip = n0 * 4;
  p.bias_skip = n0 * 4;
  p.b_skip = p.tb ? n0 * p.k * 4 : n0 * 4;
  p.a_ks = p.ta ? p.m * 4 : 4;
  // A part's rows (TILED only, below): the mode and blocking are the whole product's.
  const int64_t m0 = d.m_end ? d.m_begin : 0, m1 = d.m_end ? d.m_end : p.m;
  if (m0 < 0 || m1 > p.m || m0 >= m1 || (d.m_end && !p.loops.empty())) return false;

  // A K split's slot: one partial sum of C (GEMV segments, tiled K blocks).
  const int64_t slot_bytes = ceil_div(p.m * p.n * 4, 64) * 64;
  const int gemv_max = avx512 ? 14 : 5;
  if (!p.tb && p.m <= gemv_max) {
    // Registers: accumulators, B vectors (when several rows share them), two broadcasts, and
    // on AVX2 the tail mask.
    auto regs = [&](int64_t mr, int nv) { return mr * nv + (mr > 1 ? nv : 0) + 2 + (avx512 ? 0 : 1); };
    int nv_max = 1;
    while (nv_max < 24 && regs(p.m, nv_max + 1) <= p.nregs) ++nv_max;
    const int64_t vecs = ceil_div(p.n, p.vlen), chunks = ceil_div(vecs, nv_max);
    p.mode = Mode::GEMV;
    p.nvec = static_cast<int>(ceil_div(vecs, chunks));
    p.mr_max = static_cast<int>(p.m);
    p.kc = p.k;
    p.nc = p.n;
    // More rows than L1 ways: pack them.
    p.pack_a = !p.ta && p.m > 8;
    p.impl = fmt::format("gemv_m{}", p.m);
    // Two FMAs a cycle of 4 cycles' latency want 8 chains; loads (B and A's broadcast) allow
    // fewer for a single row, so 4 sets for up to 2 accumulators, 2 for up to 4.
    const int64_t tile = p.m * ceil_div(d.n, p.vlen);
    p.kacc = tile <= 2 ? 4 : tile <= 4 ? 2 : 1;
    if (p.kacc > 1) p.impl += fmt::format("_a{}", p.kacc);
    // The segments are the whole product's, so that a slice of its columns sums each column in
    // the same order (the same bits) as the whole.
    const int64_t b_bytes = p.k * d.n * 4;
    if (p.loops.empty() && !p.pack_a && b_bytes >= 2 * KSEG_BYTES && p.k >= 2 * KSEG_MIN_ROWS) {
      p.kc = ceil_div(p.k, std::min({std::max(b_bytes / KSEG_BYTES, KSEG_JOIN), KSEG_MAX, p.k / KSEG_MIN_ROWS}));
      p.kseg = static_cast<int>(ceil_div(p.k, p.kc));
      if (!d.n_end) {
        p.slot_bytes = slot_bytes;
        p.scratch = static_cast<size_t>(p.kseg * p.slot_bytes);
      }
      p.impl += fmt::format("_k{}", p.kseg);
    }
    if (d.k_parts > 1) {
      if (p.kseg < d.k_parts || d.k_part < 0 || d.k_part >= d.k_parts) return false;
      p.k_part = d.k_part;
      p.k_parts = d.k_parts;
    }
  } else if (p.tb && p.m <= 2 * Plan::DOT_ROWS && !p.accumulate && p.act == Activation::NONE && d.k_parts <= 1) {
    p.mode = Mode::DOT;
    p.scratch = p.ta ? static_cast<size_t>(p.m * p.k * 4) : 0;
    p.impl = fmt::format("dot_m{}", p.m);
  } else {
    p.mode = Mode::TILED;
    p.nvec = 2;
    p.mr_max = avx512 ? 14 : 6;
    int64_t k_blocks = ceil_div(p.k, KC_MAX);
    if (d.two_k_blocks && !p.tb && k_blocks < 2 && p.k >= 2 * KBLOCK_MIN) k_blocks = 2;
    p.kc = ceil_div(p.k, k_blocks);
    p.nc = nc_whole;
    // Packing pays where the operand's consecutive reads would each fall in another page (the
    // hardware prefetcher stops at page boundaries, and 4 KiB strides share one L1 set);
    // otherwise the micro-kernel reads A and B in place, which measured faster (the copies cost
    // more than they save). Bᵀ is always packed; so is B with an AVX2 column tail, whose masked
    // loads would need a register the 6×16 tile does not leave.
    p.pack_b = p.tb || p.ldb * 4 >= PAGE_BYTES || (!avx512 && p.n % p.vlen != 0);
    p.pack_a = (p.ta ? p.a_ks : p.a_rs) >= PAGE_BYTES;
    if (p.pack_b) p.scratch = static_cast<size_t>(p.kc * std::min(p.nc, ceil_div(p.n, p.nr()) * p.nr()) * 4);
    p.impl = fmt::format("{}x{}", p.mr_max, p.nr());
    const int64_t l2 = cpu_info().l2_bytes > 0 ? cpu_info().l2_bytes : int64_t(1) << 20;
    if (!p.pack_b && 2 * p.k * d.n * 4 > l2) {
      p.b_prefetch = B_PREFETCH_ROWS * p.ldb * 4;  // under 32 KiB: unpacked rows are under a page
      p.impl += "_pf";
    }
    // A K split (asked for, not chosen here: Executor::choose_kernel does in training, so that
    // a weight's rows stay with the core whose gradient and optimizer parts update them) takes
    // the K blocks as its segments, as a GEMV's. Only where nothing is packed (the scratch holds
    // the slots), one N block covers the columns and the slots stay small. The whole product
    // plans the slots too, so that its scratch hook asks for them.
    const int64_t blocks = ceil_div(p.k, p.kc);
    const bool k_split_ok = blocks > 1 && !p.pack_a && !p.pack_b && p.n <= p.nc && p.loops.empty() && !d.n_end &&
                            !d.m_end && !p.accumulate && blocks * slot_bytes <= TILED_SLOTS_MAX;
    if (d.k_parts > 1 && (!k_split_ok || blocks < d.k_parts || d.k_part < 0 || d.k_part >= d.k_parts)) return false;
    if (k_split_ok) {
      p.kseg = static_cast<int>(blocks);
      p.slot_bytes = slot_bytes;
      p.scratch = static_cast<size_t>(blocks * slot_bytes);
      p.k_part = d.k_part;
      p.k_parts = d.k_parts;
    }
  }
  if (d.m_end) {
    if (p.mode != Mode::TILED) return false;
    p.m = m1 - m0;
    p.a_skip = m0 * p.a_rs;
    p.c_skip += m0 * p.ldc * 4;
  }
  if (p.pack_a) {
    p.ap_ks = ceil_div(p.mr_max, 8) * 32;
    p.ap_offset = (p.scratch + 63) / 64 * 64;
    p.scratch = p.ap_offset + static_cast<size_t>(p.kc * p.ap_ks);
  }
  *out = std::move(p);
  return true;
}

}  // namespace gemm

size_t jit_gemm_scratch_bytes(const GemmJitDesc& d) {
  size_t bytes = 0;
  gemm::Plan p;
  GemmJitDesc blocked = d;
  blocked.two_k_blocks = true;  // a scratch hook does not know whether the kernel blocks so
  for (const GemmJitDesc* e : {&d, static_cast<const GemmJitDesc*>(&blocked)})
    for (Isa isa : {Isa::AVX2, Isa::AVX512})
      if (gemm::make_plan(*e, isa, &p)) bytes = std::max(bytes, p.scratch);
  return bytes;
}

namespace {
constexpr int64_t GEMV_PART_FLOPS = int64_t(1) << 18;
constexpr int64_t TILED_PART_FLOPS = int64_t(1) << 20;
// A K split pays from 256 KiB of B, whose streaming on one core takes several times a parallel
// step's hand-off (BM_threads_pool_empty_job, docs/benchmarks.md); the MLP's 128 KiB second layer
// ran slower split than whole.
constexpr int64_t KSPLIT_PART_BYTES = int64_t(256) << 10;

// Columns per unit of the split: the tiled micro-kernel's width, or one vector for a GEMV.
int64_t part_unit(const gemm::Plan& p) { return p.mode == gemm::Mode::TILED ? p.nr() : p.vlen; }
// A GEMV in K segments splits its columns where it has two vectors or more: each core then
// writes the final values of its own columns of C, which the next layer's parts can start on
// (Executor::join), where a K split's partial sums must first cross to the part that combines
// them. It splits along K instead
// - one vector wide;
// - too small for a column split (under GEMV_PART_FLOPS) but with B of KSPLIT_PART_BYTES or
//   more: a 1×784·784×128 product then runs faster on 2 threads than on one;
// - with B over 3/4 of a core's L2 and at most two L2s: each core's rows of B then stay in
//   its L2, where a column slice (half of every row) leaves the prefetchers pulling the other
//   half too, so that each L2 holds all of B. 1×1536·1536×512 (3 MiB of B, 2 MiB L2s) and
//   1×784·784×512 measured faster split along K than in columns (docs/benchmarks.md). Past two
//   L2s B streams from L3 either way, and columns measured as fast or faster.
bool split_k(const gemm::Plan& p, const GemmJitDesc& d) {
  if (p.mode != gemm::Mode::GEMV || p.kseg <= 1) return false;
  const int64_t b_bytes = d.k * d.n * 4, l2 = cpu_info().l2_bytes;
  const bool past_one_l2 = l2 > 0 && 4 * b_bytes > 3 * l2 && b_bytes <= 2 * l2;
  return p.n <= p.vlen || 2 * p.m * d.n * p.k < GEMV_PART_FLOPS || past_one_l2;
}
// A tiled product with as many rows as columns (and no batch loops) splits its rows.
constexpr int64_t ROWS_PER_PART = 16;
bool split_rows(const gemm::Plan& p) {
  return p.mode == gemm::Mode::TILED && p.loops.empty() && p.m >= p.n && p.m >= 2 * ROWS_PER_PART;
}
// A column split of a tiled product with at least SLICE_FLOPS a slice runs as up to
// SLICES_PER_THREAD slices a thread, which the pool balances (ThreadPool::run): a core that is
// slower or starts late leaves its last slices to the others. 2 MFLOP a slice is many times what
// a slice that changes threads costs. On 2 threads the batch-64 784→256 layer alone (8 slices of
// 32 columns) measured faster than in halves in three of four runs and level in the fourth, and
// the MLP's forward pass at batch 64 level or faster (scratch A/B, alternating blocks in one
// process; docs/benchmarks.md). The 256→128 layer has
// work for two slices only and is unchanged. Not where a part keeps its slice of a trained weight
// in its core's cache between steps (two_k_blocks), nor row splits (the grid's parts already read
// the least).
constexpr int SLICES_PER_THREAD = 4;
constexpr int64_t SLICE_FLOPS = int64_t(2) << 20;
// From this many parts, a row split that packs B splits into a grid instead.
constexpr int GRID_MIN_PARTS = 4;
// Parts of a row split as a grid: `rows` blocks of rows, each cut into `cols` column slices.
struct Grid {
  int rows = 0, cols = 0;
};
// The grid of `n_parts` parts for a row split; {0, 0} where none fits. Each part of a row split
// packs all of B for its rows, so n parts pack B n times: 16 parts of a 1024² product ran at
// well under half the speed a core of 2 parts reached (docs/benchmarks.md, More cores). A grid
// packs each column slice once per block of rows and reads each row of A once per slice: of the
// grids that fit (16 rows a block, a micro-kernel width a slice), the one that reads the fewest
// bytes of A and B, rows × |B| + cols × |A| (1024² on 16 threads: 4 × 4, faster than 16 × 1
// there; on 8, 4 × 2, level). Below GRID_MIN_PARTS, or with B read in place (not packed), it is
// the row split: the weight gradient then keeps the rows the optimizer step's parts update.
// `units`: the product's column slices of one micro-kernel width each.
Grid part_grid(const gemm::Plan& p, int n_parts, int64_t units) {
  const int64_t row_blocks = p.m / ROWS_PER_PART;
  if (!p.pack_b || n_parts < GRID_MIN_PARTS) return n_parts <= row_blocks ? Grid{n_parts, 1} : Grid{};
  Grid best;
  int64_t least = 0;
  for (int cols = 1; cols <= n_parts; ++cols) {
    const int rows = n_parts / cols;
    if (rows * cols != n_parts || rows > row_blocks || cols > units) continue;
    const int64_t bytes = rows * p.k * p.n + cols * p.m * p.k;
    if (!best.rows || bytes < least) best = Grid{rows, cols}, least = bytes;
  }
  return best;
}
}  // namespace

int jit_gemm_parts(const GemmJitDesc& d, Isa isa, int threads) {
  gemm::Plan p;
  if (threads <= 1 || isa == Isa::REF || !gemm::make_plan(d, isa, &p) || p.mode == gemm::Mode::DOT) return 1;
  if (split_k(p, d)) return p.k * p.n * 4 < KSPLIT_PART_BYTES ? 1 : std::min(threads, p.kseg);
  const int64_t flops = 2 * d.m * d.n * d.k * d.batch.numel();
  if (flops < (p.mode == gemm::Mode::GEMV ? GEMV_PART_FLOPS : TILED_PART_FLOPS)) return 1;
  const int64_t units = (d.n + part_unit(p) - 1) / part_unit(p);
  if (split_rows(p)) {
    // The most parts, up to one a thread, that some grid fits (a prime count may not).
    int n = static_cast<int>(std::min<int64_t>(threads, p.m / ROWS_PER_PART * (p.pack_b ? units : 1)));
    while (n > 1 && !part_grid(p, n, units).rows) --n;
    return n;
  }
  const int64_t parts = std::min<int64_t>(threads, units);
  if (p.mode != gemm::Mode::TILED || d.two_k_blocks || parts < threads) return static_cast<int>(parts);
  return static_cast<int>(std::max(parts, std::min({units, int64_t(threads) * SLICES_PER_THREAD, flops / SLICE_FLOPS})));
}

GemmJitDesc jit_gemm_part(const GemmJitDesc& d, Isa isa, int part, int n_parts, bool along_k) {
  GemmJitDesc s = d;
  gemm::Plan p;
  if (n_parts <= 1 || !gemm::make_plan(d, isa, &p)) return s;
  if (split_k(p, d) || along_k) {
    s.k_part = part;
    s.k_parts = n_parts;
    return s;
  }
  const int64_t unit = part_unit(p), units = (d.n + unit - 1) / unit;
  // Slice `i` of `n` of the columns, in whole units.
  auto columns = [&](int i, int n) {
    s.n_begin = std::min(d.n, units * i / n * unit);
    s.n_end = std::min(d.n, units * (i + 1) / n * unit);
  };
  if (split_rows(p)) {
    Grid g = part_grid(p, n_parts, units);
    if (!g.rows) g = Grid{n_parts, 1};  // a count jit_gemm_parts does not choose: rows alone
    const int row = part / g.cols;
    s.m_begin = p.m * row / g.rows;
    s.m_end = p.m * (row + 1) / g.rows;
    if (g.cols > 1) columns(part % g.cols, g.cols);
    return s;
  }
  columns(part, n_parts);
  return s;
}

bool jit_gemm_span(const GemmJitDesc& d, Isa isa, bool output, int k, int64_t* begin, int64_t* end) {
  if (k != 0 || d.m != 1 || d.trans_a || d.batch.numel() != 1 || d.a_batch.numel() != 1) return false;
  if (output) {
    if (d.k_parts > 1) return false;  // the last part to finish completes all of C
    *begin = d.n_end ? d.n_begin : 0;
    *end = d.n_end ? d.n_end : d.n;
    return true;
  }
  *begin = 0;
  *end = d.k;
  if (d.k_parts <= 1) return true;
  gemm::Plan p;
  if (!gemm::make_plan(d, isa, &p)) return false;
  *begin = std::min(d.k, p.seg_begin(p.k_part) * p.kc);
  *end = std::min(d.k, p.seg_begin(p.k_part + 1) * p.kc);
  return true;
}

Result<std::shared_ptr<const JitKernel>> jit_gemm(const GemmJitDesc& d, Isa isa, KernelCache& cache) {
  gemm::Plan p;
  if (isa == Isa::REF || !gemm::make_plan(d, isa, &p)) return std::shared_ptr<const JitKernel>();
  std::string key = fmt::format("gemm:{}:{}:m{}:n{}:k{}:ta{}:tb{}:bias{}:batch{}{}{}", d.op, isa_name(isa), d.m, d.n,
                                d.k, int(d.trans_a), int(d.trans_b), int(d.bias), d.batch.str(), d.a_batch.str(),
                                d.b_batch.str());
  if (d.n_end) key += fmt::format(":cols{}-{}", d.n_begin, d.n_end);
  if (d.k_parts > 1) key += fmt::format(":kpart{}of{}", d.k_part, d.k_parts);
  if (d.m_end) key += fmt::format(":rows{}-{}", d.m_begin, d.m_end);
  key += fmt::format(":kc{}:pf{}", p.kc, p.b_prefetch);  // two_k_blocks and the L2 size may change them
  std::string op = d.op;
  if (d.accumulate) {
    op += "_acc";
    key += ":acc";
  }
  if (d.act != Activation::NONE) {
    op += fmt::format("_{}", activation_name(d.act));
    key += fmt::format(":act{}:{}", static_cast<int>(d.act), d.act_alpha);
  }
  const std::string name = fmt::format("f32_{}__{}_{}", op, isa_name(isa), p.impl);
  return cache.get(key, [&] {
    // The largest kernel seen over a sweep of shapes (two row-panel heights, two K blocks, an N
    // tail, Bᵀ packing) is 34 KB.
    return build_kernel(name, size_t(1) << 17, [&](Xbyak::CodeGenerator& g) {
      gemm::emit_gemm(g, p);
      return Status::ok();
    });
  });
}

}  // namespace nnasm
