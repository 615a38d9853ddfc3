// oneDNN (Debian's libdnnl-dev, 2.x) as a baseline for gemm_bench.cpp and conv_bench.cpp: a
// dnnl::matmul primitive for square SGEMM and the 784→256 layer at batch 1 and 64, row-major
// (format_tag::ab), and a convolution_forward primitive for the CONV2D shapes, on the CPU engine. The primitive is created once, before the timing loop, as nnasm prepares its kernel
// once; the loop times execute() and the stream's wait(). Debian builds oneDNN on OpenMP, so each
// benchmark sets one OpenMP thread for its own thread (omp_set_num_threads, a per-thread
// setting; BM_threads_sgemm_onednn sets its second argument's count); a oneDNN built on another runtime runs as it is configured (OMP_NUM_THREADS or
// taskset, then). The label names the implementation oneDNN chose. Built only with
// NNASM_HAVE_ONEDNN (the Makefile sets it when the header is installed: make bench-deps);
// otherwise one row says so. oneDNN throws: errors become error rows here.
#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_map>
#include <vector>

#include "tests/bench/baselines.h"
#include "tests/bench/bench_program.h"
#include "tests/bench/conv_shapes.h"
#include "tests/bench/quant_bench.h"

#ifdef NNASM_HAVE_ONEDNN
#include <immintrin.h>
#include <oneapi/dnnl/dnnl.hpp>
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
#include <omp.h>
#endif
#endif

namespace nnasm::baselines {
namespace {

#ifdef NNASM_HAVE_ONEDNN

// A dnnl::matmul primitive for C = A·B on o's row-major buffers (format_tag::ab), created once;
// use(label, call) runs the timing, where call() executes the primitive and waits for it.
// False (with an error row) when oneDNN throws.
template <class Use>
bool with_matmul(benchmark::State& st, Operands& o, int threads, Use use) {
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
  omp_set_num_threads(threads);
#else
  (void)threads;
#endif
  try {
    using dnnl::memory;
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream strm(eng);
    const memory::desc a_md({o.m, o.k}, memory::data_type::f32, memory::format_tag::ab);
    const memory::desc b_md({o.k, o.n}, memory::data_type::f32, memory::format_tag::ab);
    const memory::desc c_md({o.m, o.n}, memory::data_type::f32, memory::format_tag::ab);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), eng);
    const dnnl::matmul prim(pd);
    memory a(a_md, eng, o.a), b(b_md, eng, o.b), c(c_md, eng, o.c);
    const std::unordered_map<int, memory> args{{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}};
    use(std::string(pd.impl_info_str()), [&] {
      prim.execute(strm, args);
      strm.wait();
      benchmark::DoNotOptimize(o.c);
    });
  } catch (const dnnl::error& e) {
    st.SkipWithError((std::string("oneDNN: ") + e.what()).c_str());
    return false;
  }
  return true;
}

void run_matmul(benchmark::State& st, int64_t m, int64_t n, int64_t k, bool layer, int threads = 1) {
  Operands o(m, n, k);
  const bool ran = with_matmul(st, o, threads, [&](const std::string& label, auto call) {
    st.SetLabel(label);
    for (auto _ : st) call();
  });
  if (ran) finish(st, o, layer);
}

// nnasm's MATMUL of [m, k]·[k, n] (as BM_gemm_square_nnasm) and oneDNN's, head to head.
void gemm_vs_onednn(benchmark::State& st, int64_t m, int64_t k, int64_t n) {
  Operands o(m, n, k);
  auto p = bench_program([&](Graph& g) { g.output(matmul(g.input("a", {m, k}), g.input("b", {k, n})), "y"); });
  if (!p) {
    st.SkipWithError("prepare failed");
    return;
  }
  with_matmul(st, o, 1, [&](const std::string& label, auto call) {
    st.SetLabel(std::string(p->ex->kernel_name(0)) + " vs " + label);
    head_to_head(st, 2.0 * m * n * k, [&] { p->ex->run(); }, call);
  });
}
void BM_gemm_square_vs_onednn(benchmark::State& st) { gemm_vs_onednn(st, st.range(0), st.range(0), st.range(0)); }
BENCHMARK(BM_gemm_square_vs_onednn)->RangeMultiplier(2)->Range(32, 2048)->Unit(benchmark::kMillisecond);
// Layers (M/K/N): the MLP's first at batch 1 (the GEMV) and 64, and wide inputs at batch 64 and
// 128 whose weights (3–8 MiB) stream from L3, B read in place.
void BM_gemm_layer_vs_onednn(benchmark::State& st) { gemm_vs_onednn(st, st.range(0), st.range(1), st.range(2)); }
BENCHMARK(BM_gemm_layer_vs_onednn)
    ->Args({1, 784, 256})
    ->Args({64, 784, 256})
    ->Args({64, 1536, 512})
    ->Args({64, 4096, 512})
    ->Args({128, 2048, 512})
    ->Unit(benchmark::kMillisecond);

