// Writes the generated part of the fuzz seed corpora (tests/fuzz/corpus/): training listings
// recorded with the shell (every optimizer, convolution, pooling, batch norm, dropout, losses),
// .npy files of both dtypes and several ranks written by npy_write (plus their 2.0 and 3.0
// header forms, and the int64 and bool files the reader narrows and widens), IDX files of every element type, plain and gzip-compressed, Myelin flow files
// of every version the reader knows (tests/flow_writer.h), and small ONNX models
// (tests/onnx/model_builder.h: an MLP, a CNN, PyTorch's shape subgraph, shape ops). The other seeds
// are copies of the repository's listings. Run from the repository root:
//   make build/fuzz/make_seeds && build/fuzz/make_seeds tests/fuzz/corpus
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "engine/optimizer.h"
#include "serialize/listing.h"
#include "serialize/npy.h"
#include "shell/shell.h"
#include "tests/flow_writer.h"
#include "tests/onnx/model_builder.h"

using namespace nnasm;

namespace {

bool write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
  return bool(f);
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Records `build` into a fresh program, makes it trainable with `opt` when `loss` is named, and
// writes its listing to the listing and exec corpora.
template <typename F>
bool listing_seed(const std::string& dir, const std::string& name, const OptimizerSpec* opt, F build) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  build(g);
  Status s = g.status();
  if (s && opt) s = make_trainable(p, p.find("loss"), *opt);
  if (!s) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(), s.message().c_str());
    return false;
  }
  const std::string text = program_print(p);
  return write_file(dir + "/listing/" + name + ".nnasm", text) && write_file(dir + "/exec/" + name + ".nnasm", text);
}

bool listings(const std::string& dir) {
  OptimizerSpec adam_clip = adam(1e-3);
  adam_clip.clip_norm = 1;
  OptimizerSpec sgd_cos = sgd(0.1, 0.9, true, 1e-4);
  sgd_cos.schedule.kind = LrSchedule::Kind::COSINE;
  sgd_cos.schedule.warmup = 2;
  sgd_cos.schedule.total = 10;
  OptimizerSpec rms = rmsprop(1e-2);
  OptimizerSpec aw = adamw(1e-3);
  bool ok = listing_seed(dir, "cnn_train", &adam_clip, [](Graph& g) {
    Var x = g.input("x", {2, 1, 6, 6});
    Var labels = g.input("labels", {2}, DType::I32);
    Conv2dOptions c;
    c.pad = {1, 1};
    Var h = max_pool2d(relu(batchnorm2d(conv2d(x, 3, {3, 3}, c))), {2, 2});
    Var logits = linear(flatten(dropout(h, 0.25f)), 4);
    g.output(logits, "logits");
    g.output(softmax_ce(logits, labels), "loss");
  });
  ok = ok && listing_seed(dir, "conv_misc_train", &sgd_cos, [](Graph& g) {
    Var x = g.input("x", {1, 2, 4, 4});
    Var t = g.input("t", {1, 4});
    Conv2dOptions c;
    c.stride = {2, 2};
    c.dilation = {1, 1};
    c.groups = 2;
    c.act = Activation::LEAKYRELU;
    c.act_alpha = 0.1f;
    Var h = conv2d(upsample_nearest(x, {2, 2}), 4, {3, 3}, c);
    h = avg_pool2d(pad(h, {0, 0, 1, 1, 0, 0, 1, 1}), {2, 2}, {1, 1}, {0, 0}, false);
    Var y = reshape(global_avg_pool(h), {1, 4});
    g.output(mse(tanh(y), t), "loss");
  });
  ok = ok && listing_seed(dir, "mlp_rmsprop", &rms, [](Graph& g) {
    Var x = g.input("x", {3, 5});
    Var t = g.input("t", {3, 2});
    LinearOptions l;
    l.act = Activation::TANH;
    Var h = linear(elu(linear(x, 4)), 3, l);
    Var y = linear(swish(sigmoid(h)) + square(h), 2);
    g.output(bce_logits(y, t), "loss");
  });
  ok = ok && listing_seed(dir, "mlp_adamw", &aw, [](Graph& g) {
    Var x = g.input("x", {2, 3});
    Var labels = g.input("labels", {2}, DType::I32);
    Var h = clipped_relu(linear(x, 4), 3) - leakyrelu(linear(x * 2.f, 4), 0.2f) + abs(reduce_mean(x, -1, true));
    Var y = concat({h, logsoftmax(h)}, 1);
    g.output(softmax_ce(slice(y, 1, 0, 3), labels), "loss");
  });
  ok = ok && listing_seed(dir, "shape_ops", nullptr, [](Graph& g) {
    Var x = g.input("x", {2, 3});
    Var y = transpose(expand(reshape(x, {2, 1, 3}), {2, 2, 3}), {2, 0, 1});
    Var z = calc({reduce_max(y, 0), reduce_sum(y, 2, true)}, "add(mul(%0,%1),exp(neg(%0)),beta=-1)");
    Var one = fill(z, 1.f);
    g.output(softmax(maximum(sqrt(abs(z)), minimum(z, one * 0.5f)) / (log(square(z) + one) + one), 0), "y");
    g.output(step(copy(x)), "mask");
  });
  return ok;
}

