// Model files (.nnm): save → load → save is byte-identical, training resumes bit for bit, saves
// are atomic, the committed golden file still loads, and a corruption matrix (truncation at every
// byte, a flipped bit in every byte, forged sizes, counts, offsets and overlaps with valid
// checksums) is rejected every time with an error naming the part and the byte offset.
#include <cmath>
#include <cstring>
#include <memory>

#include <gtest/gtest.h>

#include "engine/executor.h"
#include "engine/optimizer.h"
#include "serialize/listing.h"
#include "serialize/model_file.h"
#include "serialize/model_frame.h"
#include "serialize/section_codec.h"
#include "shell/shell.h"
#include "tests/temp_dir_test.h"

namespace nnasm {
namespace {

constexpr int64_t kBatch = 4, kIn = 6, kHidden = 5, kClasses = 3;

// A small classifier with dropout (so resuming must continue the random stream), trained by Adam
// (so the file must carry optimizer state and the step counter).
void record_classifier(Program& p) {
  Graph g(p);
  Var x = g.input("x", {kBatch, kIn});
  Var labels = g.input("labels", {kBatch}, DType::I32);
  Var logits = linear(dropout(relu(linear(x, kHidden)), 0.25f), kClasses);
  g.output(logits, "logits");
  g.output(softmax_ce(logits, labels), "loss");
  ASSERT_TRUE(g.status()) << g.status().message();
  ASSERT_TRUE(make_trainable(p, p.find("loss"), adam(0.05)));
}

void bind_batch(Executor& ex, int step) {
  float* x = ex.tensor("x")->f32();
  for (int i = 0; i < kBatch * kIn; ++i) x[i] = std::sin(0.37f * i + step);
  int32_t* y = ex.tensor("labels")->i32();
  for (int i = 0; i < kBatch; ++i) y[i] = (i + step) % kClasses;
}

void train(Executor& ex, int first_step, int steps) {
  for (int s = first_step; s < first_step + steps; ++s) {
    bind_batch(ex, s);
    ex.train_step();
  }
}

std::vector<float> values(const Program& p, const std::string& name) {
  const Tensor& t = Context::of(p)->at(p.find(name));
  return std::vector<float>(t.f32(), t.f32() + t.numel());
}

struct Loaded {
  Context ctx;
  Program p{ctx};
  ModelMeta meta;
  Status status;
  explicit Loaded(std::string_view bytes, const ModelLimits& lim = {}) {
    status = model_decode(bytes, "m.nnm", &p, &meta, lim);
  }
};

TEST(ModelFile, SaveLoadSaveIsByteIdentical) {
  Context ctx(7);
  Program p(ctx);
  record_classifier(p);
  auto ex = std::move(Executor::prepare(p).value());
  train(*ex, 0, 3);
  const std::string first = model_encode(p, {ex->run_index()});
  Loaded m(first);
  ASSERT_TRUE(m.status) << m.status.message();
  EXPECT_EQ(m.meta.run_index, 3u);
  EXPECT_EQ(m.meta.seed, 7u);
  EXPECT_TRUE(m.meta.same_opcode_table);
  EXPECT_EQ(m.meta.producer.rfind("nnasm ", 0), 0u) << m.meta.producer;
  EXPECT_EQ(program_print(m.p), program_print(p));
  EXPECT_EQ(model_encode(m.p, {m.meta.run_index}), first);
  EXPECT_EQ(values(m.p, "opt.t"), values(p, "opt.t"));  // the step counter
}

TEST(ModelFile, TrainingResumesBitForBit) {
  Context ctx_a(11);
  Program a(ctx_a);
  record_classifier(a);
  auto ex_a = std::move(Executor::prepare(a).value());
  train(*ex_a, 0, 6);

  Context ctx_b(11);
  Program b(ctx_b);
  record_classifier(b);
  auto ex_b = std::move(Executor::prepare(b).value());
  train(*ex_b, 0, 3);
  const std::string saved = model_encode(b, {ex_b->run_index()});
  ex_b.reset();

  Loaded m(saved);
  ASSERT_TRUE(m.status) << m.status.message();
  auto ex_m = std::move(Executor::prepare(m.p).value());
  ex_m->set_run_index(m.meta.run_index);
  train(*ex_m, 3, 3);
  int compared = 0;
  for (TensorId id : a.tensors()) {
    const TensorDesc& d = a.desc(id);
    if (d.role != Role::PARAM && d.role != Role::STATE) continue;
    EXPECT_EQ(values(m.p, d.name), values(a, d.name)) << d.name;
    ++compared;
  }
  EXPECT_GE(compared, 8);  // 4 params, their moments, the step counter
  EXPECT_EQ(values(m.p, "loss"), values(a, "loss"));
}

TEST(ModelFile, ParamsNeverInitializedAreStoredAsPrepareWouldInitializeThem) {
  Context ctx(5);
  Program p(ctx);
  record_classifier(p);
  const std::string bytes = model_encode(p);  // before prepare: nothing initialized yet
  for (TensorId id : p.tensors()) EXPECT_TRUE(ctx.at(id).data.empty()) << p.desc(id).name;  // p unchanged
  Loaded m(bytes);
  ASSERT_TRUE(m.status) << m.status.message();
  EXPECT_EQ(m.meta.tensors_without_values, 0u);
  EXPECT_GE(m.meta.tensors_with_values, 9u);  // 4 params, 4 moments, the step counter
  auto ex_p = std::move(Executor::prepare(p).value());
  int compared = 0;
  for (TensorId id : p.tensors())
    if (p.desc(id).role == Role::PARAM) {
      EXPECT_EQ(values(m.p, p.desc(id).name), values(p, p.desc(id).name)) << p.desc(id).name;
      ++compared;
    }
  EXPECT_EQ(compared, 4);
  EXPECT_EQ(model_encode(p), bytes);  // the same values, now from storage
}

class ModelFileOnDisk : public TempDirTest {};

TEST_F(ModelFileOnDisk, SaveReplacesAtomicallyAndLeavesNoTemporaries) {
  Context ctx;
  Program p(ctx);
  record_classifier(p);
  const std::string target = path("m.nnm");
  ASSERT_TRUE(model_save(p, target));
  const std::string before = get("m.nnm");
  auto ex = std::move(Executor::prepare(p).value());
  train(*ex, 0, 1);
  ASSERT_TRUE(model_save(p, target, {ex->run_index()}));
  EXPECT_NE(get("m.nnm"), before);
  EXPECT_EQ(entries(), std::vector<std::string>{"m.nnm"});
  Context ctx2;
  Program q(ctx2);
  ASSERT_TRUE(model_load(target, &q));

  const Status s = model_save(p, path("no/such/dir/m.nnm"));
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("no/such/dir/m.nnm"), std::string::npos) << s.message();
  EXPECT_EQ(entries(), std::vector<std::string>{"m.nnm"});
  EXPECT_EQ(get("m.nnm"), model_encode(p, {ex->run_index()}));
}

TEST_F(ModelFileOnDisk, UnreadableAndOversizedFilesAreRefusedBeforeReading) {
  Context ctx;
  Program p(ctx);
  Status s = model_load(path("missing.nnm"), &p);
  EXPECT_NE(s.message().find("cannot read"), std::string::npos) << s.message();
  put("big.nnm", std::string(4096, 'x'));
  ModelLimits lim;
  lim.max_file_bytes = 1000;
  s = model_load(path("big.nnm"), &p, nullptr, lim);
  EXPECT_NE(s.message().find("over the limit of 1000"), std::string::npos) << s.message();
}

// A device is refused before a byte of it is read: /dev/zero never ends, and was read up to the
// limit (4 GiB by default) only to be refused then. A directory is refused the same way.
TEST_F(ModelFileOnDisk, DevicesAndDirectoriesAreRefusedUnread) {
  for (const std::string& p : {std::string("/dev/zero"), dir_}) {
    std::string bytes = "untouched";
    Status s = read_file_limited(p, 1 << 20, &bytes);
    ASSERT_FALSE(s) << p;
    EXPECT_EQ(s.message(), p + ": error: cannot read: not a regular file");
    EXPECT_EQ(bytes, "untouched");
  }
  Context ctx;
  Program prog(ctx);
  Status s = model_load("/dev/zero", &prog);
  EXPECT_EQ(s.message(), "/dev/zero: error: cannot read: not a regular file");
}

// tests/golden/tiny.nnm was written by the first version of the format (NNASM_UPDATE_GOLDEN=1
// rewrites it): a 3→4 ReLU layer with weights w[i][j] = 0.25·(i − j), b[j] = 0.1·j, and Adam state.
// Later versions must keep loading it and computing the same function.
void record_golden(Program& p) {
  Graph g(p);
  Var x = g.input("x", {2, 3});
  Var w = g.param("w", {3, 4});
  Var b = g.param("b", {4});
  Var y = relu(linear(x, w, b));
  g.output(y, "y");
  g.output(reduce_mean(reduce_mean(square(y))), "loss");
  ASSERT_TRUE(g.status()) << g.status().message();
  ASSERT_TRUE(make_trainable(p, p.find("loss"), adam(0.01)));
}

float golden_w(int i, int j) { return 0.25f * (i - j); }

TEST(ModelFile, GoldenFileOfFormat1Loads) {
  const std::string golden = std::string("tests/golden/tiny.nnm");
  if (std::getenv("NNASM_UPDATE_GOLDEN")) {
    Context ctx(3);
    Program p(ctx);
    record_golden(p);
    auto ex = std::move(Executor::prepare(p).value());
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j) ex->tensor("w")->f32()[i * 4 + j] = golden_w(i, j);
    for (int j = 0; j < 4; ++j) ex->tensor("b")->f32()[j] = 0.1f * j;
    ASSERT_TRUE(model_save(p, golden));
  }
  Context ctx;
  Program p(ctx);
  ModelMeta meta;
  const Status s = model_load(golden, &p, &meta);
  ASSERT_TRUE(s) << s.message();
  EXPECT_EQ(meta.major, 1);
  EXPECT_EQ(meta.seed, 3u);
  auto ex = std::move(Executor::prepare(p).value());
  const float x[2][3] = {{1, -2, 0.5f}, {0.25f, 3, -1}};
  std::memcpy(ex->tensor("x")->f32(), x, sizeof x);
  ex->run();
  for (int r = 0; r < 2; ++r)
    for (int j = 0; j < 4; ++j) {
      float acc = 0.1f * j;
      for (int i = 0; i < 3; ++i) acc += x[r][i] * golden_w(i, j);
      EXPECT_FLOAT_EQ(ex->tensor("y")->f32()[r * 4 + j], std::max(acc, 0.f)) << r << "," << j;
    }
  EXPECT_NE(p.find("w.m"), NO_TENSOR);  // the optimizer's state came along
}