void BM_gemm_square_onednn(benchmark::State& st) { run_matmul(st, st.range(0), st.range(0), st.range(0), false); }
BENCHMARK(BM_gemm_square_onednn)->Apply(square_sizes);

void BM_gemm_gemv_784x256_onednn(benchmark::State& st) { run_matmul(st, 1, kLayerOut, kLayerIn, true); }

// Square SGEMM on 1 and 2 OpenMP threads, next to BM_threads_sgemm (threads_bench.cpp).
void BM_threads_sgemm_onednn(benchmark::State& st) {
  run_matmul(st, st.range(0), st.range(0), st.range(0), false, static_cast<int>(st.range(1)));
}
BENCHMARK(BM_threads_sgemm_onednn)->ArgsProduct({{256, 512, 1024}, thread_counts(1)})->Unit(benchmark::kMicrosecond);

// nnasm's square MATMUL on its pool and oneDNN's on OpenMP, both with 2 threads, head to head;
// 60 ms between blocks outlast OpenMP's spin (libgomp's default: 300,000 pause loops).
void BM_threads_sgemm_vs_onednn(benchmark::State& st) {
  const int64_t n = st.range(0);
  Operands o(n, n, n);
  auto p = threaded(2, [&](Program&, Graph& g) { g.output(matmul(g.input("a", {n, n}), g.input("b", {n, n})), "c"); });
  if (!p) {
    st.SkipWithError("prepare failed");
    return;
  }
  with_matmul(st, o, 2, [&](const std::string& label, auto call) {
    st.SetLabel(std::string(p->ex->kernel_name(0)) + " vs " + label);
    head_to_head(st, 2.0 * n * n * n, [&] { p->ex->run(); }, call, 60);
  });
}
BENCHMARK(BM_threads_sgemm_vs_onednn)->RangeMultiplier(2)->Range(32, 2048)->Iterations(12)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_gemm_gemv_784x256_onednn)->Unit(benchmark::kMicrosecond);

void BM_gemm_b64_784x256_onednn(benchmark::State& st) { run_matmul(st, kLayerBatch, kLayerOut, kLayerIn, true); }
BENCHMARK(BM_gemm_b64_784x256_onednn)->Unit(benchmark::kMicrosecond);

// ---- Reduced precision (issue 30): the 784→256 layer with act=relu as oneDNN inner products ----
//
// Each is an inner_product_forward (forward_inference) with bias and a relu post-op, weights
// reordered once into the layout oneDNN picks (format_tag::any) as nnasm prepares its own, src
// and dst row-major f32 as nnasm's x and y, one OpenMP thread. What a call counts is what a user
// holding f32 activations pays each run:
// - f32: the primitive alone.
// - bf16: x reordered f32 → bf16 (a reorder primitive), then the primitive with bf16 weights and
//   f32 dst. oneDNN 2.6 has no f32-src × bf16-weights inner product ("could not create a
//   primitive descriptor"), and nnasm's LINEAR_BF16 rounds f32 x to bf16 inside its kernel, so
//   the reorder is the same work on oneDNN's side.
// - int8: dynamic quantization of x per tensor, as ONNX Runtime's DynamicQuantizeLinear (scale
//   (max − min)/255 over a range holding 0, zero point round(−min/scale)), min/max and the u8
//   conversion in AVX2 code here; u8 src × s8 weights (per output channel, symmetric, quantized
//   once), f32 dst, runtime output scales (x's scale × each channel's). oneDNN 2.6's inner
//   product takes no src zero point and adds the bias before the output scale, so each run also
//   folds the zero point's correction (z · Σₖ q_w[k, o], the sums computed once) and the
//   rescaled bias into the bias it passes: 256 values.
struct LayerInputs {
  int64_t m, k = kLayerIn, n = kLayerOut;
  std::vector<float> x, w, b, y;  // x [m, k], w [k, n] (nnasm's W layout), b [n], y [m, n]
  explicit LayerInputs(int64_t m_) : m(m_) {
    x.resize(static_cast<size_t>(m * k));
    w.resize(static_cast<size_t>(k * n));
    b.resize(static_cast<size_t>(n));
    y.resize(static_cast<size_t>(m * n));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7919) % 255) / 255.f - 0.5f;
    for (size_t i = 0; i < w.size(); ++i) w[i] = (static_cast<float>((i * 104729) % 251) / 251.f - 0.5f) * 0.1f;
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 7) * 0.01f - 0.03f;
  }
  // "" when y matches relu(x·W + b) in double at four corners within `tol` relative to the row's
  // scale, else what differs.
  std::string check(double tol) const {
    for (int64_t i : {int64_t{0}, m - 1})
      for (int64_t j : {int64_t{0}, n / 2 + 1, n - 1}) {
        double want = b[j], scale = 0;
        for (int64_t p = 0; p < k; ++p) {
          want += static_cast<double>(x[i * k + p]) * w[p * n + j];
          scale += std::fabs(static_cast<double>(x[i * k + p]) * w[p * n + j]);
        }
        want = std::max(want, 0.0);
        const double got = y[i * n + j];
        if (std::fabs(got - want) > tol * scale + 1e-6)
          return "wrong result at y[" + std::to_string(i) + "," + std::to_string(j) + "]: " + std::to_string(got) +
                 ", expected " + std::to_string(want);
      }
    return "";
  }
};