// npy_write's 1.0 file with its header length widened to 4 bytes, as version `major`.0.
std::string npy_widen(const std::string& v1, char major) {
  const uint16_t len = uint8_t(v1[8]) | uint16_t(uint8_t(v1[9])) << 8;
  std::string out = v1.substr(0, 6) + std::string{major, 0};
  const uint32_t len4 = len;
  for (int i = 0; i < 4; ++i) out += char(len4 >> (8 * i));
  return out + v1.substr(10);
}

bool npys(const std::string& dir) {
  struct Seed {
    const char* name;
    TensorType type;
  };
  const Seed seeds[] = {
      {"f32_scalar", {DType::F32, {}}},        {"f32_3", {DType::F32, {3}}},
      {"f32_2x3", {DType::F32, {2, 3}}},       {"i32_4", {DType::I32, {4}}},
      {"i32_2x1x3", {DType::I32, {2, 1, 3}}},  {"f32_1x2", {DType::F32, {1, 2}}},
      {"f32_1x1x1x1x1x2", {DType::F32, {1, 1, 1, 1, 1, 2}}},
  };
  const float f[] = {1.5f, -2, 0, 3.25f, 1e-7f, -1e30f};
  const int32_t i[] = {0, -1, 2147483647, -2147483647 - 1, 7, 9};
  for (const Seed& s : seeds) {
    const std::string path = dir + "/npy/" + s.name + ".npy";
    const void* data = s.type.dtype == DType::F32 ? static_cast<const void*>(f) : i;
    Status st = npy_write(path, s.type, data);
    if (!st) {
      std::fprintf(stderr, "%s\n", st.message().c_str());
      return false;
    }
  }
  const std::string v1 = read_file(dir + "/npy/f32_2x3.npy");
  // int64 and bool, which npy_write never writes: a 1.0 file as NumPy pads it.
  auto numpy_file = [](const std::string& dict, const std::string& data) {
    std::string h = dict + std::string((64 - (10 + dict.size() + 1) % 64) % 64, ' ') + "\n";
    return std::string("\x93NUMPY\x01\x00", 8) + char(h.size() & 0xff) + char(h.size() >> 8) + h + data;
  };
  std::string i64;
  for (int64_t v : {int64_t(0), int64_t(-7), int64_t(2147483647), int64_t(-2147483647 - 1)})
    for (int k = 0; k < 8; ++k) i64 += char(uint64_t(v) >> (8 * k));
  return write_file(dir + "/npy/f32_2x3_v2.npy", npy_widen(v1, 2)) &&
         write_file(dir + "/npy/i32_4_v3.npy", npy_widen(read_file(dir + "/npy/i32_4.npy"), 3)) &&
         write_file(dir + "/npy/i64_2x2.npy", numpy_file("{'descr': '<i8', 'fortran_order': False, 'shape': (2, 2), }", i64)) &&
         write_file(dir + "/npy/b1_3.npy",
                    numpy_file("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", std::string("\x01\x00\x01", 3)));
}

void put_be32(std::string* s, uint32_t v) {
  for (int k = 3; k >= 0; --k) *s += char(v >> (8 * k));
}

std::string idx_bytes(uint8_t type, const std::vector<uint32_t>& dims, int elem_size) {
  std::string s{0, 0, char(type), char(dims.size())};
  uint64_t n = 1;
  for (uint32_t d : dims) {
    put_be32(&s, d);
    n *= d;
  }
  for (uint64_t k = 0; k < n * elem_size; ++k) s += char(k * 37 + 11);
  return s;
}