// --- The corruption matrix -------------------------------------------------------------------

// A small trained model's file image and where its sections are.
struct Image {
  std::string bytes;
  uint64_t prog = 0, data = 0;  // section offsets
  Image() {
    Context ctx(1);
    Program p(ctx);
    record_classifier(p);
    auto ex = std::move(Executor::prepare(p).value());
    train(*ex, 0, 1);
    bytes = model_encode(p, {ex->run_index()});
    prog = load_le(&bytes[64 + 8], 8);
    data = load_le(&bytes[64 + 32 + 8], 8);
  }
  void set(uint64_t at, uint64_t v, size_t n) { store_le(&bytes[at], v, n); }
  std::string resealed() const {
    std::string b = bytes;
    reseal_model_image(&b);
    return b;
  }
};

// Decodes `bytes`, expecting an error containing `part` and `what`, and naming a byte offset.
void expect_rejected(std::string_view bytes, const std::string& what, const std::string& context) {
  Loaded m(bytes);
  ASSERT_FALSE(m.status) << context;
  const std::string& msg = m.status.message();
  EXPECT_EQ(msg.rfind("m.nnm: byte ", 0), 0u) << context << ": " << msg;
  EXPECT_NE(msg.find(what), std::string::npos) << context << ": " << msg;
}

