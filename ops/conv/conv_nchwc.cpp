// The CONV2D_NCHWC kernel of conv_nchwc.h: the tiling of the output pixels, the choice of the
// register block, and the generator.
//
// Register map (AVX-512: 32 zmm; AVX2: 16 ymm), A = OB·R accumulators: acc[o][k] = vreg(o·R + k)
// for output block o and the tile's pixel k; then wv[o] = vreg(A + o), the weight vector of block
// o for the current tap and input lane; then (AVX2) vreg(A + OB), the pixel's input lane
// broadcast. After the loops the registers past the accumulators are the activation's
// temporaries. k1: the last lanes of the bias (AVX-512).
// General registers: rW, rB, rY the group's weights, bias and output (at image n0); rXi/rYi the
// image's input and output; rXb/rYb a band's, rXt/rYt a tile's (runs of equal bands or tiles
// step them); rXc/rWc walk the input blocks and lanes; rCi, rCb, rRun the lane, block and
// tile-run counters. The group, image and band-run counters and the chunk's images and pointers
// live on the stack; rdi keeps the KernelArgs. The residual r has y's shape, so its element sits
// at y's address plus one constant (r − y, on the stack): the store epilogue, where the lane and
// block walkers are free, puts rYt plus it in rXc and reads r at the store's offsets.
// Loop nest: chunks of images (runtime) → groups of OB output blocks (runtime; a smaller last
// group, and the group holding the bias's tail, peeled) → the chunk's images (runtime) → runs of
// equal bands (runtime) → runs of equal tiles (runtime) → input blocks (runtime) → input lanes
// (runtime, `unroll` a turn) → taps (unrolled; a pixel's taps in the padding left out) → OB
// weight loads, then per pixel the FMAs.
#include "ops/conv/conv_nchwc.h"

#include <algorithm>
#include <vector>

#include <fmt/format.h>
#include <xbyak/xbyak.h>

#include "jit/act_snippet.h"
#include "jit/frame.h"
#include "jit/vecgen.h"

