// The C API's growable ABI (api/nnasm.h): struct_size read and written only as far as the caller's
// header knew, sizes and versions the library does not know refused by name, version-1 options
// still read (tests/abi/client_v1.c, a whole host built against the version-1 header, run by make
// test), enums of a fixed size; the log's levels, the model metadata, and ONNX import through
// api/nnasm_import.h.
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "api/nnasm.h"
#include "api/nnasm_import.h"
#include "jit/cpu.h"
#include "serialize/model_file.h"
#include "serialize/npy.h"
#include "tests/temp_dir_test.h"

namespace {

static_assert(sizeof(nnasm_status) == 4 && sizeof(nnasm_dtype) == 4 && sizeof(nnasm_isa) == 4 &&
                  sizeof(nnasm_log_level) == 4,
              "enums that cross the ABI are int32_t whatever the compiler");
static_assert(offsetof(nnasm_model_options, struct_size) == 0 && offsetof(nnasm_tensor_info, struct_size) == 0 &&
                  offsetof(nnasm_model_metadata_info, struct_size) == 0,
              "struct_size leads every struct");

const char kListing[] =
    "input  %x : f32[1,6]\n"
    "param  @w : f32[6,4]  init=he_normal\n"
    "param  @b : f32[4]    init=zeros\n"
    "output %y\n"
    "\n"
    "forward:\n"
    "  LINEAR  %x, @w, @b -> %y  act=relu\n";

nnasm_model* load(const nnasm_model_options* o, nnasm_status want = NNASM_OK) {
  nnasm_model* m = nullptr;
  EXPECT_EQ(nnasm_model_load_memory(kListing, sizeof kListing - 1, o, &m), want) << nnasm_last_error();
  return m;
}

bool last_error_has(const std::string& part) { return std::string(nnasm_last_error()).find(part) != std::string::npos; }

TEST(CApiAbi, StatusNumbersNeverChange) {
  EXPECT_EQ(NNASM_OK, 0);
  EXPECT_EQ(NNASM_ERR_INVALID_ARGUMENT, 1);
  EXPECT_EQ(NNASM_ERR_BAD_MODEL, 4);
  EXPECT_EQ(NNASM_ERR_ABI, 7);
  EXPECT_EQ(NNASM_ERR_NOT_READY, 9);
  EXPECT_EQ(nnasm_abi_version(), 2u);
}

TEST(CApiAbi, AnInfoIsFilledOnlyAsFarAsItsStructSize) {
  nnasm_model* m = load(nullptr);
  ASSERT_NE(m, nullptr);
  nnasm_tensor_info info;
  std::memset(&info, 0xAB, sizeof info);
  info.struct_size = offsetof(nnasm_tensor_info, dims);  // an older header that stopped at rank
  ASSERT_EQ(nnasm_model_input_info(m, 0, &info), NNASM_OK) << nnasm_last_error();
  EXPECT_EQ(info.struct_size, offsetof(nnasm_tensor_info, dims));
  EXPECT_STREQ(info.name, "x");
  EXPECT_EQ(info.rank, 2);
  const unsigned char* tail = reinterpret_cast<const unsigned char*>(&info) + offsetof(nnasm_tensor_info, dims);
  for (size_t k = 0; k < sizeof info - offsetof(nnasm_tensor_info, dims); ++k) ASSERT_EQ(tail[k], 0xAB) << k;

  // A newer header's bigger struct: what this library knows, then zeros; struct_size says which.
  std::vector<unsigned char> big(sizeof info + 24, 0xCD);
  const uint32_t big_size = static_cast<uint32_t>(big.size());
  std::memcpy(big.data(), &big_size, sizeof big_size);
  ASSERT_EQ(nnasm_model_output_info(m, 0, reinterpret_cast<nnasm_tensor_info*>(big.data())), NNASM_OK);
  nnasm_tensor_info got;
  std::memcpy(&got, big.data(), sizeof got);
  EXPECT_EQ(got.struct_size, sizeof got);
  EXPECT_EQ(got.bytes, 16u);
  for (size_t k = sizeof info; k < big.size(); ++k) ASSERT_EQ(big[k], 0) << k;

  info.struct_size = 8;  // not even the name
  EXPECT_EQ(nnasm_model_input_info(m, 0, &info), NNASM_ERR_ABI);
  EXPECT_TRUE(last_error_has("tensor info: struct_size 8 is smaller")) << nnasm_last_error();
  info.struct_size = 100000;
  EXPECT_EQ(nnasm_model_input_info(m, 0, &info), NNASM_ERR_ABI);
  EXPECT_TRUE(last_error_has("uninitialized")) << nnasm_last_error();
  nnasm_model_free(m);
}

TEST(CApiAbi, OptionsOfAnUnknownSizeOrVersionAreRefused) {
  nnasm_model_options o;
  nnasm_model_options_init(&o);
  EXPECT_EQ(o.struct_size, sizeof o);
  EXPECT_EQ(o.log_level, NNASM_LOG_INFO);
  o.struct_size = 2;  // a version number where a size belongs
  load(&o, NNASM_ERR_ABI);
  EXPECT_TRUE(last_error_has("options: struct_size 2 is smaller")) << nnasm_last_error();
  o.struct_size = 0xDEADBEEF;
  load(&o, NNASM_ERR_ABI);
  EXPECT_TRUE(last_error_has("uninitialized")) << nnasm_last_error();

  // A newer header's options: accepted while its own fields are 0, refused once one is set.
  std::vector<unsigned char> big(sizeof o + 16, 0xEE);
  nnasm_model_options_init_sized(reinterpret_cast<nnasm_model_options*>(big.data()), big.size());
  for (size_t k = sizeof o; k < big.size(); ++k) ASSERT_EQ(big[k], 0) << k;
  nnasm_model* m = load(reinterpret_cast<nnasm_model_options*>(big.data()));
  EXPECT_NE(m, nullptr);
  nnasm_model_free(m);
  big[sizeof o + 3] = 1;
  load(reinterpret_cast<nnasm_model_options*>(big.data()), NNASM_ERR_ABI);
  EXPECT_TRUE(last_error_has(std::to_string(sizeof o + 3) + " of " + std::to_string(big.size()) + " is set"))
      << nnasm_last_error();

  // An older sized header's options (no log_level): read as far as they go, the rest defaults.
  nnasm_model_options_init(&o);
  o.struct_size = offsetof(nnasm_model_options, log_level) + sizeof(nnasm_log_level);
  m = load(&o);
  EXPECT_NE(m, nullptr);
  nnasm_model_free(m);
}

struct Logged {
  std::vector<std::pair<int, std::string>> lines;
};
void log_v2(void* user, nnasm_log_level level, const char* message) {
  static_cast<Logged*>(user)->lines.emplace_back(level, message);
}

TEST(CApiAbi, TheLogGetsALevelAndHonoursTheMinimum) {
  Logged logged;
  nnasm_model_options o;
  nnasm_model_options_init(&o);
  o.log = log_v2;
  o.log_user = &logged;
  nnasm_model* m = load(&o);
  ASSERT_EQ(logged.lines.size(), 1u);
  EXPECT_EQ(logged.lines[0].first, NNASM_LOG_INFO);
  EXPECT_NE(logged.lines[0].second.find("<memory>: 1 instructions, 1 inputs, 1 outputs, kernels for"),
            std::string::npos)
      << logged.lines[0].second;
  nnasm_model_free(m);
  o.log_level = NNASM_LOG_WARN;
  nnasm_model_free(load(&o));
  EXPECT_EQ(logged.lines.size(), 1u);  // the INFO line filtered out
  o.log_level = 5;
  load(&o, NNASM_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(last_error_has("log_level 5")) << nnasm_last_error();
}

TEST(CApiAbi, MetadataSaysWhatTheModelIs) {
  nnasm_model* m = load(nullptr);
  ASSERT_NE(m, nullptr);
  nnasm_model_metadata_info md;
  md.struct_size = sizeof md;
  ASSERT_EQ(nnasm_model_metadata(m, &md), NNASM_OK) << nnasm_last_error();
  EXPECT_STREQ(md.producer, "nnasm 0.1.0 (listing)");
  size_t n = 0;
  ASSERT_EQ(nnasm_model_instruction_count(m, &n), NNASM_OK);
  EXPECT_EQ(md.instructions, n);
  EXPECT_EQ(md.inputs, 1u);
  EXPECT_EQ(md.outputs, 1u);
  EXPECT_EQ(md.carried_state, 0);
  EXPECT_EQ(md.isa, static_cast<int>(nnasm::jit_config_from_env().isa()));
  EXPECT_EQ(nnasm_model_metadata(nullptr, &md), NNASM_ERR_INVALID_ARGUMENT);
  md.struct_size = 4;
  EXPECT_EQ(nnasm_model_metadata(m, &md), NNASM_ERR_ABI);
  nnasm_model_free(m);

  nnasm_model_options o;
  nnasm_model_options_init(&o);
  o.jit = 0;
  const char carried[] =
      "input %x : f32[1,4]\nstate @h : f32[1,4] init=zeros\noutput %y\n\nforward:\n"
      "  ADD %x, @h -> %y\n  ASSIGN @h, %y -> @h\n";
  ASSERT_EQ(nnasm_model_load_memory(carried, sizeof carried - 1, &o, &m), NNASM_OK) << nnasm_last_error();
  md.struct_size = sizeof md;
  ASSERT_EQ(nnasm_model_metadata(m, &md), NNASM_OK);
  EXPECT_EQ(md.carried_state, 1);
  EXPECT_EQ(md.isa, NNASM_ISA_REF);
  nnasm_model_free(m);
}

class CApiImport : public TempDirTest {};

TEST_F(CApiImport, OnnxFromMemoryRunsAsPyTorchDid) {
  std::string bytes;
  nnasm::NpyArray x, want;
  nnasm::Status s = nnasm::read_file_limited("tests/golden/onnx/mlp.onnx", 1 << 20, &bytes);
  if (s) s = nnasm::npy_read("tests/golden/onnx/mlp_x.npy", &x);
  if (s) s = nnasm::npy_read("tests/golden/onnx/mlp_y.npy", &want);
  ASSERT_TRUE(s.is_ok()) << s.message() << " (run from the repository root)";
  nnasm_model* m = nullptr;
  ASSERT_EQ(nnasm_import_onnx(bytes.data(), bytes.size(), nullptr, &m), NNASM_OK) << nnasm_last_error();
  nnasm_model_metadata_info md;
  md.struct_size = sizeof md;
  ASSERT_EQ(nnasm_model_metadata(m, &md), NNASM_OK);
  EXPECT_STREQ(md.producer, "nnasm 0.1.0 (ONNX import)");

  // The same model through a model file, loaded without the importer.
  const std::string file = path("mlp.nnm");
  ASSERT_EQ(nnasm_import_onnx_to_model_file(bytes.data(), bytes.size(), file.c_str()), NNASM_OK) << nnasm_last_error();
  nnasm_model* from_file = nullptr;
  ASSERT_EQ(nnasm_model_load_file(file.c_str(), nullptr, &from_file), NNASM_OK) << nnasm_last_error();
  ASSERT_EQ(nnasm_model_metadata(from_file, &md), NNASM_OK);
  EXPECT_EQ(std::string(md.producer).rfind("nnasm 0.1.0 (format ", 0), 0u) << md.producer;

  for (nnasm_model* model : {m, from_file}) {
    nnasm_instance* in = nullptr;
    ASSERT_EQ(nnasm_instance_create(model, &in), NNASM_OK);
    nnasm_tensor_info xi, yi;
    xi.struct_size = yi.struct_size = sizeof xi;
    ASSERT_EQ(nnasm_model_input_info(model, 0, &xi), NNASM_OK);
    ASSERT_EQ(nnasm_model_output_info(model, 0, &yi), NNASM_OK);
    ASSERT_EQ(xi.bytes, x.f32.size() * 4);
    ASSERT_EQ(yi.bytes, want.f32.size() * 4);
    std::vector<float> y(want.f32.size());
    ASSERT_EQ(nnasm_instance_set_input(in, xi.name, x.f32.data(), xi.bytes), NNASM_OK) << nnasm_last_error();
    ASSERT_EQ(nnasm_instance_run(in), NNASM_OK);
    ASSERT_EQ(nnasm_instance_get_output(in, yi.name, y.data(), yi.bytes), NNASM_OK);
    for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], want.f32[i], 1e-4f) << i;
    nnasm_instance_free(in);
  }
  nnasm_model_free(m);
  nnasm_model_free(from_file);
}