TEST(ModelFileCorruption, TruncationAtEveryByteIsRejected) {
  const Image img;
  ASSERT_TRUE(Loaded(img.bytes).status);
  for (size_t n = 0; n < img.bytes.size(); ++n) {
    Loaded m(std::string_view(img.bytes).substr(0, n));
    ASSERT_FALSE(m.status) << n;
    EXPECT_EQ(m.status.message().rfind("m.nnm: byte ", 0), 0u) << n << ": " << m.status.message();
  }
}

TEST(ModelFileCorruption, AFlippedBitAnywhereIsRejected) {
  const Image img;
  for (size_t i = 0; i < img.bytes.size(); ++i)
    for (int bit = 0; bit < (i < MODEL_HEADER_BYTES ? 8 : 1); ++bit) {
      std::string b = img.bytes;
      b[i] = static_cast<char>(b[i] ^ (1 << (i < MODEL_HEADER_BYTES ? bit : i % 8)));
      Loaded m(b);
      ASSERT_FALSE(m.status) << "byte " << i << " bit " << bit;
      EXPECT_NE(m.status.message().find(": byte "), std::string::npos) << m.status.message();
    }
}

TEST(ModelFileCorruption, DamageInsideASectionNamesIt) {
  Image img;
  img.bytes[img.data + 20] ^= 4;
  expect_rejected(img.bytes, "entry 1 (DATA): checksum mismatch", "flipped data byte");
  img = Image();
  img.bytes[img.prog + 20] ^= 4;
  expect_rejected(img.bytes, "entry 0 (PROG): checksum mismatch", "flipped listing byte");
}