namespace nnasm {
namespace {

using namespace Xbyak;
using namespace Xbyak::util;

constexpr int64_t MAX_DISP = int64_t(1) << 30;  // byte offsets the code bakes in stay below this
constexpr int64_t MAX_TILE_CODE_BYTES = 256 << 10;  // the unrolled tiles' code, beyond which a plan is refused
constexpr int MAX_BLOCK_ROWS = 4;               // output blocks a register block holds at most
constexpr int LOOP_BODY = 64;                   // instructions a lane-loop turn is unrolled to, about
// A chunk's images and a group's weights stay in L2 together (half of Zen 4's, a quarter of
// Sapphire Rapids'), so that the groups after the first read the images from L2.
constexpr int64_t L2_BYTES = 512 << 10;

// Output pixels [p, p + r) in flat order (oy·wo + ox).
struct Tile {
  int64_t p;
  int r;
};
// Tiles stepped through in order; a run of equal bands loops over one band's code.
using Band = std::vector<Tile>;

// Items [first, first + count) of a sequence run through one template's code, each step adding
// dx and dy bytes to the input and output pointers.
struct Run {
  size_t first, count;
  int64_t dx, dy;
};

struct Plan {
  int ob = 1;             // output blocks in registers (a smaller last group holds fewer)
  int r = 1;              // pixels a tile holds at most
  bool embedded = false;  // AVX-512: the input lane as the FMA's broadcast operand
  int unroll = 1;         // input lanes a turn of the lane loop
  int64_t images = 1;     // images a chunk: every group of output blocks runs over a chunk's images
  std::vector<Band> bands;
};

bool zmm(const NchwcConv& d) { return d.lanes == 16; }
int num_vregs(const NchwcConv& d) { return zmm(d) ? 32 : 16; }
int64_t taps(const NchwcConv& d) { return d.kh * d.kw; }
int64_t vbytes(const NchwcConv& d) { return d.lanes * 4; }
int64_t x_image_bytes(const NchwcConv& d) { return d.cb * d.h * d.w * vbytes(d); }
int64_t y_block_bytes(const NchwcConv& d) { return d.ho * d.wo * vbytes(d); }
int64_t w_block_bytes(const NchwcConv& d) { return d.cb * taps(d) * d.lanes * vbytes(d); }

// The byte offset from the image's start of the input pixel that tap t of output pixel p reads
// (lane 0 of block 0), or -1 when the tap falls in the padding.
int64_t tap_offset(const NchwcConv& d, int64_t p, int64_t t) {
  const int64_t iy = p / d.wo * d.sh - d.ph + t / d.kw * d.dh, ix = p % d.wo * d.sw - d.pw + t % d.kw * d.dw;
  if (iy < 0 || iy >= d.h || ix < 0 || ix >= d.w) return -1;
  return (iy * d.w + ix) * vbytes(d);
}
// Where output pixel p's window starts (possibly in the padding, then outside the image).
int64_t window_offset(const NchwcConv& d, int64_t p) {
  return ((p / d.wo * d.sh - d.ph) * d.w + p % d.wo * d.sw - d.pw) * vbytes(d);
}

// Whether tile b's code is tile a's with the pointers moved by (*dx, *dy): the same pixel count,
// the same taps in the padding, and every offset moved alike.
bool tile_shift(const NchwcConv& d, const Tile& a, const Tile& b, int64_t* dx, int64_t* dy) {
  if (a.r != b.r) return false;
  *dx = window_offset(d, b.p) - window_offset(d, a.p);
  *dy = (b.p - a.p) * vbytes(d);
  for (int k = 0; k < a.r; ++k)
    for (int64_t t = 0; t < taps(d); ++t) {
      const int64_t oa = tap_offset(d, a.p + k, t), ob = tap_offset(d, b.p + k, t);
      if ((oa < 0) != (ob < 0) || (oa >= 0 && ob - oa != *dx)) return false;
    }
  return true;
}

bool band_shift(const NchwcConv& d, const Band& a, const Band& b, int64_t* dx, int64_t* dy) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    int64_t x, y;
    if (!tile_shift(d, a[i], b[i], &x, &y) || (i > 0 && (x != *dx || y != *dy))) return false;
    *dx = x, *dy = y;
  }
  return true;
}

// The sequence cut into runs: each item's code is the run's first item's, shifted by its index
// times the run's step.
template <class T, class Shift>
std::vector<Run> runs(const std::vector<T>& items, Shift shift) {
  std::vector<Run> out;
  for (size_t i = 0; i < items.size();) {
    Run run{i, 1, 0, 0};
    if (i + 1 < items.size() && shift(items[i], items[i + 1], &run.dx, &run.dy)) {
      run.count = 2;
      int64_t x, y;
      while (i + run.count < items.size() && shift(items[i], items[i + run.count], &x, &y) &&
             x == static_cast<int64_t>(run.count) * run.dx && y == static_cast<int64_t>(run.count) * run.dy)
        ++run.count;
    }
    out.push_back(run);
    i += run.count;
  }
  return out;
}

std::vector<Run> band_runs(const NchwcConv& d, const std::vector<Band>& bands) {
  return runs(bands, [&d](const Band& a, const Band& b, int64_t* x, int64_t* y) { return band_shift(d, a, b, x, y); });
}
std::vector<Run> tile_runs(const NchwcConv& d, const Band& band) {
  return runs(band, [&d](const Tile& a, const Tile& b, int64_t* x, int64_t* y) { return tile_shift(d, a, b, x, y); });
}

// Each output row's pixels within [p0, p1) cut into the fewest segments of at most r, of sizes
// that differ by at most one; a band per row.
std::vector<Band> row_tiles(const NchwcConv& d, int r) {
  std::vector<Band> bands;
  for (int64_t row = d.p0 / d.wo; row * d.wo < d.p1; ++row) {
    const int64_t a = std::max(d.p0, row * d.wo), b = std::min(d.p1, (row + 1) * d.wo), len = b - a;
    const int64_t s = (len + r - 1) / r;
    Band band;
    for (int64_t i = 0, p = a; i < s; ++i) {
      const int64_t n = len / s + (i < len % s ? 1 : 0);
      band.push_back(Tile{p, static_cast<int>(n)});
      p += n;
    }
    bands.push_back(std::move(band));
  }
  return bands;
}

