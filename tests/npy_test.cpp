// Tests of the .npy reader and writer: round trips, a file byte-for-byte as NumPy writes it, one
// test per kind of malformed input (each checking that the message names the file and the
// problem), and a bounded deterministic mutation run that must never crash.
#include "serialize/npy.h"

#include <gtest/gtest.h>

#include "tests/npy_bytes.h"
#include "tests/temp_dir_test.h"
#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include <fmt/format.h>

namespace nnasm {
namespace {

// np.save(f, np.array([[1, 2, 3], [4, 5, -0.5]], dtype=np.float32)) with NumPy >= 1.23: magic,
// version 1.0, header length 118 (0x76), the dict, 20 spaces of room to grow the first axis in
// place, padding to 128 bytes, '\n', then 6 little-endian floats.
const std::string kNumpyFile(
    "\x93NUMPY\x01\x00\x76\x00"
    "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
    "                    "                                          // growth room (20)
    "                                      "                        // padding (38)
    "\n"
    "\x00\x00\x80\x3f" "\x00\x00\x00\x40" "\x00\x00\x40\x40"        // 1, 2, 3
    "\x00\x00\x80\x40" "\x00\x00\xa0\x40" "\x00\x00\x00\xbf",       // 4, 5, -0.5
    152);

class NpyTest : public TempDirTest {};

// Reads `bytes` as a file named "bad.npy" and returns the error message ("" if it was read).
std::string error_of(const std::string& bytes) {
  NpyArray a;
  Status s = npy_read_bytes(bytes, "bad.npy", &a);
  return s ? std::string() : s.message();
}

#define EXPECT_NPY_ERROR(bytes, fragment)                               \
  do {                                                                  \
    const std::string msg_ = error_of(bytes);                           \
    EXPECT_NE(msg_.find("bad.npy: "), std::string::npos) << msg_;        \
    EXPECT_NE(msg_.find(fragment), std::string::npos) << msg_;          \
  } while (0)

TEST_F(NpyTest, RoundTripF32AtRanks0To3) {
  for (const Shape& shape : {Shape{}, Shape{5}, Shape{2, 3, 4}}) {
    TensorType t{DType::F32, shape};
    std::vector<float> v(shape.numel());
    for (size_t i = 0; i < v.size(); ++i) v[i] = 0.25f * static_cast<float>(i) - 1.5f;
    ASSERT_TRUE(npy_write(path("a.npy"), t, v.data()).is_ok());
    NpyArray a;
    Status s = npy_read(path("a.npy"), &a);
    ASSERT_TRUE(s.is_ok()) << s.message();
    EXPECT_EQ(a.type, t) << a.type.str();
    EXPECT_EQ(a.f32, v);
    EXPECT_TRUE(a.i32.empty());
    // The data starts on a 64-byte boundary, as NumPy's own files do.
    EXPECT_EQ((get("a.npy").size() - v.size() * 4) % 64, 0u);
  }
  EXPECT_EQ(entries(), std::vector<std::string>{"a.npy"}) << "a temporary file was left behind";
}

TEST_F(NpyTest, RoundTripI32AtRanks0To3) {
  for (const Shape& shape : {Shape{}, Shape{7}, Shape{3, 1, 2}}) {
    TensorType t{DType::I32, shape};
    std::vector<int32_t> v(shape.numel());
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>(i * 100003) - 7 + (i == 1 ? INT32_MIN + 7 : 0);
    ASSERT_TRUE(npy_write(path("b.npy"), t, v.data()).is_ok());
    NpyArray a;
    Status s = npy_read(path("b.npy"), &a);
    ASSERT_TRUE(s.is_ok()) << s.message();
    EXPECT_EQ(a.type, t);
    EXPECT_EQ(a.i32, v);
    EXPECT_TRUE(a.f32.empty());
  }
}

TEST_F(NpyTest, WritesTheHeaderNumpyWrites) {
  const float v[6] = {1, 2, 3, 4, 5, -0.5f};
  ASSERT_TRUE(npy_write(path("c.npy"), TensorType{DType::F32, Shape{2, 3}}, v).is_ok());
  const std::string f = get("c.npy");
  ASSERT_EQ(f.size(), 128u + 24u);
  EXPECT_EQ(f.substr(0, 10), std::string("\x93NUMPY\x01\x00\x76\x00", 10));
  EXPECT_EQ(f.substr(10, 59), "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }");
  EXPECT_EQ(f.substr(10 + 59, 58), std::string(58, ' '));
  EXPECT_EQ(f[127], '\n');
  // The data is the same bytes NumPy writes.
  EXPECT_EQ(f.substr(128), kNumpyFile.substr(128));

  ASSERT_TRUE(npy_write(path("d.npy"), TensorType{DType::I32, Shape{4}}, v).is_ok());
  EXPECT_NE(get("d.npy").find("{'descr': '<i4', 'fortran_order': False, 'shape': (4,), }"), std::string::npos);
  ASSERT_TRUE(npy_write(path("e.npy"), TensorType{DType::F32, Shape{}}, v).is_ok());
  EXPECT_NE(get("e.npy").find("'shape': (), }"), std::string::npos);
  EXPECT_EQ(get("e.npy").size(), 128u + 4u);
}

TEST_F(NpyTest, ReadsAFileWrittenByNumpy) {
  ASSERT_EQ(kNumpyFile.size(), 152u);
  put("np.npy", kNumpyFile);
  for (int from_file = 0; from_file < 2; ++from_file) {
    NpyArray a;
    Status s = from_file ? npy_read(path("np.npy"), &a) : npy_read_bytes(kNumpyFile, "np.npy", &a);
    ASSERT_TRUE(s.is_ok()) << s.message();
    EXPECT_EQ(a.type.str(), "f32[2,3]");
    EXPECT_EQ(a.f32, (std::vector<float>{1, 2, 3, 4, 5, -0.5f}));
  }
}

TEST_F(NpyTest, ReadsVersions2And3) {
  for (int v : {2, 3}) {
    NpyArray a;
    Status s = npy_read_bytes(make_npy(v, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
                                       f32_bytes({7, 8})),
                              "v.npy", &a);
    ASSERT_TRUE(s.is_ok()) << s.message();
    EXPECT_EQ(a.f32, (std::vector<float>{7, 8}));
  }
}

TEST_F(NpyTest, AcceptsKeyOrderQuotesAndOldSpellings) {
  // Keys in any order, double quotes, no trailing comma, Python 2 long integers.
  NpyArray a;
  Status s = npy_read_bytes(make_npy(1, "{\"shape\": (1L, 2L), \"fortran_order\": False, \"descr\": \"<i4\"}",
                                     std::string("\x05\x00\x00\x00\xff\xff\xff\xff", 8)),
                            "k.npy", &a);
  ASSERT_TRUE(s.is_ok()) << s.message();
  EXPECT_EQ(a.type.str(), "i32[1,2]");
  EXPECT_EQ(a.i32, (std::vector<int32_t>{5, -1}));
}

TEST_F(NpyTest, ErrorsNameTheFileOnDisk) {
  NpyArray a;
  Status s = npy_read(path("missing.npy"), &a);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find(path("missing.npy")), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("No such file"), std::string::npos) << s.message();