TEST(ModelFileCorruption, ForgedHeadersWithValidChecksumsAreRejected) {
  struct Case {
    const char* name;
    uint64_t at;
    uint64_t value;
    size_t bytes;
    const char* expect;
  };
  const Image base;
  const Case cases[] = {
      {"newer reader needed", 12, 2, 2, "written by a newer nnasm"},
      {"file size too large", 16, uint64_t(1) << 62, 8, "truncated"},
      {"file size too small", 16, 100, 8, "trailing bytes"},
      {"section count huge", 32, 0xffffffff, 4, "more than the limit"},
      {"table past the end", 40, base.bytes.size() - 24, 8, "does not fit in the file"},
      {"table offset huge", 40, ~uint64_t(0) - 7, 8, "does not fit in the file"},
      {"section offset huge", 64 + 8, ~uint64_t(0) - 63, 8, "run past the end"},
      {"section size huge", 64 + 16, ~uint64_t(0), 8, "run past the end"},
      {"section size 2^63", 64 + 32 + 16, uint64_t(1) << 63, 8, "run past the end"},
      {"sections overlap", 64 + 32 + 8, base.prog, 8, "overlaps the previous section"},
      {"section inside the table", 64 + 8, 64, 8, "overlaps the header and section table"},
      {"misaligned section", 64 + 32 + 8, base.data + 1, 8, "not a multiple of 64"},
      {"unknown required section", 64 + 32, 0x5a5a5a5a, 4, "required section this reader does not know"},
      {"unknown flags", 64 + 4, 6, 4, "unknown flags"},
      {"reserved header field", 48, 1, 8, "reserved fields"},
      {"DATA archive preamble", base.data, 0, 1, "archive preamble"},
      {"DATA tensor count huge", base.data + 1, ~uint64_t(0), 8, "over the limit"},
      {"DATA tensor count past the end", base.data + 1, 100000, 8, "do not fit"},
      {"DATA name length huge", base.data + 9, uint64_t(1) << 40, 8, "over the limit"},
      {"PROG producer length huge", base.prog + 1, uint64_t(1) << 40, 8, "over the limit"},
      {"PROG producer length past the end", base.prog + 1, 4000, 8, "do not fit"},
  };
  for (const Case& c : cases) {
    Image img;
    img.set(c.at, c.value, c.bytes);
    expect_rejected(img.resealed(), c.expect, c.name);
  }
}

// Offsets of the fields after PROG's producer string.
uint64_t listing_length_at(const Image& img) { return img.prog + 1 + 8 + load_le(&img.bytes[img.prog + 1], 8) + 16; }