// min and max of v[0, n) (0 included), then q = clamp(round(v/s) + z, 0, 255) with s, z as
// DynamicQuantizeLinear's; AVX2 (the baseline runs on the machines nnasm's kernels do).
__attribute__((target("avx2,fma"))) void quantize_u8(const float* v, int64_t n, uint8_t* q, float* s_out, int* z_out) {
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 a = _mm256_loadu_ps(v + i);
    lo = _mm256_min_ps(lo, a);
    hi = _mm256_max_ps(hi, a);
  }
  float l[8], h[8];
  _mm256_storeu_ps(l, lo);
  _mm256_storeu_ps(h, hi);
  float mn = 0, mx = 0;
  for (int j = 0; j < 8; ++j) mn = std::min(mn, l[j]), mx = std::max(mx, h[j]);
  for (; i < n; ++i) mn = std::min(mn, v[i]), mx = std::max(mx, v[i]);
  const float s = mx > mn ? (mx - mn) / 255.f : 1.f;
  const int z = static_cast<int>(std::nearbyint(-mn / s));
  const __m256 inv = _mm256_set1_ps(1.f / s), zf = _mm256_set1_ps(static_cast<float>(z));
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i r[4];
    for (int j = 0; j < 4; ++j) r[j] = _mm256_cvtps_epi32(_mm256_fmadd_ps(_mm256_loadu_ps(v + i + 8 * j), inv, zf));
    const __m256i w = _mm256_packus_epi16(_mm256_packs_epi32(r[0], r[1]), _mm256_packs_epi32(r[2], r[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + i), _mm256_permutevar8x32_epi32(w, order));
  }
  for (; i < n; ++i) q[i] = static_cast<uint8_t>(std::clamp(std::nearbyint(v[i] / s) + z, 0.f, 255.f));
  *s_out = s;
  *z_out = z;
}