// [p0, p1) in tiles of `len` consecutive pixels (the last shorter), rows or not; a band each.
std::vector<Band> flat_tiles(const NchwcConv& d, int len) {
  std::vector<Band> bands;
  for (int64_t p = d.p0; p < d.p1; p += len) bands.push_back(Band{Tile{p, static_cast<int>(std::min<int64_t>(len, d.p1 - p))}});
  return bands;
}

// Pixels of tile t whose tap tp lies in the image.
std::vector<int> valid_pixels(const NchwcConv& d, const Tile& t, int64_t tp) {
  std::vector<int> v;
  for (int k = 0; k < t.r; ++k)
    if (tap_offset(d, t.p + k, tp) >= 0) v.push_back(k);
  return v;
}

// The most accumulators a block of ob output blocks may hold: the rest of the registers keep ob
// weight vectors (and on AVX2 the broadcast lane) in the loop, and the activation's temporaries
// after it. AVX-512 keeps at most 28 (oneDNN's and MLAS's blocks stay near that too).
int max_accumulators(const NchwcConv& d, int ob) {
  const int spare = std::max(ob + (zmm(d) ? 0 : 1), act_snippet(d.act, d.act_alpha).n_tmp);
  return std::min(zmm(d) ? 28 : 12, num_vregs(d) - spare);
}

// A model of the plan's time in cycles, per image: for each group of output blocks and tile, per
// input lane, each tap costs the most of its FMAs at two a cycle, its loads at two a cycle, the
// FMA latency of 4 cycles (each accumulator takes one FMA a tap), and the weight bytes from L2 at
// 32 a cycle, or from L3 at 16 once a group's weights outgrow L2; and each tile pays its setup
// and stores (and residual loads). The FMAs are the same in every plan; what differs is how many
// pixels share a weight load, how many accumulators hide the latency, and how often the weights
// stream by.
double plan_cycles(const NchwcConv& d, const Plan& pl) {
  const auto group_cycles = [&](int ob) {
    const bool l3 = ob * w_block_bytes(d) > L2_BYTES;
    double total = 0;
    for (const Band& band : pl.bands)
      for (const Tile& t : band) {
        double lane = 0;
        for (int64_t tp = 0; tp < taps(d); ++tp) {
          const double v = static_cast<double>(valid_pixels(d, t, tp).size());
          if (v == 0) continue;
          const double fma = ob * v, loads = ob + (pl.embedded ? fma : v), wbytes = ob * vbytes(d);
          lane += std::max({fma / 2, loads / 2, 4.0, wbytes / (l3 ? 16 : 32)});
        }
        total += lane * static_cast<double>(d.cb * d.lanes) + 30 + (d.residual ? 3.0 : 2.0) * ob * t.r;
      }
    return total;
  };
  const int64_t blocks = d.ob1 - d.ob0, rest = blocks % pl.ob;
  return static_cast<double>(blocks / pl.ob) * group_cycles(pl.ob) + (rest ? group_cycles(static_cast<int>(rest)) : 0);
}

// Bytes of the tiles' code (FMAs with a broadcast operand take about 10).
int64_t plan_code_bytes(const NchwcConv& d, const Plan& pl) {
  int64_t bytes = 0;
  for (const Run& br : band_runs(d, pl.bands))
    for (const Run& tr : tile_runs(d, pl.bands[br.first])) {
      const Tile& t = pl.bands[br.first][tr.first];
      for (int64_t tp = 0; tp < taps(d); ++tp) {
        const int64_t v = static_cast<int64_t>(valid_pixels(d, t, tp).size());
        if (v) bytes += pl.unroll * (pl.ob + pl.ob * v + (pl.embedded ? 0 : v)) * 10;
      }
    }
  return bytes;
}

int unroll_for(const NchwcConv& d, const Plan& pl) {
  const int64_t body = taps(d) * (pl.ob + pl.ob * pl.r);
  int u = 1;
  while (u < d.lanes && 2 * u * body <= LOOP_BODY) u *= 2;
  return u;
}