  put("short.npy", kNumpyFile.substr(0, 140));
  s = npy_read(path("short.npy"), &a);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find(path("short.npy") + ": data is 12 bytes, shorter"), std::string::npos) << s.message();

  s = npy_read(dir_, &a);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("not a regular file"), std::string::npos) << s.message();
}

TEST_F(NpyTest, WriteFailsCleanlyInAMissingDirectory) {
  const float v = 1;
  Status s = npy_write(path("no/such/dir.npy"), TensorType{DType::F32, Shape{}}, &v);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("no/such/dir.npy"), std::string::npos) << s.message();
  s = npy_write(path("z.npy"), TensorType{DType::F32, Shape{0}}, &v);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("must be positive"), std::string::npos) << s.message();
}

const char* const kGoodDict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";

TEST(NpyMalformed, BadMagic) {
  std::string f = make_npy(1, kGoodDict, f32_bytes({1, 2}));
  f[1] = 'n';
  EXPECT_NPY_ERROR(f, "bad magic");
  EXPECT_NPY_ERROR(std::string(""), "empty file");
  EXPECT_NPY_ERROR(std::string("PK\x03\x04", 4), "bad magic");
}

TEST(NpyMalformed, TruncatedPreamble) {
  EXPECT_NPY_ERROR(std::string("\x93NUMPY\x01", 7), "ends inside the preamble");
  EXPECT_NPY_ERROR(std::string("\x93NUMPY\x02\x00\x10\x00", 10), "ends inside the preamble");
}

TEST(NpyMalformed, UnsupportedVersion) {
  std::string f = make_npy(1, kGoodDict, f32_bytes({1, 2}));
  f[6] = 4;
  EXPECT_NPY_ERROR(f, "unsupported .npy format version 4.0");
  f[6] = 1;
  f[7] = 1;
  EXPECT_NPY_ERROR(f, "unsupported .npy format version 1.1");
  f[6] = 0;
  f[7] = 0;
  EXPECT_NPY_ERROR(f, "version 0.0");
}