// The three inner products on `in`, created once: call(kind) runs one ("f32", "bf16", "int8").
class OnednnLayer {
 public:
  explicit OnednnLayer(LayerInputs& in) : in_(in), eng_(dnnl::engine::kind::cpu, 0), strm_(eng_) {
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
    omp_set_num_threads(1);
#endif
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    using dnnl::memory;
    const memory::dims src{in.m, in.k}, wei{in.n, in.k}, bia{in.n}, dst{in.m, in.n};
    dnnl::post_ops relu;
    relu.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
    const memory::desc x_md(src, dt::f32, tag::ab), y_md(dst, dt::f32, tag::ab), b_md(bia, dt::f32, tag::a);
    // nnasm's W [k, n] is oneDNN's [oc, ic] stored ic-major: format_tag::ba.
    const memory::desc w_user(wei, dt::f32, tag::ba);
    memory x(x_md, eng_, in.x.data()), y(y_md, eng_, in.y.data()), w(w_user, eng_, in.w.data());
    bias_ = memory(b_md, eng_, in.b.data());
    auto make = [&](dt s, dt wt, const dnnl::primitive_attr& a) {
      const memory::desc s_md(src, s, tag::ab), w_md(wei, wt, tag::any);
      return dnnl::inner_product_forward::primitive_desc(
          dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_inference, s_md, w_md, b_md, y_md), a, eng_);
    };
    dnnl::primitive_attr plain;
    plain.set_post_ops(relu);
    // f32
    {
      const auto pd = make(dt::f32, dt::f32, plain);
      memory wp(pd.weights_desc(), eng_);
      dnnl::reorder(w, wp).execute(strm_, w, wp);
      f32_ = {dnnl::inner_product_forward(pd), {{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, wp}, {DNNL_ARG_BIAS, bias_}, {DNNL_ARG_DST, y}}};
      impl_["f32"] = pd.impl_info_str();
    }
    // bf16: x reordered each run
    {
      const auto pd = make(dt::bf16, dt::bf16, plain);
      memory wp(pd.weights_desc(), eng_), xb(pd.src_desc(), eng_);
      dnnl::reorder(w, wp).execute(strm_, w, wp);
      x_to_bf16_ = {dnnl::reorder(x, xb), {{DNNL_ARG_FROM, x}, {DNNL_ARG_TO, xb}}};
      bf16_ = {dnnl::inner_product_forward(pd), {{DNNL_ARG_SRC, xb}, {DNNL_ARG_WEIGHTS, wp}, {DNNL_ARG_BIAS, bias_}, {DNNL_ARG_DST, y}}};
      impl_["bf16"] = pd.impl_info_str();
    }
    // int8: W quantized per output channel once, its column sums for the zero point's correction.
    {
      std::vector<int8_t> qw(in.w.size());
      sw_.assign(static_cast<size_t>(in.n), 0.f);
      colsum_.assign(static_cast<size_t>(in.n), 0);
      for (int64_t o = 0; o < in.n; ++o) {
        float mx = 0;
        for (int64_t p = 0; p < in.k; ++p) mx = std::max(mx, std::fabs(in.w[p * in.n + o]));
        sw_[o] = mx > 0 ? mx / 127.f : 1.f;
        for (int64_t p = 0; p < in.k; ++p) {
          const int8_t q = static_cast<int8_t>(std::nearbyint(in.w[p * in.n + o] / sw_[o]));
          qw[p * in.n + o] = q;
          colsum_[o] += q;
        }
      }
      dnnl::primitive_attr a;
      a.set_post_ops(relu);
      a.set_output_scales(1 << 1, {DNNL_RUNTIME_F32_VAL});
      const auto pd = make(dt::u8, dt::s8, a);
      memory wq(memory::desc(wei, dt::s8, tag::ba), eng_, qw.data()), wp(pd.weights_desc(), eng_);
      dnnl::reorder(wq, wp).execute(strm_, wq, wp);
      qx_.resize(in.x.size());
      scales_.resize(static_cast<size_t>(in.n));
      qbias_.resize(static_cast<size_t>(in.n));
      memory xq(pd.src_desc(), eng_, qx_.data()), sc(memory::desc({in.n}, dt::f32, tag::x), eng_, scales_.data());
      memory bq(b_md, eng_, qbias_.data());
      i8_ = {dnnl::inner_product_forward(pd),
             {{DNNL_ARG_SRC, xq}, {DNNL_ARG_WEIGHTS, wp}, {DNNL_ARG_BIAS, bq}, {DNNL_ARG_DST, y},
              {DNNL_ARG_ATTR_OUTPUT_SCALES, sc}}};
      impl_["int8"] = pd.impl_info_str();
    }
    strm_.wait();
  }

  void f32() { run(f32_); }
  void bf16() {
    x_to_bf16_.p.execute(strm_, x_to_bf16_.args);
    run(bf16_);
  }
  void int8() {
    float s;
    int z;
    quantize_u8(in_.x.data(), in_.m * in_.k, qx_.data(), &s, &z);
    for (size_t o = 0; o < scales_.size(); ++o) {
      scales_[o] = s * sw_[o];
      qbias_[o] = in_.b[o] / scales_[o] - static_cast<float>(z * colsum_[o]);
    }
    run(i8_);
  }
  const std::string& impl(const std::string& kind) { return impl_[kind]; }

 private:
  struct Prim {
    dnnl::primitive p;
    std::unordered_map<int, dnnl::memory> args;
  };
  void run(Prim& p) {
    p.p.execute(strm_, p.args);
    strm_.wait();
    benchmark::DoNotOptimize(in_.y.data());
  }

  LayerInputs& in_;
  dnnl::engine eng_;
  dnnl::stream strm_;
  dnnl::memory bias_;
  Prim f32_, bf16_, x_to_bf16_, i8_;
  std::vector<float> sw_, scales_, qbias_;
  std::vector<int> colsum_;
  std::vector<uint8_t> qx_;
  std::unordered_map<std::string, std::string> impl_;
};