// The cheapest plan by plan_cycles among register blocks of 1 … 4 output blocks × the most pixels
// that leaves registers for, each over row segments, whole rows a tile, and flat chunks of the
// most pixels or of equal sizes.
Plan choose_plan(const NchwcConv& d) {
  Plan best;
  double best_cost = -1;
  const int64_t pixels = d.p1 - d.p0;
  for (int ob = 1; ob <= std::min<int64_t>(MAX_BLOCK_ROWS, d.ob1 - d.ob0); ++ob) {
    const int r = static_cast<int>(std::min<int64_t>(max_accumulators(d, ob) / ob, pixels));
    if (r < 1) continue;
    std::vector<std::vector<Band>> tilings{row_tiles(d, r), flat_tiles(d, r)};
    if (d.wo < r) tilings.push_back(flat_tiles(d, static_cast<int>(r / d.wo * d.wo)));
    const int64_t chunks = (pixels + r - 1) / r;
    tilings.push_back(flat_tiles(d, static_cast<int>((pixels + chunks - 1) / chunks)));
    for (std::vector<Band>& bands : tilings) {
      Plan pl;
      pl.ob = ob, pl.r = r, pl.embedded = zmm(d), pl.bands = std::move(bands);
      pl.unroll = unroll_for(d, pl);
      if (plan_code_bytes(d, pl) > MAX_TILE_CODE_BYTES) continue;
      const double cost = plan_cycles(d, pl);
      if (best_cost < 0 || cost < best_cost) best_cost = cost, best = std::move(pl);
    }
  }
  const int64_t room = L2_BYTES - best.ob * w_block_bytes(d);
  best.images = std::clamp<int64_t>(room / x_image_bytes(d), 1, d.n1 - d.n0);
  return best;
}

class Gen {
 public:
  Gen(CodeGenerator& g, const NchwcConv& d, const Plan& pl)
      : g_(g),
        d_(d),
        pl_(pl),
        v_(g, zmm(d) ? Isa::AVX512 : Isa::AVX2),
        act_(act_snippet(d.act, d.act_alpha)),
        prefetch_next_((d.ob1 - d.ob0) * w_block_bytes(d) > L2_BYTES) {}

  Status emit() {
    {
      Frame f(g_, 6);
      g_.sub(rsp, FRAME_BYTES);
      f.load_in(rXi, 0);
      add_bytes(rXi, d_.n0 * x_image_bytes(d_));
      g_.mov(g_.qword[rsp + X_CHUNK], rXi);
      f.load_out(rYi, 0);
      if (d_.residual) {
        f.load_in(rax, d_.bias_channels ? 3 : 2);
        g_.sub(rax, rYi);
        g_.mov(g_.qword[rsp + R_MINUS_Y], rax);
      }
      add_bytes(rYi, (d_.n0 * d_.y_blocks + d_.ob0) * y_block_bytes(d_));
      g_.mov(g_.qword[rsp + Y_CHUNK], rYi);
      g_.mov(g_.qword[rsp + LEFT], static_cast<uint32_t>(d_.n1 - d_.n0));
      Label chunk;
      g_.L(chunk);
      // This chunk's images: min(pl_.images, the images left).
      g_.mov(rax, g_.qword[rsp + LEFT]);
      g_.mov(rCb, pl_.images);
      g_.cmp(rax, rCb);
      g_.cmovg(rax, rCb);
      g_.mov(g_.qword[rsp + CHUNK_IMAGES], rax);
      g_.sub(g_.qword[rsp + LEFT], rax);
      f.load_in(rW, 1);
      add_bytes(rW, d_.ob0 * w_block_bytes(d_));
      if (d_.bias_channels) {
        f.load_in(rB, 2);
        add_bytes(rB, d_.ob0 * vbytes(d_));
      }
      g_.mov(rY, g_.qword[rsp + Y_CHUNK]);
      groups();
      g_.mov(rax, pl_.images * x_image_bytes(d_));
      g_.add(g_.qword[rsp + X_CHUNK], rax);
      g_.mov(rax, pl_.images * d_.y_blocks * y_block_bytes(d_));
      g_.add(g_.qword[rsp + Y_CHUNK], rax);
      g_.cmp(g_.qword[rsp + LEFT], 0);
      g_.jnz(chunk, CodeGenerator::T_NEAR);
      g_.add(rsp, FRAME_BYTES);
    }
    v_.finish();
    return Status::ok();
  }