TEST(NpyMalformed, HeaderLengthAbsurdOrBeyondTheFile) {
  EXPECT_NPY_ERROR(std::string("\x93NUMPY\x02\x00\xff\xff\xff\xff{}", 14), "header length 4294967295 is absurd");
  EXPECT_NPY_ERROR(std::string("\x93NUMPY\x01\x00\x00\x10{'descr'", 17), "ends inside the header");
}

TEST(NpyMalformed, HeaderNotADict) {
  EXPECT_NPY_ERROR(make_npy(1, "['descr', '<f4']", ""), "header is not a dict");
  EXPECT_NPY_ERROR(make_npy(1, "", ""), "header is not a dict");
  EXPECT_NPY_ERROR(make_npy(1, "{'descr': '<f4' 'shape': (2,)}", ""), "expected ',' or '}'");
  EXPECT_NPY_ERROR(make_npy(1, "{'descr' '<f4'}", ""), "expected ':'");
  EXPECT_NPY_ERROR(make_npy(1, "{'descr: '<f4'}", ""), "expected ':'");
  EXPECT_NPY_ERROR(make_npy(1, "{'descr': '<f4", ""), "escapes and newlines");
  EXPECT_NPY_ERROR(make_npy(1, std::string(kGoodDict) + " x", f32_bytes({1, 2})), "unexpected text after");
  EXPECT_NPY_ERROR(make_npy(1, "{'descr': '<f4', 'fortran_order': false, 'shape': (2,)}", ""), "expected True or False");
  EXPECT_NPY_ERROR(make_npy(1, "{'descr': '<f4', 'fortran_order': Falsey, 'shape': (2,)}", ""), "expected True or False");
  EXPECT_NPY_ERROR(make_npy(1, "{'descr': <f4, 'fortran_order': False, 'shape': (2,)}", ""), "quoted dtype");
  EXPECT_NPY_ERROR(make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': [2]}", ""), "expected a tuple");
  EXPECT_NPY_ERROR(make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2)}", ""), "is not a tuple");
  EXPECT_NPY_ERROR(make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,,)}", ""), "expected a non-negative integer");
  // The position is a byte offset in the file: the dict starts at byte 10.
  EXPECT_NPY_ERROR(make_npy(1, "{'descr' '<f4'}", ""), "malformed header at byte 19");
}

TEST(NpyMalformed, MissingOrExtraKeys) {
  EXPECT_NPY_ERROR(make_npy(1, "{'fortran_order': False, 'shape': (2,), }", f32_bytes({1, 2})), "no 'descr' key");
  EXPECT_NPY_ERROR(make_npy(1, "{'descr': '<f4', 'shape': (2,), }", f32_bytes({1, 2})), "no 'fortran_order' key");
  EXPECT_NPY_ERROR(make_npy(1, "{'descr': '<f4', 'fortran_order': False}", f32_bytes({1, 2})), "no 'shape' key");
  EXPECT_NPY_ERROR(make_npy(1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", ""),
                   "duplicate key 'descr'");
  EXPECT_NPY_ERROR(make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", ""),
                   "unexpected key 'x'");
}

TEST(NpyMalformed, UnsupportedDtypeIsNamed) {
  for (const char* d : {"<f8", ">f4", ">i8", "<i2", "<u2", "<f2", "|O"}) {
    EXPECT_NPY_ERROR(make_npy(1, fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': (2,), }}", d),
                              f32_bytes({1, 2})),
                     fmt::format("unsupported dtype '{}'", d));
  }
}

// int64 (PyTorch's token ids) is read as i32, every value checked; bool as f32 0 and 1, the form
// an imported ONNX BOOL tensor has.
TEST(NpyWiderTypes, Int64IsNarrowedAndBoolIsZerosAndOnes) {
  NpyArray a;
  Status s = npy_read_bytes(make_npy(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 2), }",
                                     i64_bytes({0, -7, INT32_MAX, INT32_MIN})),
                            "ids.npy", &a);
  ASSERT_TRUE(s.is_ok()) << s.message();
  EXPECT_EQ(a.type.str(), "i32[2,2]");
  EXPECT_EQ(a.descr, "<i8");
  EXPECT_EQ(a.i32, (std::vector<int32_t>{0, -7, INT32_MAX, INT32_MIN}));
  s = npy_read_bytes(make_npy(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", std::string("\x01\x00\x01", 3)),
                     "mask.npy", &a);
  ASSERT_TRUE(s.is_ok()) << s.message();
  EXPECT_EQ(a.type.str(), "f32[3]");
  EXPECT_EQ(a.f32, (std::vector<float>{1, 0, 1}));
}