// The layer at batch m, act=relu, one thread, in alternating blocks: nnasm's LINEAR (the
// baseline of the ratios), nnasm's LINEAR_BF16, nnasm's int8 layer from `i8_listing` where that
// file is there (empty or missing: left out), oneDNN's f32, bf16 and int8 inner products (above).
// Each oneDNN result is checked against relu(x·W + b) first: f32 and bf16 within bf16's
// rounding, int8 within its quantization steps. Counters: alternate()'s, and bf16_vs_onednn
// (i8_vs_onednn), nnasm's time over oneDNN's at that precision.
void layer_vs_onednn(benchmark::State& st, int64_t m, const std::string& f32_listing, const std::string& bf16_listing,
                     const std::string& i8_listing) {
  auto f32 = listing_program(f32_listing), bf16 = listing_program(bf16_listing);
  auto i8 = i8_listing.empty() ? nullptr : listing_program(i8_listing);
  if (!f32 || !bf16) {
    st.SkipWithError(("cannot prepare " + f32_listing + " or " + bf16_listing).c_str());
    return;
  }
  try {
    LayerInputs in(m);
    OnednnLayer one(in);
    for (const char* kind : {"f32", "bf16", "int8"}) {
      std::fill(in.y.begin(), in.y.end(), -1.f);
      const std::string k = kind;
      k == "f32" ? one.f32() : k == "bf16" ? one.bf16() : one.int8();
      const std::string err = in.check(k == "f32" ? 1e-5 : k == "bf16" ? 1e-2 : 3e-2);
      if (!err.empty()) {
        st.SkipWithError(("oneDNN " + k + ": " + err).c_str());
        return;
      }
    }
    std::string label = first_layer(*f32) + ", " + first_layer(*bf16);
    if (i8) label += ", " + first_layer(*i8);
    st.SetLabel(label + " vs " + one.impl("f32") + ", " + one.impl("bf16") + ", " + one.impl("int8"));
    std::vector<Side> sides{{"nnasm_f32", [&] { f32->ex->run(); }}, {"nnasm_bf16", [&] { bf16->ex->run(); }}};
    if (i8) sides.push_back({"nnasm_i8", [&] { i8->ex->run(); }});
    sides.push_back({"onednn_f32", [&] { one.f32(); }});
    sides.push_back({"onednn_bf16", [&] { one.bf16(); }});
    sides.push_back({"onednn_i8", [&] { one.int8(); }});
    alternate(st, sides);
    // The targets: nnasm's time over oneDNN's at the same precision (≤ 1).
    auto ratio = [&](const std::string& a, const std::string& b) {
      if (st.counters.count(a + "_us") && st.counters.count(b + "_us"))
        st.counters[a.substr(6) + "_vs_onednn"] = st.counters[a + "_us"].value / st.counters[b + "_us"].value;
    };
    ratio("nnasm_bf16", "onednn_bf16");
    ratio("nnasm_i8", "onednn_i8");
  } catch (const dnnl::error& e) {
    st.SkipWithError((std::string("oneDNN: ") + e.what()).c_str());
  }
}

// The coordinator's int8 listing: LINEAR_I8 on the same layer (tests/bench/quant/); until it is
// there, its side is left out.
std::string i8_listing(int64_t m) { return "tests/bench/quant/linear_i8_" + std::to_string(m) + "x784x256.nnasm"; }

void BM_quant_layer_vs_onednn(benchmark::State& st) {
  const int64_t m = st.range(0);
  const std::string shape = std::to_string(m) + "x784x256.nnasm";
  layer_vs_onednn(st, m, "tests/bench/quant/linear_f32_" + shape, "tests/bench/quant/linear_bf16_" + shape,
                  i8_listing(m));
}
BENCHMARK(BM_quant_layer_vs_onednn)->Arg(1)->Arg(64)->Iterations(200)->Unit(benchmark::kMillisecond);