 private:
  const Reg64 &rW = rdx, &rB = r8, &rY = rcx, &rXi = rsi, &rYi = r9, &rXb = r10, &rYb = r11, &rXt = r12,
              &rYt = r13, &rXc = r14, &rWc = r15, &rCi = rax, &rCb = rbx, &rRun = rbp;
  // Stack slots: the loop counters kept in memory, the images left and in this chunk, the
  // chunk's input and output, and the residual's distance from the output in bytes.
  static constexpr int GROUP_SLOT = 0, IMAGE_SLOT = 8, BAND_SLOT = 16, LEFT = 24, CHUNK_IMAGES = 32, X_CHUNK = 40,
                       Y_CHUNK = 48, R_MINUS_Y = 56, FRAME_BYTES = 64;

  // A loop counter: a register, or (slot ≥ 0) a stack slot.
  struct Counter {
    Reg64 reg;
    int slot = -1;
  };
  Counter slot(int offset) const { return Counter{rax, offset}; }

  // Emits body() then step() `count` times: a runtime loop on `counter` when count > 1.
  template <class Body, class Step>
  void repeat(int64_t count, const Counter& counter, Body body, Step step) {
    if (count == 1) {
      body();
      step();
      return;
    }
    Label top;
    if (counter.slot >= 0) g_.mov(g_.qword[rsp + counter.slot], static_cast<uint32_t>(count));
    else g_.mov(counter.reg, count);
    g_.L(top);
    body();
    step();
    if (counter.slot >= 0) g_.dec(g_.qword[rsp + counter.slot]);
    else g_.dec(counter.reg);
    g_.jnz(top, CodeGenerator::T_NEAR);
  }

  // reg += bytes (which may be negative), through rax when the constant does not fit an immediate
  // (rax is free wherever this is called).
  void add_bytes(const Reg64& reg, int64_t bytes) {
    if (bytes == 0) return;
    if (bytes > -MAX_DISP && bytes < MAX_DISP) {
      g_.add(reg, static_cast<int>(bytes));
      return;
    }
    g_.mov(rax, bytes);
    g_.add(reg, rax);
  }

  // The groups of output blocks; the one that ends on the bias's partial last block is peeled, so
  // that only its code loads that block masked.
  void groups() {
    const int64_t blocks = d_.ob1 - d_.ob0, full = blocks / pl_.ob, rest = blocks % pl_.ob;
    const int64_t last = d_.bias_channels - (d_.ob1 - 1) * d_.lanes;
    const int tail = d_.bias_channels && last < d_.lanes ? static_cast<int>(last) : 0;
    const int64_t looped = full - (tail && rest == 0 ? 1 : 0);
    if (looped > 0) repeat(looped, slot(GROUP_SLOT), [&] { group(pl_.ob, 0); }, [] {});
    if (looped < full) group(pl_.ob, tail);
    if (rest) group(static_cast<int>(rest), tail);
  }

  // ob output blocks of the chunk's images (a runtime count), its pointers then stepped past them.
  void group(int ob, int tail) {
    g_.mov(rXi, g_.qword[rsp + X_CHUNK]);
    g_.mov(rYi, rY);
    g_.mov(rax, g_.qword[rsp + CHUNK_IMAGES]);
    g_.mov(g_.qword[rsp + IMAGE_SLOT], rax);
    Label image;
    g_.L(image);
    bands(ob, tail);
    add_bytes(rXi, x_image_bytes(d_));
    add_bytes(rYi, d_.y_blocks * y_block_bytes(d_));
    g_.dec(g_.qword[rsp + IMAGE_SLOT]);
    g_.jnz(image, CodeGenerator::T_NEAR);
    add_bytes(rW, ob * w_block_bytes(d_));
    add_bytes(rY, ob * y_block_bytes(d_));
    if (d_.bias_channels) add_bytes(rB, ob * vbytes(d_));
  }