TEST_F(CApiImport, BytesThatAreNotAModelAreABadModel) {
  nnasm_model* m = reinterpret_cast<nnasm_model*>(1);
  const std::string garbage = "\x08\x07garbage that is not protobuf \xff\xff\xff\xff\x0f";
  EXPECT_EQ(nnasm_import_onnx(garbage.data(), garbage.size(), nullptr, &m), NNASM_ERR_BAD_MODEL);
  EXPECT_EQ(m, nullptr);
  EXPECT_TRUE(last_error_has("<onnx>")) << nnasm_last_error();
  EXPECT_EQ(nnasm_import_onnx(nullptr, 4, nullptr, &m), NNASM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(nnasm_import_onnx_to_model_file(garbage.data(), garbage.size(), path("g.nnm").c_str()),
            NNASM_ERR_BAD_MODEL);
  EXPECT_EQ(nnasm_import_onnx_to_model_file(garbage.data(), garbage.size(), nullptr), NNASM_ERR_INVALID_ARGUMENT);

  // A model nnasm cannot take as it is: the message names what.
  std::string lenet;
  ASSERT_TRUE(nnasm::read_file_limited("tests/golden/onnx/lenet5.onnx", 1 << 20, &lenet).is_ok());
  EXPECT_EQ(nnasm_import_onnx(lenet.data(), lenet.size(), nullptr, &m), NNASM_ERR_BAD_MODEL);
  EXPECT_TRUE(last_error_has("graph input 'input.1': dimension 0 is symbolic")) << nnasm_last_error();
  // Every prefix of a real model: no crash, a status.
  for (size_t n = 0; n < lenet.size(); n += 97) {
    const nnasm_status st = nnasm_import_onnx(lenet.data(), n, nullptr, &m);
    ASSERT_NE(st, NNASM_OK) << n;
    EXPECT_EQ(m, nullptr);
  }
}

}  // namespace