bool write_gzip(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb9");
  if (!f) return false;
  const bool ok = gzwrite(f, bytes.data(), unsigned(bytes.size())) == int(bytes.size());
  return gzclose(f) == Z_OK && ok;
}

bool idxs(const std::string& dir) {
  const std::string u8 = idx_bytes(0x08, {3, 2, 2}, 1), i32 = idx_bytes(0x0C, {4}, 4),
                    f32 = idx_bytes(0x0D, {2, 3}, 4), labels = idx_bytes(0x08, {5}, 1);
  return write_file(dir + "/idx/u8_3x2x2.idx", u8) && write_file(dir + "/idx/i32_4.idx", i32) &&
         write_file(dir + "/idx/f32_2x3.idx", f32) && write_file(dir + "/idx/labels_5.idx", labels) &&
         write_gzip(dir + "/idx/u8_3x2x2.idx.gz", u8) && write_gzip(dir + "/idx/f32_2x3.idx.gz", f32);
}

bool flows(const std::string& dir) {
  const std::vector<float> w0(20, 0.5f), b0(5, 0.1f), w1(15, -0.25f), b1(3, 1), table = {1, -2, 3, 4};
  bool ok = true;
  for (int v = 3; v <= 6; ++v) {
    ok = ok && write_file(dir + "/flow/mlp_v" + std::to_string(v) + ".flow", flow_bytes(flow_mlp_spec(v, w0, b0, w1, b1)));
    ok = ok && write_file(dir + "/flow/shapes_v" + std::to_string(v) + ".flow", flow_bytes(flow_shapes_spec(v, table)));
  }
  return ok;
}

bool onnxs(const std::string& dir) {
  using B = OnnxModelBuilder;
  const std::vector<float> w(12, 0.25f);
  B mlp(13);
  mlp.input("x", {2, 4}).output("y").initializer("w", {3, 4}, w).initializer("b", {3}, {0.1f, 0.2f, 0.3f});
  B::attr(mlp.node("Gemm", {"x", "w", "b"}, {"h"}), "transB", int64_t(1));
  mlp.node("Relu", {"h"}, {"r"});
  B::attr(mlp.node("Softmax", {"r"}, {"y"}), "axis", int64_t(1));

  B cnn(11);
  cnn.input("x", {1, 1, 4, 4}).output("y").initializer("w", {2, 1, 2, 2}, std::vector<float>(8, 0.5f));
  for (const char* s : {"g", "b", "m", "v"}) cnn.initializer(s, {2}, {1, 0.5f});
  B::attr(cnn.node("Conv", {"x", "w"}, {"c"}), "pads", std::vector<int64_t>{0, 0, 1, 1});
  cnn.node("BatchNormalization", {"c", "g", "b", "m", "v"}, {"n"});
  B::attr(cnn.node("MaxPool", {"n"}, {"p"}), "kernel_shape", std::vector<int64_t>{2, 2});
  cnn.node("GlobalAveragePool", {"p"}, {"y"});

  B ops(13);
  ops.input("x", {1, 2, 3, 4}).output("y").output("z");
  ops.initializer_i64("pads", {8}, {0, 0, 1, 0, 0, 0, 0, 1}).initializer_i64("starts", {1}, {1});
  ops.initializer_i64("ends", {1}, {3}).initializer_i64("axes", {1}, {2});
  ops.node("Pad", {"x", "pads"}, {"p"});
  ops.node("Slice", {"p", "starts", "ends", "axes"}, {"s"});
  B::attr(ops.node("Transpose", {"s"}, {"t"}), "perm", std::vector<int64_t>{0, 2, 1, 3});
  B::attr(ops.node("ReduceMean", {"t"}, {"y"}), "axes", std::vector<int64_t>{1, -1});
  ops.node("Clip", {"x"}, {"z"});

  return write_file(dir + "/onnx/mlp.onnx", mlp.bytes()) && write_file(dir + "/onnx/cnn.onnx", cnn.bytes()) &&
         write_file(dir + "/onnx/shape_subgraph.onnx", pytorch_view_model().bytes()) && write_file(dir + "/onnx/shape_ops.onnx", ops.bytes());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds CORPUS_DIR (with listing/ exec/ npy/ idx/ flow/ onnx/ in it)\n");
    return 2;
  }
  const std::string dir = argv[1];
  return listings(dir) && npys(dir) && idxs(dir) && flows(dir) && onnxs(dir) ? 0 : 1;
}