TEST(NpyMalformed, Int64OutOfRangeOrABoolByteNamesTheElement) {
  EXPECT_NPY_ERROR(make_npy(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 2), }",
                            i64_bytes({1, 2, 3, int64_t(1) << 31})),
                   "element 3 [1, 1] is 2147483648, outside the range of i32");
  EXPECT_NPY_ERROR(make_npy(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }", i64_bytes({INT64_MIN})),
                   "element 0 [0] is -9223372036854775808");
  EXPECT_NPY_ERROR(make_npy(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", std::string("\x00\x02", 2)),
                   "element 1 [1] is byte 2, not a bool (0 or 1)");
  // Lengths count the file's element size: 8 bytes an int64, 1 a bool.
  EXPECT_NPY_ERROR(make_npy(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", i64_bytes({1})),
                   "data is 8 bytes, shorter than the 16 bytes that int64[2] needs");
  EXPECT_NPY_ERROR(make_npy(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", std::string("\x00\x01\x01", 3)),
                   "data is 3 bytes, longer than the 2 bytes that bool[2] needs");
}

TEST(NpyMalformed, FortranOrder) {
  EXPECT_NPY_ERROR(make_npy(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 1), }", f32_bytes({1, 2})),
                   "fortran_order True is not supported");
}

TEST(NpyMalformed, RankOver6) {
  EXPECT_NPY_ERROR(make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 2), }",
                            f32_bytes({1, 2})),
                   "rank 7 is more than the supported 6");
  NpyArray a;
  EXPECT_TRUE(npy_read_bytes(make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 2), }",
                                      f32_bytes({1, 2})),
                             "six.npy", &a));
}

TEST(NpyMalformed, DataShorterOrLonger) {
  EXPECT_NPY_ERROR(make_npy(1, kGoodDict, f32_bytes({1})), "data is 4 bytes, shorter than the 8 bytes that f32[2] needs");
  EXPECT_NPY_ERROR(make_npy(1, kGoodDict, f32_bytes({1, 2}) + "x"), "data is 9 bytes, longer than the 8 bytes");
  EXPECT_NPY_ERROR(make_npy(1, kGoodDict, ""), "data is 0 bytes, shorter");
}

TEST(NpyMalformed, ShapeTooLargeIsRefusedBeforeAllocating) {
  // 2^16 · 2^16 · 2 elements: over MAX_TENSOR_ELEMENTS though each dim is small.
  EXPECT_NPY_ERROR(make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (65536, 65536, 2), }", ""),
                   "more than 4294967296 elements");
  // A dim that would overflow int64 while being parsed.
  EXPECT_NPY_ERROR(make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,), }", ""),
                   "over the limit");
  // Dims whose product overflows int64.
  EXPECT_NPY_ERROR(make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }", ""),
                   "more than 4294967296 elements");
  EXPECT_NPY_ERROR(make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", ""), "negative dimension");
  // NumPy allows empty arrays; nnasm tensors have positive dims.
  EXPECT_NPY_ERROR(make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 0), }", ""),
                   "dimension 1 is 0, must be positive");
}

// Random byte flips, truncations, insertions and header-length edits of valid files: each read
// must return ok or an error, and an ok array must hold exactly the elements its shape says.
TEST(NpyMutation, NeverCrashes) {
  const std::vector<std::string> seeds = {
      kNumpyFile,
      make_npy(2, "{'shape': (3,), 'descr': '<i4', 'fortran_order': False}", std::string(12, '\x07')),
      make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", f32_bytes({3})),
  };
  std::mt19937 rng(12345);
  int ok = 0, failed = 0;
  for (int iter = 0; iter < 6000; ++iter) {
    std::string f = seeds[iter % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !f.empty(); ++e) {
      const size_t at = rng() % f.size();
      switch (rng() % 5) {
        case 0: f[at] = static_cast<char>(rng()); break;
        case 1: f[at] ^= static_cast<char>(1u << (rng() % 8)); break;
        case 2: f.resize(at); break;
        case 3: f.insert(at, 1, "(),:'0123456789 LTrue{}"[rng() % 23]); break;
        case 4:  // header length
          if (f.size() > 9) f[8 + rng() % 2] = static_cast<char>(rng());
          break;
      }
    }
    NpyArray a;
    Status s = npy_read_bytes(f, "m.npy", &a);
    if (s) {
      ++ok;
      const size_t n = static_cast<size_t>(a.type.shape.numel());
      EXPECT_EQ(a.type.dtype == DType::F32 ? a.f32.size() : a.i32.size(), n);
    } else {
      ++failed;
      EXPECT_EQ(s.message().rfind("m.npy: ", 0), 0u) << s.message();
    }
  }
  // Both outcomes occur, so the run exercised the decoder as well as the error paths.
  EXPECT_GT(ok, 0);
  EXPECT_GT(failed, 0);
}

}  // namespace
}  // namespace nnasm