TEST(ModelFileCorruption, ForgedContentsWithValidChecksumsAreRejected) {
  {
    Image img;
    img.set(listing_length_at(img), uint64_t(1) << 60, 8);
    expect_rejected(img.resealed(), "listing: 1152921504606846976 is over the limit", "listing length");
  }
  {
    Image img;  // a listing that no longer parses, same length
    const uint64_t at = listing_length_at(img) + 8;
    std::memcpy(&img.bytes[at], "inputz", 6);
    expect_rejected(img.resealed(), "section PROG: the program's listing does not load: listing:1:1: error:",
                    "listing text");
  }
  {
    Image img;  // the first record's role
    const uint64_t name_len = load_le(&img.bytes[img.data + 9], 8);
    img.set(img.data + 17 + name_len, 0, 1);
    expect_rejected(img.resealed(), "role 0, the listing declares a", "role");
    img = Image();
    img.set(img.data + 17 + name_len + 1, 9, 1);  // dtype: no type has code 9
    expect_rejected(img.resealed(), fmt::format("byte {}: error: section DATA: tensor 0", img.data + 17 + name_len + 1),
                    "dtype");
    expect_rejected(img.resealed(), "dtype byte 9 is no element type (0 f32, 1 i32, 2 bf16, 3 i8, 4 u8)", "dtype");
    img = Image();
    img.set(img.data + 17 + name_len + 1, 3, 1);  // dtype: i8, which the listing does not declare
    expect_rejected(img.resealed(), "type i8[", "dtype i8");
    img = Image();
    img.set(img.data + 17 + name_len + 2, 9, 1);  // rank
    expect_rejected(img.resealed(), "rank 9 is over", "rank");
    img = Image();
    img.set(img.data + 17 + name_len + 3, 1000000, 8);  // first dimension
    expect_rejected(img.resealed(), "the listing declares f32", "dimension");
  }
  {
    Image img;  // a name the listing does not have
    img.bytes[img.data + 17] = '#';
    expect_rejected(img.resealed(), "not in the program's listing", "name");
  }
}

// A file of a few hundred bytes whose listing declares a param of `rows`×`cols` (stored "not
// initialized", which the format allows).
std::string huge_param_file(int64_t rows, int64_t cols) {
  SectionWriter prog;
  prog.string("hand-made");
  prog.u64(1);
  prog.u64(0);
  prog.string(fmt::format("param @w : f32[{},{}]\ninput %x : f32[1,{}]\noutput %y\n\nforward:\n  MATMUL %x, @w -> %y\n",
                          rows, cols, rows));
  SectionWriter data;
  data.u64(1);
  data.string("w");
  data.u8(static_cast<uint8_t>(Role::PARAM));
  data.u8(0);
  data.u8(2);
  data.i64(rows);
  data.i64(cols);
  data.u8(0);
  std::vector<SectionOut> sections(2);
  std::memcpy(sections[0].tag, "PROG", 4);
  std::memcpy(sections[1].tag, "DATA", 4);
  sections[0].bytes = prog.take();
  sections[1].bytes = data.take();
  return frame_sections(sections, opcode_table_hash());
}

// Prepare would allocate the param, so loading refuses a program over the limit: a 2 GiB one
// under a lowered limit, a 16 GiB one under the default (isa/program_size.h).
TEST(ModelFileCorruption, AHugeProgramIsRefusedBeforeAllocation) {
  ModelLimits lim;
  lim.max_program_bytes = uint64_t(1) << 30;
  Context ctx;
  Program q(ctx);
  const Status s = model_decode(huge_param_file(32768, 16384), "m.nnm", &q, nullptr, lim);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("over the limit of 1073741824"), std::string::npos) << s.message();
  Context ctx2;
  Program big(ctx2);
  const Status fine = model_decode(huge_param_file(65536, 65536), "m.nnm", &big);
  ASSERT_FALSE(fine) << "a 16 GiB program passed the default limit";
  EXPECT_NE(fine.message().find("(the largest, @w f32[65536,65536], needs 17179869184)"), std::string::npos)
      << fine.message();
}

TEST(ModelFileCorruption, NotAModelFile) {
  expect_rejected("input %x : f32[1]\n", "not an nnasm model file", "a listing");
  expect_rejected("", "not an nnasm model file", "empty");
}

}  // namespace
}  // namespace nnasm
