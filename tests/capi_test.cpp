// The C API (api/nnasm.h): loading from memory and files, queries, runs that match the engine's,
// frame slicing, every misuse answered with a status and a message, instances on many threads
// bitwise equal to one thread, and load/unload cycles that leave memory flat.
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "api/nnasm.h"
#include "jit/cpu.h"

extern "C" int nnasm_c_run_listing(const char* listing, const float* x, size_t n_x, float* y, size_t n_y, char* err,
                                   size_t err_size);

namespace {

// A 6 → 16 → 4 policy, softmax output; weights from the fixed seed.
const char kPolicy[] =
    "input  %x : f32[1,6]\n"
    "param  @w1 : f32[6,16]  init=he_normal\n"
    "param  @b1 : f32[16]    init=uniform low=-0.1 high=0.1\n"
    "param  @w2 : f32[16,4]  init=xavier_uniform\n"
    "param  @b2 : f32[4]     init=zeros\n"
    "output %y\n"
    "\n"
    "forward:\n"
    "  LINEAR  %x, @w1, @b1 -> %h  act=relu\n"
    "  LINEAR  %h, @w2, @b2 -> %z\n"
    "  SOFTMAX %z -> %y  axis=-1\n";

struct Model {
  nnasm_model* m = nullptr;
  explicit Model(const nnasm_model_options* o = nullptr) {
    EXPECT_EQ(nnasm_model_load_memory(kPolicy, sizeof kPolicy - 1, o, &m), NNASM_OK) << nnasm_last_error();
  }
  ~Model() { nnasm_model_free(m); }
};

void input_for(int k, float* x) {
  for (int i = 0; i < 6; ++i) x[i] = std::sin(0.7f * k + 1.3f * i);
}

std::vector<float> run_once(nnasm_instance* in, int k) {
  float x[6], y[4];
  input_for(k, x);
  EXPECT_EQ(nnasm_instance_set_input(in, "x", x, sizeof x), NNASM_OK) << nnasm_last_error();
  EXPECT_EQ(nnasm_instance_run(in), NNASM_OK);
  EXPECT_EQ(nnasm_instance_get_output(in, "y", y, sizeof y), NNASM_OK) << nnasm_last_error();
  return std::vector<float>(y, y + 4);
}

TEST(CApi, VersionAndQueries) {
  EXPECT_STREQ(nnasm_version(), "0.1.0");
  EXPECT_EQ(nnasm_abi_version(), unsigned(NNASM_ABI_VERSION));
  Model model;
  ASSERT_NE(model.m, nullptr);
  size_t n = 0;
  ASSERT_EQ(nnasm_model_input_count(model.m, &n), NNASM_OK);
  EXPECT_EQ(n, 1u);
  nnasm_tensor_info info;
  info.struct_size = sizeof info;
  ASSERT_EQ(nnasm_model_input_info(model.m, 0, &info), NNASM_OK);
  EXPECT_STREQ(info.name, "x");
  EXPECT_EQ(info.dtype, NNASM_F32);
  EXPECT_EQ(info.rank, 2);
  EXPECT_EQ(info.dims[1], 6);
  EXPECT_EQ(info.bytes, 24u);
  ASSERT_EQ(nnasm_model_output_info(model.m, 0, &info), NNASM_OK);
  EXPECT_STREQ(info.name, "y");
  EXPECT_EQ(info.bytes, 16u);
  EXPECT_EQ(nnasm_model_output_info(model.m, 1, &info), NNASM_ERR_NOT_FOUND);
  EXPECT_NE(std::string(nnasm_last_error()).find("output 1: the model has 1"), std::string::npos) << nnasm_last_error();
}

TEST(CApi, TheHeaderIsCAndRunsFromC) {
  float x[6], y[4] = {}, y_cpp[4];
  input_for(3, x);
  char err[256] = "";
  ASSERT_EQ(nnasm_c_run_listing(kPolicy, x, 6, y, 4, err, sizeof err), NNASM_OK) << err;
  Model model;
  nnasm_instance* in = nullptr;
  ASSERT_EQ(nnasm_instance_create(model.m, &in), NNASM_OK);
  const std::vector<float> v = run_once(in, 3);
  std::copy(v.begin(), v.end(), y_cpp);
  nnasm_instance_free(in);
  EXPECT_EQ(std::memcmp(y, y_cpp, sizeof y), 0);
  float sum = 0;
  for (float p : y) sum += p;
  EXPECT_NEAR(sum, 1.f, 1e-6);
  EXPECT_NE(nnasm_c_run_listing("input %x : f32[1,6]\noutput %y\nforward:\n  RELU %x -> %q\n", x, 6, y, 4, err,
                                sizeof err),
            NNASM_OK);
  EXPECT_NE(std::string(err).find("<memory>:"), std::string::npos) << err;
}

TEST(CApi, RunStepsSpreadsARunOverCalls) {
  Model model;
  nnasm_instance *a = nullptr, *b = nullptr;
  ASSERT_EQ(nnasm_instance_create(model.m, &a), NNASM_OK);
  ASSERT_EQ(nnasm_instance_create(model.m, &b), NNASM_OK);
  size_t n = 0;
  ASSERT_EQ(nnasm_model_instruction_count(model.m, &n), NNASM_OK);
  ASSERT_GE(n, 2u);
  for (int k = 0; k < 3; ++k) {
    const std::vector<float> whole = run_once(a, k);
    float x[6], y[4];
    input_for(k, x);
    ASSERT_EQ(nnasm_instance_set_input(b, "x", x, sizeof x), NNASM_OK);
    int done = 0, calls = 0;
    while (!done) {
      ASSERT_EQ(nnasm_instance_run_steps(b, 1, &done), NNASM_OK);
      ++calls;
    }
    EXPECT_EQ(calls, static_cast<int>(n));
    ASSERT_EQ(nnasm_instance_get_output(b, "y", y, sizeof y), NNASM_OK);
    EXPECT_EQ(std::vector<float>(y, y + 4), whole) << k;
  }
  nnasm_instance_free(a);
  nnasm_instance_free(b);
}

TEST(CApi, MisuseIsAStatusWithAMessage) {
  nnasm_model* m = reinterpret_cast<nnasm_model*>(1);
  EXPECT_EQ(nnasm_model_load_memory(nullptr, 5, nullptr, &m), NNASM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(m, nullptr);
  EXPECT_EQ(nnasm_model_load_memory(kPolicy, 10, nullptr, nullptr), NNASM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(nnasm_model_load_file(nullptr, nullptr, &m), NNASM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(nnasm_model_load_file("/no/such/file.nnm", nullptr, &m), NNASM_ERR_IO);
  EXPECT_NE(std::string(nnasm_last_error()).find("/no/such/file.nnm"), std::string::npos);
  EXPECT_EQ(nnasm_model_load_memory("\x89NNM\r\n\x1a\ngarbage", 15, nullptr, &m), NNASM_ERR_BAD_MODEL);
  EXPECT_NE(std::string(nnasm_last_error()).find("byte "), std::string::npos) << nnasm_last_error();
  nnasm_model_options o;
  nnasm_model_options_init(&o);
  o.struct_size = 3;  // neither version 1 nor a size
  EXPECT_EQ(nnasm_model_load_memory(kPolicy, sizeof kPolicy - 1, &o, &m), NNASM_ERR_ABI);
  nnasm_model_options_init(&o);
  o.isa = "sse9";
  EXPECT_EQ(nnasm_model_load_memory(kPolicy, sizeof kPolicy - 1, &o, &m), NNASM_ERR_INVALID_ARGUMENT);
  nnasm_model_options_init(&o);
  o.threads = 0;
  EXPECT_EQ(nnasm_model_load_memory(kPolicy, sizeof kPolicy - 1, &o, &m), NNASM_ERR_INVALID_ARGUMENT);

  Model model;
  nnasm_instance* in = nullptr;
  ASSERT_EQ(nnasm_instance_create(model.m, &in), NNASM_OK);
  float x[6] = {}, y[4];
  EXPECT_EQ(nnasm_instance_set_input(in, "nope", x, sizeof x), NNASM_ERR_NOT_FOUND);
  EXPECT_NE(std::string(nnasm_last_error()).find("no input named 'nope' (the model's inputs: x)"), std::string::npos)
      << nnasm_last_error();
  EXPECT_EQ(nnasm_instance_set_input(in, "x", x, 20), NNASM_ERR_SIZE_MISMATCH);
  EXPECT_NE(std::string(nnasm_last_error()).find("holds 24 bytes, got 20"), std::string::npos);
  EXPECT_EQ(nnasm_instance_set_input(in, "x", nullptr, 24), NNASM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(nnasm_instance_set_input(in, nullptr, x, 24), NNASM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(nnasm_instance_set_input(nullptr, "x", x, 24), NNASM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(nnasm_instance_get_output(in, "x", y, sizeof y), NNASM_ERR_NOT_FOUND);  // an input, not an output
  EXPECT_EQ(nnasm_instance_run(nullptr), NNASM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(nnasm_instance_run_steps(in, 1, nullptr), NNASM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(nnasm_instance_create(nullptr, &in), NNASM_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(nnasm_status_string(NNASM_ERR_SIZE_MISMATCH), "size mismatch");
  void* data = nullptr;
  size_t bytes = 0;
  ASSERT_EQ(nnasm_instance_tensor_data(in, "y", &data, &bytes), NNASM_OK);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(data) % 64, 0u);
  EXPECT_EQ(bytes, 16u);
  nnasm_instance_free(in);
  nnasm_instance_free(nullptr);
  nnasm_model_free(nullptr);
}

// Nothing to run is an error, not an empty model: 0 bytes, or a listing of blanks and comments.
TEST(CApi, AnEmptyFileOrListingIsNotAModel) {
  nnasm_model* m = reinterpret_cast<nnasm_model*>(1);
  EXPECT_EQ(nnasm_model_load_memory("", 0, nullptr, &m), NNASM_ERR_BAD_MODEL);
  EXPECT_EQ(m, nullptr);
  EXPECT_STREQ(nnasm_last_error(), "<memory>: error: empty file (expected a listing or an nnasm model file)");
  const char blank[] = "\n; nothing here\n  \n";
  EXPECT_EQ(nnasm_model_load_memory(blank, sizeof blank - 1, nullptr, &m), NNASM_ERR_BAD_MODEL);
  EXPECT_EQ(std::string(nnasm_last_error()).rfind("<memory>:1:1: error: the listing has no instructions and no outputs", 0),
            0u)
      << nnasm_last_error();
  char path[] = "/tmp/nnasm_capi_empty_XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::close(fd);
  EXPECT_EQ(nnasm_model_load_file(path, nullptr, &m), NNASM_ERR_BAD_MODEL);
  EXPECT_EQ(std::string(nnasm_last_error()), std::string(path) + ": error: empty file (expected a listing or an nnasm model file)");
  ::unlink(path);
}

// A file of another format is named for what it is, not reported as a listing error at 1:1.
TEST(CApi, AFileOfAnotherFormatIsNamed) {
  const std::string npy("\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", 62);
  const struct {
    std::string bytes;
    const char* kind;
    const char* hint = "";
  } cases[] = {
      {npy, "a .npy array"},
      {std::string("\x08\x07\x12\x07pytorch\x1a\x032.1", 16), "an ONNX model", "; convert it with `nnasm import`"},
      {std::string("\x1f\x8b\x08\x00\x00\x00\x00\x00", 8), "gzip-compressed data", "; decompress it first"},
      {std::string("PK\x03\x04\x14\x00", 6), "a ZIP archive (.npz, PyTorch .pt or Keras)"},
      {std::string("\x89HDF\r\n\x1a\n\x00", 9), "an HDF5 file"},
  };
  for (const auto& c : cases) {
    nnasm_model* m = nullptr;
    EXPECT_EQ(nnasm_model_load_memory(c.bytes.data(), c.bytes.size(), nullptr, &m), NNASM_ERR_BAD_MODEL) << c.kind;
    EXPECT_EQ(std::string(nnasm_last_error()),
              std::string("<memory>: error: <memory> is ") + c.kind + ", not a model (a listing or an nnasm model file)" +
                  c.hint);
  }
  char path[] = "/tmp/nnasm_capi_npy_XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, npy.data(), npy.size()), static_cast<ssize_t>(npy.size()));
  ::close(fd);
  nnasm_model* m = nullptr;
  EXPECT_EQ(nnasm_model_load_file(path, nullptr, &m), NNASM_ERR_BAD_MODEL);
  EXPECT_EQ(std::string(nnasm_last_error()), std::string(path) + ": error: " + path +
                                                 " is a .npy array, not a model (a listing or an nnasm model file)");
  ::unlink(path);
}

// Outputs hold nothing meaningful until a run has finished (nnasm.h): reading one earlier, or
// while a run_steps run is half done, is NNASM_ERR_NOT_READY.
TEST(CApi, AnOutputBeforeAnyRunIsNotReady) {
  Model model;
  nnasm_instance* in = nullptr;
  ASSERT_EQ(nnasm_instance_create(model.m, &in), NNASM_OK);
  float y[4];
  EXPECT_EQ(nnasm_instance_get_output(in, "y", y, sizeof y), NNASM_ERR_NOT_READY);
  EXPECT_STREQ(nnasm_last_error(),
               "output 'y': no run has finished on this instance yet (call nnasm_instance_run first)");
  EXPECT_STREQ(nnasm_status_string(NNASM_ERR_NOT_READY), "not ready");
  const std::vector<float> first = run_once(in, 0);
  int done = 0;
  ASSERT_EQ(nnasm_instance_run_steps(in, 1, &done), NNASM_OK);
  ASSERT_EQ(done, 0);
  EXPECT_EQ(nnasm_instance_get_output(in, "y", y, sizeof y), NNASM_ERR_NOT_READY);
  while (!done) ASSERT_EQ(nnasm_instance_run_steps(in, 1, &done), NNASM_OK);
  EXPECT_EQ(nnasm_instance_get_output(in, "y", y, sizeof y), NNASM_OK) << nnasm_last_error();
  EXPECT_EQ(std::vector<float>(y, y + 4), first);
  nnasm_instance_free(in);
}

TEST(CApi, AModelLivesUntilItsLastInstance) {
  nnasm_model* m = nullptr;
  ASSERT_EQ(nnasm_model_load_memory(kPolicy, sizeof kPolicy - 1, nullptr, &m), NNASM_OK);
  nnasm_instance* in = nullptr;
  ASSERT_EQ(nnasm_instance_create(m, &in), NNASM_OK);
  const std::vector<float> before = run_once(in, 1);
  nnasm_model_free(m);
  EXPECT_EQ(run_once(in, 1), before);
  nnasm_instance_free(in);
}

TEST(CApi, ZeroCopyBuffersAreTheInstances) {
  Model model;
  nnasm_instance* in = nullptr;
  ASSERT_EQ(nnasm_instance_create(model.m, &in), NNASM_OK);
  void *x = nullptr, *y = nullptr;
  size_t nx = 0, ny = 0;
  ASSERT_EQ(nnasm_instance_tensor_data(in, "x", &x, &nx), NNASM_OK);
  ASSERT_EQ(nnasm_instance_tensor_data(in, "y", &y, &ny), NNASM_OK);
  input_for(5, static_cast<float*>(x));
  ASSERT_EQ(nnasm_instance_run(in), NNASM_OK);
  const std::vector<float> direct(static_cast<float*>(y), static_cast<float*>(y) + 4);
  EXPECT_EQ(run_once(in, 5), direct);
  nnasm_instance_free(in);
}

TEST(CApi, CallerBuffersBoundToInputsAndOutputs) {
  Model model;
  nnasm_instance *in = nullptr, *copying = nullptr;
  ASSERT_EQ(nnasm_instance_create(model.m, &in), NNASM_OK);
  ASSERT_EQ(nnasm_instance_create(model.m, &copying), NNASM_OK);
  nnasm_tensor_info xi, yi;
  xi.struct_size = yi.struct_size = sizeof xi;
  ASSERT_EQ(nnasm_model_input_info(model.m, 0, &xi), NNASM_OK);
  ASSERT_EQ(nnasm_model_output_info(model.m, 0, &yi), NNASM_OK);
  EXPECT_EQ(xi.buffer_bytes, 64u);
  alignas(64) float x[16] = {}, y[16] = {};
  ASSERT_EQ(nnasm_instance_bind(in, "x", x, sizeof x), NNASM_OK) << nnasm_last_error();
  ASSERT_EQ(nnasm_instance_bind(in, "y", y, sizeof y), NNASM_OK) << nnasm_last_error();
  for (int k = 0; k < 3; ++k) {
    input_for(k, x);
    ASSERT_EQ(nnasm_instance_run(in), NNASM_OK);
    EXPECT_EQ(std::vector<float>(y, y + 4), run_once(copying, k)) << k;
  }
  void* where = nullptr;
  size_t n = 0;
  ASSERT_EQ(nnasm_instance_tensor_data(in, "y", &where, &n), NNASM_OK);
  EXPECT_EQ(where, static_cast<void*>(y));
  EXPECT_EQ(nnasm_instance_bind(in, "x", reinterpret_cast<char*>(x) + 4, 60), NNASM_ERR_SIZE_MISMATCH);
  EXPECT_EQ(nnasm_instance_bind(in, "x", reinterpret_cast<char*>(x) + 4, 64), NNASM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(nnasm_last_error()).find("64-byte aligned"), std::string::npos) << nnasm_last_error();
  EXPECT_EQ(nnasm_instance_bind(in, "nope", x, sizeof x), NNASM_ERR_NOT_FOUND);
  // Unbound, the instance's own buffers are back: set_input/get_output work as before.
  ASSERT_EQ(nnasm_instance_bind(in, "x", nullptr, 0), NNASM_OK);
  ASSERT_EQ(nnasm_instance_bind(in, "y", nullptr, 0), NNASM_OK);
  std::fill(std::begin(y), std::end(y), -1.f);
  EXPECT_EQ(run_once(in, 7), run_once(copying, 7));
  EXPECT_EQ(y[0], -1.f);
  nnasm_instance_free(in);
  nnasm_instance_free(copying);
}

// Many instances on many threads, thousands of runs: every output bitwise equal to what one
// instance on one thread computes for the same input.
TEST(CApi, InstancesOnManyThreadsMatchOneThreadBitwise) {
  Model model;
  constexpr int kThreads = 4, kPerThread = 4, kRuns = 600, kInputs = 17;
  std::vector<std::vector<float>> expected(kInputs);
  {
    nnasm_instance* in = nullptr;
    ASSERT_EQ(nnasm_instance_create(model.m, &in), NNASM_OK);
    for (int k = 0; k < kInputs; ++k) expected[k] = run_once(in, k);
    nnasm_instance_free(in);
  }
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      nnasm_instance* ins[kPerThread] = {};
      for (auto& in : ins)
        if (nnasm_instance_create(model.m, &in) != NNASM_OK) ++mismatches[t];
      for (int r = 0; r < kRuns; ++r) {
        nnasm_instance* in = ins[r % kPerThread];
        const int k = (r * 7 + t) % kInputs;
        float x[6], y[4];
        input_for(k, x);
        nnasm_instance_set_input(in, "x", x, sizeof x);
        nnasm_instance_run(in);
        nnasm_instance_get_output(in, "y", y, sizeof y);
        if (std::memcmp(y, expected[k].data(), sizeof y) != 0) ++mismatches[t];
      }
      for (auto* in : ins) nnasm_instance_free(in);
    });
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

// A host allocator that counts, and a host job system that runs tasks in order and counts jobs.
struct HostCounts {
  std::atomic<long> allocs{0}, frees{0}, jobs{0};
};
void* host_alloc(void* user, size_t bytes, size_t alignment) {
  ++static_cast<HostCounts*>(user)->allocs;
  return std::aligned_alloc(alignment, (bytes + alignment - 1) / alignment * alignment);
}
void host_free(void* user, void* p) {
  ++static_cast<HostCounts*>(user)->frees;
  std::free(p);
}
void host_parallel_for(void* user, int n, void (*fn)(void*, int), void* ctx) {
  ++static_cast<HostCounts*>(user)->jobs;
  for (int t = n - 1; t >= 0; --t) fn(ctx, t);  // any order must do: each task owns its slice
}

TEST(CApi, HostAllocatorAndJobSystem) {
  // Big enough that the 1024-wide layer splits its columns into parts when threads > 1.
  const char listing[] =
      "input %x : f32[1,1024]\nparam @w : f32[1024,1024] init=he_normal\nparam @b : f32[1024] init=zeros\n"
      "output %y\n\nforward:\n  LINEAR %x, @w, @b -> %y  act=relu\n";
  HostCounts counts;
  nnasm_model_options o;
  nnasm_model_options_init(&o);
  o.alloc = host_alloc;
  o.free = host_free;
  o.alloc_user = &counts;
  o.threads = 2;
  o.parallel_for = host_parallel_for;
  o.parallel_user = &counts;
  nnasm_model *m = nullptr, *plain = nullptr;
  ASSERT_EQ(nnasm_model_load_memory(listing, sizeof listing - 1, &o, &m), NNASM_OK) << nnasm_last_error();
  ASSERT_EQ(nnasm_model_load_memory(listing, sizeof listing - 1, nullptr, &plain), NNASM_OK);
  nnasm_instance *in = nullptr, *ref = nullptr;
  ASSERT_EQ(nnasm_instance_create(m, &in), NNASM_OK);
  ASSERT_EQ(nnasm_instance_create(plain, &ref), NNASM_OK);
  const long allocs_before_runs = counts.allocs;
  EXPECT_GE(allocs_before_runs, 4);  // w, b, x, y at least, and the instance's block
  std::vector<float> x(1024), y(1024), y_ref(1024);
  for (int i = 0; i < 1024; ++i) x[i] = std::sin(0.01f * i);
  for (int r = 0; r < 3; ++r) {
    ASSERT_EQ(nnasm_instance_set_input(in, "x", x.data(), 4096), NNASM_OK);
    ASSERT_EQ(nnasm_instance_run(in), NNASM_OK);
  }
  EXPECT_EQ(counts.allocs, allocs_before_runs);  // runs allocate nothing through the host either
  // Only generated kernels split into parts (NNASM_ISA=ref and NNASM_JIT=0 run them whole).
  if (nnasm::jit_config_from_env().isa() != nnasm::Isa::REF) {
    EXPECT_GE(counts.jobs, 3);  // the split layer ran on the host's job system
  }
  ASSERT_EQ(nnasm_instance_get_output(in, "y", y.data(), 4096), NNASM_OK);
  ASSERT_EQ(nnasm_instance_set_input(ref, "x", x.data(), 4096), NNASM_OK);
  ASSERT_EQ(nnasm_instance_run(ref), NNASM_OK);
  ASSERT_EQ(nnasm_instance_get_output(ref, "y", y_ref.data(), 4096), NNASM_OK);
  EXPECT_EQ(y, y_ref);  // bitwise the same as one thread on the C heap
  nnasm_instance_free(in);
  nnasm_instance_free(ref);
  nnasm_model_free(m);
  nnasm_model_free(plain);
  EXPECT_EQ(counts.frees, counts.allocs);  // everything given back
  nnasm_model_options_init(&o);
  o.alloc = host_alloc;
  EXPECT_EQ(nnasm_model_load_memory(listing, sizeof listing - 1, &o, &m), NNASM_ERR_INVALID_ARGUMENT);
}

// A sample's output does not depend on where in the batch it sits (full register tiles or the
// tail, first or last part of a split): batch 7 with the same sample at every position. At every
// ISA level, the reference kernels included (their GEMM sums each element of C in an order fixed
// by K alone: ops/linalg/gemm.cpp).
TEST(CApi, ASamplesOutputDoesNotDependOnItsBatchPosition) {
  const char listing[] =
      "input %x : f32[7,40]\nparam @w1 : f32[40,300] init=he_normal\nparam @b1 : f32[300] init=uniform low=-0.1 high=0.1\n"
      "param @w2 : f32[300,5] init=xavier_uniform\nparam @b2 : f32[5] init=zeros\noutput %y\n\nforward:\n"
      "  LINEAR %x, @w1, @b1 -> %h  act=relu\n  LINEAR %h, @w2, @b2 -> %z\n  SOFTMAX %z -> %y  axis=-1\n";
  for (int threads : {1, 2}) {
    nnasm_model_options o;
    nnasm_model_options_init(&o);
    o.threads = threads;
    nnasm_model* m = nullptr;
    ASSERT_EQ(nnasm_model_load_memory(listing, sizeof listing - 1, &o, &m), NNASM_OK) << nnasm_last_error();
    nnasm_instance* in = nullptr;
    ASSERT_EQ(nnasm_instance_create(m, &in), NNASM_OK);
    std::vector<float> first;
    for (int pos = 0; pos < 7; ++pos) {
      std::vector<float> x(7 * 40), y(7 * 5);
      for (int r = 0; r < 7; ++r)
        for (int i = 0; i < 40; ++i) x[r * 40 + i] = r == pos ? std::cos(0.3f * i) : std::sin(0.7f * (r + 1) * i);
      ASSERT_EQ(nnasm_instance_set_input(in, "x", x.data(), x.size() * 4), NNASM_OK);
      ASSERT_EQ(nnasm_instance_run(in), NNASM_OK);
      ASSERT_EQ(nnasm_instance_get_output(in, "y", y.data(), y.size() * 4), NNASM_OK);
      const std::vector<float> row(y.begin() + pos * 5, y.begin() + pos * 5 + 5);
      if (pos == 0) first = row;
      EXPECT_EQ(row, first) << "position " << pos << ", " << threads << " thread(s)";
    }
    nnasm_instance_free(in);
    nnasm_model_free(m);
  }
}

long resident_kib() {
  std::ifstream f("/proc/self/statm");
  long size = 0, resident = 0;
  f >> size >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

TEST(CApi, LoadingAndUnloadingAThousandTimesLeavesMemoryFlat) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // The sanitizers hold freed memory back (ASan's quarantine), so resident size is no measure
  // there; under ASan, LeakSanitizer checks at exit that nothing was leaked instead.
  GTEST_SKIP() << "resident memory is not meaningful under sanitizers";
#endif
  auto cycle = [] {
    nnasm_model* m = nullptr;
    ASSERT_EQ(nnasm_model_load_memory(kPolicy, sizeof kPolicy - 1, nullptr, &m), NNASM_OK);
    nnasm_instance* in = nullptr;
    ASSERT_EQ(nnasm_instance_create(m, &in), NNASM_OK);
    run_once(in, 0);
    nnasm_instance_free(in);
    nnasm_model_free(m);
  };
  for (int i = 0; i < 100; ++i) cycle();  // the allocator's pools reach their steady size
  const long before = resident_kib();
  for (int i = 0; i < 1000; ++i) cycle();
  const long grown = resident_kib() - before;
  // A leak of the model (params, code pages, instance) would be ≥ 8 KiB a cycle: 8 MB here.
  EXPECT_LT(grown, 1024) << "resident memory grew by " << grown << " KiB over 1000 load/unload cycles";
}

}  // namespace