  void bands(int ob, int tail) {
    for (const Run& br : band_runs(d_, pl_.bands)) {
      g_.mov(rXb, rXi);
      g_.mov(rYb, rYi);
      const Band& band = pl_.bands[br.first];
      repeat(static_cast<int64_t>(br.count), slot(BAND_SLOT), [&] { tiles(band, ob, tail); },
             [&] {
               add_bytes(rXb, br.dx);
               add_bytes(rYb, br.dy);
             });
    }
  }

  void tiles(const Band& band, int ob, int tail) {
    for (const Run& tr : tile_runs(d_, band)) {
      g_.mov(rXt, rXb);
      g_.mov(rYt, rYb);
      repeat(static_cast<int64_t>(tr.count), Counter{rRun}, [&] { tile(band[tr.first], ob, tail); },
             [&] {
               add_bytes(rXt, tr.dx);
               add_bytes(rYt, tr.dy);
             });
    }
  }

  Xmm acc(int o, int k, int r) const { return v_.vreg(o * r + k); }

  // One tile of ob blocks × t.r pixels: the accumulators from the bias, the loops over input blocks
  // and lanes, then the residual, the activation and the stores.
  void tile(const Tile& t, int ob, int tail) {
    const int r = t.r, a = ob * r;
    auto wv = [&](int o) { return v_.vreg(a + o); };
    const Xmm lane = v_.vreg(a + ob);
    for (int o = 0; o < ob; ++o) {
      if (!d_.bias_channels) {
        for (int k = 0; k < r; ++k) g_.vxorps(acc(o, k, r), acc(o, k, r), acc(o, k, r));
        continue;
      }
      const int n = o == ob - 1 && tail ? tail : d_.lanes;
      if (n < d_.lanes) v_.set_tail(n, wv(0));
      v_.load(acc(o, 0, r), ptr[rB + o * vbytes(d_)], n);
      for (int k = 1; k < r; ++k) g_.vmovaps(acc(o, k, r), acc(o, 0, r));
    }
    std::vector<std::vector<int>> valid(static_cast<size_t>(taps(d_)));
    for (int64_t tp = 0; tp < taps(d_); ++tp) valid[tp] = valid_pixels(d_, t, tp);
    g_.mov(rXc, rXt);
    g_.mov(rWc, rW);
    repeat(d_.cb, Counter{rCb},
           [&] {
             repeat(d_.lanes / pl_.unroll, Counter{rCi},
                    [&] {
                      for (int u = 0; u < pl_.unroll; ++u)
                        for (int64_t tp = 0; tp < taps(d_); ++tp) {
                          if (valid[tp].empty()) continue;
                          for (int o = 0; o < ob; ++o) {
                            const int64_t w_off = o * w_block_bytes(d_) + (tp * d_.lanes + u) * vbytes(d_);
                            g_.vmovups(wv(o), ptr[rWc + w_off]);
                            // The next group's weight line into L2 while this one computes: a
                            // network's weights outgrow L3, and a group's stream from memory would
                            // otherwise stall its first tile (past the last group, a prefetch
                            // of nothing: prefetches never fault).
                            if (prefetch_next_) g_.prefetcht1(ptr[rWc + w_off + ob * w_block_bytes(d_)]);
                          }
                          for (int k : valid[tp]) {
                            const int64_t off = tap_offset(d_, t.p + k, tp) + u * 4;
                            if (!pl_.embedded) g_.vbroadcastss(lane, ptr[rXc + off]);
                            for (int o = 0; o < ob; ++o) {
                              if (pl_.embedded) g_.vfmadd231ps(acc(o, k, r), wv(o), ptr_b[rXc + off]);
                              else g_.vfmadd231ps(acc(o, k, r), wv(o), lane);
                            }
                          }
                        }
                    },
                    [&] {
                      add_bytes(rXc, pl_.unroll * 4);
                      add_bytes(rWc, pl_.unroll * vbytes(d_));
                    });
           },
           [&] {
             add_bytes(rXc, d_.h * d_.w * vbytes(d_) - d_.lanes * 4);
             add_bytes(rWc, (taps(d_) - 1) * d_.lanes * vbytes(d_));
           });
    std::vector<Xmm> tmp;
    for (int i = 0; i < act_.n_tmp; ++i) tmp.push_back(v_.vreg(a + i));
    if (d_.residual) {
      g_.mov(rXc, g_.qword[rsp + R_MINUS_Y]);
      g_.add(rXc, rYt);
    }
    for (int o = 0; o < ob; ++o)
      for (int k = 0; k < r; ++k) {
        const int64_t off = (o * d_.ho * d_.wo + t.p + k) * vbytes(d_);
        if (d_.residual) g_.vaddps(acc(o, k, r), acc(o, k, r), ptr[rXc + off]);
        if (d_.act != Activation::NONE) act_.body(v_, acc(o, k, r), acc(o, k, r), tmp);
        g_.vmovups(ptr[rYt + off], acc(o, k, r));
      }
  }

