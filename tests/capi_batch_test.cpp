// nnasm_instance_set_batch: an instance of a batch-1 model runs five rows at once, each equal to
// the row run alone; the model and its other instances stay as they were; misuse is a status.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "api/nnasm.h"

namespace {

const char kPolicy[] =
    "input  %x : f32[1,6]\n"
    "param  @w1 : f32[6,16]  init=he_normal\n"
    "param  @b1 : f32[16]    init=uniform low=-0.1 high=0.1\n"
    "param  @w2 : f32[16,4]  init=xavier_uniform\n"
    "output %y\n"
    "\n"
    "forward:\n"
    "  LINEAR  %x, @w1, @b1 -> %h  act=relu\n"
    "  MATMUL  %h, @w2 -> %y\n";

struct Loaded {
  nnasm_model* m = nullptr;
  nnasm_instance* one = nullptr;
  nnasm_instance* many = nullptr;
  explicit Loaded(const std::string& listing) {
    EXPECT_EQ(nnasm_model_load_memory(listing.data(), listing.size(), nullptr, &m), NNASM_OK) << nnasm_last_error();
    if (m) {
      EXPECT_EQ(nnasm_instance_create(m, &one), NNASM_OK);
      EXPECT_EQ(nnasm_instance_create(m, &many), NNASM_OK);
    }
  }
  ~Loaded() {
    nnasm_instance_free(one);
    nnasm_instance_free(many);
    nnasm_model_free(m);
  }
};

TEST(CApiBatch, RowsAtBatchFiveEqualRowsRunAlone) {
  Loaded l(kPolicy);
  ASSERT_TRUE(l.many);
  ASSERT_EQ(nnasm_instance_set_batch(l.many, 5), NNASM_OK) << nnasm_last_error();
  nnasm_tensor_info info{};
  info.struct_size = sizeof info;
  ASSERT_EQ(nnasm_instance_input_info(l.many, 0, &info), NNASM_OK);
  EXPECT_EQ(info.dims[0], 5);
  EXPECT_EQ(info.bytes, 5 * 6 * sizeof(float));
  ASSERT_EQ(nnasm_instance_output_info(l.many, 0, &info), NNASM_OK);
  EXPECT_EQ(info.bytes, 5 * 4 * sizeof(float));
  ASSERT_EQ(nnasm_model_input_info(l.m, 0, &info), NNASM_OK);
  EXPECT_EQ(info.dims[0], 1);  // the model keeps its batch
  ASSERT_EQ(nnasm_instance_input_info(l.one, 0, &info), NNASM_OK);
  EXPECT_EQ(info.dims[0], 1);

  float x[5 * 6], y[5 * 4];
  for (int i = 0; i < 5 * 6; ++i) x[i] = std::sin(0.37f * i);
  EXPECT_EQ(nnasm_instance_set_input(l.many, "x", x, 6 * sizeof(float)), NNASM_ERR_SIZE_MISMATCH);
  ASSERT_EQ(nnasm_instance_set_input(l.many, "x", x, sizeof x), NNASM_OK) << nnasm_last_error();
  ASSERT_EQ(nnasm_instance_run(l.many), NNASM_OK);
  ASSERT_EQ(nnasm_instance_get_output(l.many, "y", y, sizeof y), NNASM_OK) << nnasm_last_error();
  for (int r = 0; r < 5; ++r) {
    float y1[4];
    ASSERT_EQ(nnasm_instance_set_input(l.one, "x", x + 6 * r, 6 * sizeof(float)), NNASM_OK) << nnasm_last_error();
    ASSERT_EQ(nnasm_instance_run(l.one), NNASM_OK);
    ASSERT_EQ(nnasm_instance_get_output(l.one, "y", y1, sizeof y1), NNASM_OK);
    // The reference kernels give each row bit for bit; generated GEMMs pick their blocking by
    // the number of rows, which may change the last bits (docs/c-api.md).
    for (int j = 0; j < 4; ++j) EXPECT_NEAR(y[4 * r + j], y1[j], 1e-6f * (1 + std::fabs(y1[j]))) << "row " << r;
  }
  // Back to batch 1, and again to another batch: each call prepares afresh.
  ASSERT_EQ(nnasm_instance_set_batch(l.many, 1), NNASM_OK) << nnasm_last_error();
  ASSERT_EQ(nnasm_instance_output_info(l.many, 0, &info), NNASM_OK);
  EXPECT_EQ(info.bytes, 4 * sizeof(float));
  EXPECT_EQ(nnasm_instance_get_output(l.many, "y", y, 4 * sizeof(float)), NNASM_ERR_NOT_READY);
}

TEST(CApiBatch, MisuseIsAStatusWithAMessage) {
  Loaded l(kPolicy);
  ASSERT_TRUE(l.many);
  EXPECT_EQ(nnasm_instance_set_batch(nullptr, 2), NNASM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(nnasm_instance_set_batch(l.many, 0), NNASM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(nnasm_last_error()).find("batch 0"), std::string::npos) << nnasm_last_error();
  EXPECT_EQ(nnasm_instance_set_batch(l.many, -4), NNASM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(nnasm_instance_set_batch(l.many, int64_t(1) << 40), NNASM_ERR_INVALID_ARGUMENT);
  nnasm_tensor_info info{};
  info.struct_size = sizeof info;
  EXPECT_EQ(nnasm_instance_input_info(l.many, 1, &info), NNASM_ERR_NOT_FOUND);
  EXPECT_EQ(nnasm_instance_input_info(nullptr, 0, &info), NNASM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(nnasm_instance_output_info(l.many, 0, nullptr), NNASM_ERR_INVALID_ARGUMENT);
  // A refused batch leaves the instance as it was.
  ASSERT_EQ(nnasm_instance_input_info(l.many, 0, &info), NNASM_OK);
  EXPECT_EQ(info.dims[0], 1);
}

TEST(CApiBatch, AProgramWhoseBatchCannotChangeSaysWhy) {
  const std::string listing =
      "input  %x : f32[4,6]\n"
      "output %y\n"
      "\n"
      "forward:\n"
      "  RESHAPE %x -> %y  shape=[2,12]\n";
  Loaded l(listing);
  ASSERT_TRUE(l.many);
  EXPECT_EQ(nnasm_instance_set_batch(l.many, 3), NNASM_ERR_INVALID_ARGUMENT);
  const std::string msg = nnasm_last_error();
  EXPECT_NE(msg.find("RESHAPE %y"), std::string::npos) << msg;
  EXPECT_NE(msg.find("mixes the batch"), std::string::npos) << msg;
  EXPECT_NE(msg.find(":5:"), std::string::npos) << msg;  // the listing's line
}

}  // namespace