// A forward-inference convolution with bias at oneDNN's best: it picks the layouts of src,
// weights and dst (format_tag::any, blocked nChw8c-like on AVX2), the caller's NCHW input and OIHW
// weights are reordered once before the timing loop (as a model that keeps its activations in
// oneDNN's layout would), and the loop times the primitive alone. With src and dst forced to NCHW
// oneDNN 2.6 falls back to its GEMM-based convolution, slower on these shapes.
void run_conv(benchmark::State& st, const ConvShape& s) {
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
  omp_set_num_threads(1);
#endif
  try {
    using dnnl::memory;
    using tag = memory::format_tag;
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream strm(eng);
    const memory::dims src_dims{1, s.c, s.h, s.w}, dst_dims{1, s.o, s.h, s.w}, bias_dims{s.o};
    const memory::dims w_dims = s.groups == 1 ? memory::dims{s.o, s.c, s.k, s.k}
                                              : memory::dims{s.groups, s.o / s.groups, s.c / s.groups, s.k, s.k};
    const memory::desc src_user(src_dims, memory::data_type::f32, tag::nchw);
    const memory::desc src_md(src_dims, memory::data_type::f32, tag::any);
    const memory::desc dst_md(dst_dims, memory::data_type::f32, tag::any);
    const memory::desc bias_md(bias_dims, memory::data_type::f32, tag::x);
    const memory::desc w_any(w_dims, memory::data_type::f32, tag::any);
    const memory::desc w_user(w_dims, memory::data_type::f32, s.groups == 1 ? tag::oihw : tag::goihw);
    const dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                            src_md, w_any, bias_md, dst_md, {1, 1}, {s.pad, s.pad}, {s.pad, s.pad});
    const dnnl::convolution_forward::primitive_desc pd(d, eng);
    std::vector<float> x(static_cast<size_t>(s.c * s.h * s.w)), w(static_cast<size_t>(s.o * (s.c / s.groups) * s.k * s.k)), b(static_cast<size_t>(s.o), 0.1f);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7919) % 255) / 255.f - 0.5f;
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((i * 7919) % 255) / 255.f - 0.5f;
    memory x_mem(src_user, eng, x.data()), src(pd.src_desc(), eng), dst(pd.dst_desc(), eng), bias(bias_md, eng, b.data());
    memory w_mem(w_user, eng, w.data()), w_prim(pd.weights_desc(), eng);
    dnnl::reorder(x_mem, src).execute(strm, x_mem, src);
    dnnl::reorder(w_mem, w_prim).execute(strm, w_mem, w_prim);
    strm.wait();
    const dnnl::convolution_forward prim(pd);
    const std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, w_prim}, {DNNL_ARG_BIAS, bias}, {DNNL_ARG_DST, dst}};
    st.SetLabel(pd.impl_info_str());
    for (auto _ : st) {
      prim.execute(strm, args);
      strm.wait();
      benchmark::DoNotOptimize(dst.get_data_handle());
    }
  } catch (const dnnl::error& e) {
    st.SkipWithError((std::string("oneDNN: ") + e.what()).c_str());
    return;
  }
  set_flops(st, s.flops());
}

const int registered_conv = [] {
  for (const ConvShape& s : conv_shapes())
    benchmark::RegisterBenchmark(("BM_conv_" + s.name + "_onednn").c_str(), [s](benchmark::State& st) { run_conv(st, s); })
        ->Unit(benchmark::kMicrosecond);
  return 0;
}();

#else

void BM_gemm_square_onednn(benchmark::State& st) { missing(st, "libdnnl-dev"); }
BENCHMARK(BM_gemm_square_onednn);
void BM_threads_sgemm_onednn(benchmark::State& st) { missing(st, "libdnnl-dev"); }
BENCHMARK(BM_threads_sgemm_onednn);
void BM_threads_sgemm_vs_onednn(benchmark::State& st) { missing(st, "libdnnl-dev"); }
BENCHMARK(BM_threads_sgemm_vs_onednn);
void BM_quant_layer_vs_onednn(benchmark::State& st) { missing(st, "libdnnl-dev"); }
BENCHMARK(BM_quant_layer_vs_onednn);

#endif

}  // namespace
}  // namespace nnasm::baselines