  CodeGenerator& g_;
  const NchwcConv& d_;
  const Plan& pl_;
  VecGen v_;
  ActSnippet act_;
  const bool prefetch_next_;  // the part's weights outgrow L2: each group fetches the next one's
};

}  // namespace

NchwcConv nchwc_conv_geometry(const ConvGeom& g, int lanes) {
  NchwcConv d;
  d.lanes = lanes;
  d.cb = g.c / lanes, d.h = g.h, d.w = g.w;
  d.kh = g.kh, d.kw = g.kw, d.sh = g.sh, d.sw = g.sw, d.ph = g.ph, d.pw = g.pw, d.dh = g.dh, d.dw = g.dw;
  d.ho = g.ho, d.wo = g.wo;
  d.y_blocks = g.o / lanes;
  d.n0 = 0, d.n1 = g.n, d.ob0 = 0, d.ob1 = d.y_blocks, d.p0 = 0, d.p1 = g.ho * g.wo;
  return d;
}

bool nchwc_conv_applies(const NchwcConv& d) {
  return x_image_bytes(d) < MAX_DISP && d.y_blocks * y_block_bytes(d) < MAX_DISP &&
         MAX_BLOCK_ROWS * w_block_bytes(d) < MAX_DISP;
}

Result<std::shared_ptr<const JitKernel>> nchwc_conv_kernel(const NchwcConv& d, Isa isa, KernelCache& cache) {
  const bool ok = d.lanes == 16 ? isa == Isa::AVX512 : d.lanes == 8 && isa != Isa::REF;
  if (!ok || !nchwc_conv_applies(d)) return std::shared_ptr<const JitKernel>();
  auto pl = std::make_shared<Plan>(choose_plan(d));
  if (pl->bands.empty()) return std::shared_ptr<const JitKernel>();
  const std::string name = fmt::format("f32_conv2d_nchwc{}{}{}__{}_{}x{}", d.bias_channels ? "_bias" : "",
                                       d.residual ? "_sum" : "",
                                       d.act == Activation::NONE ? "" : "_" + std::string(activation_name(d.act)),
                                       zmm(d) ? "avx512" : "avx2", pl->ob, pl->r);
  const std::string key = fmt::format(
      "{}|b{}|{}x{}x{}|k{}x{}|s{}x{}|p{}x{}|d{}x{}|o{}x{}x{}|n{}-{}|ob{}-{}|p{}-{}|bias{}|{}", name, d.lanes, d.cb, d.h,
      d.w, d.kh, d.kw, d.sh, d.sw, d.ph, d.pw, d.dh, d.dw, d.y_blocks, d.ho, d.wo, d.n0, d.n1, d.ob0, d.ob1, d.p0, d.p1,
      d.bias_channels, d.act_alpha);
  return build_kernel_measured(cache, key, name, size_t(4) << 20, [d, pl](CodeGenerator& g) { return Gen(g, d, *pl).emit(); });
}

}  // namespace nnasm
