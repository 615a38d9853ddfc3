// Tests of the IDX reader and the Fashion-MNIST loader: round trips of generated files, plain and
// gzip-compressed; one test per kind of malformed input, each checking that the message names
// the file, the problem and the offset; a bounded deterministic mutation run that must never
// crash; and, where the Debian package is installed, the real Fashion-MNIST test set.
#include "serialize/idx.h"

#include <sys/stat.h>
#include <zlib.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "serialize/fashion_mnist.h"
#include "tests/temp_dir_test.h"

namespace nnasm {
namespace {

std::string be32(uint32_t v) {
  std::string s(4, '\0');
  for (int i = 0; i < 4; ++i) s[i] = static_cast<char>((v >> (24 - 8 * i)) & 0xff);
  return s;
}

// An IDX file: magic, type, rank, big-endian dims, then `data` as given.
std::string make_idx(uint8_t type, const std::vector<uint32_t>& dims, const std::string& data) {
  std::string s("\0\0", 2);
  s += static_cast<char>(type);
  s += static_cast<char>(dims.size());
  for (uint32_t d : dims) s += be32(d);
  return s + data;
}

std::string u8_data(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 37 + 11) & 0xff);
  return s;
}

// A gzip member of `raw`, as gzip(1) writes it.
std::string gzip(const std::string& raw, int level = 6) {
  z_stream zs;
  std::memset(&zs, 0, sizeof zs);
  EXPECT_EQ(deflateInit2(&zs, level, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&zs, raw.size()) + 32, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  zs.avail_in = static_cast<uInt>(raw.size());
  zs.next_out = reinterpret_cast<Bytef*>(&out[0]);
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

std::string err(const Status& s) { return s ? std::string("(ok)") : s.message(); }

// Reads `bytes` both from memory and from a file; both must agree; returns the file's status.
class IdxTest : public TempDirTest {
 protected:
  Status read_both(const std::string& name, const std::string& bytes, IdxArray* out) {
    IdxArray mem;
    Status sm = idx_read_bytes(bytes, name, &mem);
    Status sf = idx_read(put(name, bytes), out);
    EXPECT_EQ(sm.is_ok(), sf.is_ok()) << err(sm) << " vs " << err(sf);
    if (sm && sf) {
      EXPECT_EQ(mem.shape, out->shape);
      EXPECT_EQ(mem.u8, out->u8);
      EXPECT_EQ(mem.i32, out->i32);
    }
    return sf;
  }
  // Expects an error containing each of `parts`, from memory and from the file.
  void expect_error(const std::string& name, const std::string& bytes, std::vector<std::string> parts) {
    IdxArray a;
    Status sm = idx_read_bytes(bytes, name, &a);
    Status sf = idx_read(put(name, bytes), &a);
    ASSERT_FALSE(sm.is_ok()) << name;
    ASSERT_FALSE(sf.is_ok()) << name;
    EXPECT_EQ(sm.message().rfind(name + ": ", 0), 0u) << sm.message();
    EXPECT_EQ(sf.message().rfind(path(name) + ": ", 0), 0u) << sf.message();
    for (const std::string& p : parts) {
      EXPECT_NE(sm.message().find(p), std::string::npos) << "'" << p << "' not in: " << sm.message();
      EXPECT_NE(sf.message().find(p), std::string::npos) << "'" << p << "' not in: " << sf.message();
    }
  }
};

TEST_F(IdxTest, U8RoundTripRank1And3PlainAndGzip) {
  const std::string d1 = u8_data(10), d3 = u8_data(3 * 4 * 5);
  const std::string f1 = make_idx(IDX_U8, {10}, d1), f3 = make_idx(IDX_U8, {3, 4, 5}, d3);
  for (bool gz : {false, true}) {
    IdxArray a;
    Status s = read_both(gz ? "r1.gz" : "r1", gz ? gzip(f1) : f1, &a);
    ASSERT_TRUE(s.is_ok()) << s.message();
    EXPECT_EQ(a.type, IDX_U8);
    EXPECT_EQ(a.shape, (Shape{10}));
    EXPECT_EQ(std::string(a.u8.begin(), a.u8.end()), d1);
    EXPECT_TRUE(a.f32.empty() && a.i32.empty());

    s = read_both(gz ? "r3.gz" : "r3", gz ? gzip(f3) : f3, &a);
    ASSERT_TRUE(s.is_ok()) << s.message();
    EXPECT_EQ(a.shape, (Shape{3, 4, 5}));
    EXPECT_EQ(std::string(a.u8.begin(), a.u8.end()), d3);
  }
}

TEST_F(IdxTest, GzipIsDetectedByMagicNotName) {
  const std::string f = make_idx(IDX_U8, {2, 2}, "abcd");
  IdxArray a;
  ASSERT_TRUE(idx_read(put("plain.gz", f), &a).is_ok());
  ASSERT_TRUE(idx_read(put("packed.idx", gzip(f)), &a).is_ok());
  EXPECT_EQ(std::string(a.u8.begin(), a.u8.end()), "abcd");
}

TEST_F(IdxTest, BigEndianInt32AndFloat32) {
  const std::string fi = make_idx(IDX_I32, {3}, be32(1) + be32(0xfffffffeu) + be32(0x7fffffff));
  std::string fdata;
  for (float v : {1.0f, -0.5f, 3.25f}) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    fdata += be32(u);
  }
  const std::string ff = make_idx(IDX_F32, {1, 3}, fdata);
  for (bool gz : {false, true}) {
    IdxArray a;
    Status s = read_both("i.idx", gz ? gzip(fi) : fi, &a);
    ASSERT_TRUE(s.is_ok()) << s.message();
    EXPECT_EQ(a.type, IDX_I32);
    EXPECT_EQ(a.i32, (std::vector<int32_t>{1, -2, 0x7fffffff}));
    s = idx_read(put("f.idx", gz ? gzip(ff) : ff), &a);
    ASSERT_TRUE(s.is_ok()) << s.message();
    EXPECT_EQ(a.type, IDX_F32);
    EXPECT_EQ(a.shape, (Shape{1, 3}));
    EXPECT_EQ(a.f32, (std::vector<float>{1.0f, -0.5f, 3.25f}));
    EXPECT_TRUE(a.u8.empty() && a.i32.empty());
  }
}

TEST_F(IdxTest, MultiMemberGzipIsOneStream) {
  const std::string f = make_idx(IDX_U8, {6}, "abcdef");
  IdxArray a;
  Status s = read_both("multi.gz", gzip(f.substr(0, 7)) + gzip(f.substr(7)), &a);
  ASSERT_TRUE(s.is_ok()) << s.message();
  EXPECT_EQ(std::string(a.u8.begin(), a.u8.end()), "abcdef");
}

TEST_F(IdxTest, MalformedHeaders) {
  expect_error("empty", "", {"empty file"});
  expect_error("magic", "\x01\x00\x08\x01" + be32(1) + "x", {"bad magic at byte 0", "got 01 00"});
  expect_error("magic1", std::string("\x00\x07\x08\x01", 4) + be32(1) + "x", {"bad magic at byte 0", "got 00 07"});
  expect_error("short", std::string("\x00\x00\x08", 3), {"ends inside the IDX header at byte 3"});
  expect_error("type", make_idx(0x42, {1}, "x"), {"unknown IDX element type 0x42 at byte 2"});
  expect_error("f64", make_idx(0x0E, {1}, "12345678"), {"type 0x0e (float64)", "not supported"});
  expect_error("rank0", make_idx(IDX_U8, {}, "x"), {"rank 0 at byte 3 is outside 1..6"});
  expect_error("rank7", make_idx(IDX_U8, {1, 1, 1, 1, 1, 1, 1}, "x"), {"rank 7 at byte 3"});
  expect_error("dims", make_idx(IDX_U8, {2, 3}, "").substr(0, 10), {"ends inside the IDX header at byte 10"});
  expect_error("zero", make_idx(IDX_U8, {2, 0, 3}, ""), {"dimension 1 at byte 8 is 0"});
  expect_error("huge", make_idx(IDX_U8, {65536, 65536, 2}, ""), {"dimension 2 at byte 12", "more than"});
  // 2^32-1 squared overflows int64 if multiplied before checking.
  expect_error("overflow", make_idx(IDX_U8, {0xffffffffu, 0xffffffffu}, ""), {"dimension 1 at byte 8", "more than"});
}

TEST_F(IdxTest, DataLengthMismatch) {
  expect_error("trunc", make_idx(IDX_U8, {2, 3}, "abcde"),
               {"data is 5 bytes, shorter than the 6 bytes that u8[2,3] needs", "byte 17"});
  expect_error("trail", make_idx(IDX_U8, {2, 3}, "abcdefg"),
               {"data is 7 bytes, longer than the 6 bytes", "extra bytes start at byte 18"});
  expect_error("i32trunc", make_idx(IDX_I32, {2}, "1234567"), {"shorter than the 8 bytes that i32[2] needs"});
  expect_error("trunc.gz", gzip(make_idx(IDX_U8, {2, 3}, "abcde")),
               {"data is 5 bytes, shorter than the 6 bytes", "decompressed byte 17"});
  expect_error("trail.gz", gzip(make_idx(IDX_U8, {2, 3}, "abcdefg")),
               {"longer than the 6 bytes", "decompressed byte 18"});
  expect_error("hdr.gz", gzip(make_idx(IDX_U8, {2, 3}, "").substr(0, 9)),
               {"ends inside the IDX header at decompressed byte 9"});
}

TEST_F(IdxTest, CorruptAndTruncatedGzip) {
  const std::string g = gzip(make_idx(IDX_U8, {100}, u8_data(100)));
  // Cut inside the deflate data and inside the 8-byte CRC/length trailer.
  expect_error("cut.gz", g.substr(0, g.size() / 2), {"gzip stream is truncated"});
  expect_error("cut_trailer.gz", g.substr(0, g.size() - 3), {"gzip stream is truncated"});
  std::string bad_crc = g;
  bad_crc[bad_crc.size() - 6] ^= 0x55;
  expect_error("crc.gz", bad_crc, {"corrupt gzip stream", "incorrect data check"});
  std::string bad_len = g;
  bad_len[bad_len.size() - 2] ^= 0x01;
  expect_error("len.gz", bad_len, {"corrupt gzip stream", "incorrect length check"});
  std::string bad_method = g;
  bad_method[2] = 7;  // compression method must be 8 (deflate)
  expect_error("method.gz", bad_method, {"corrupt gzip stream at compressed byte"});
  expect_error("garbage.gz", g + "xyz", {"3 bytes of trailing garbage after the gzip stream at compressed byte"});
  expect_error("only_magic.gz", "\x1f\x8b", {"gzip stream is truncated"});
}

TEST_F(IdxTest, GzipDeclaringHugeDataIsRefusedOrBounded) {
  // Over the cap: refused from the header alone.
  expect_error("bomb.gz", gzip(make_idx(IDX_U8, {65536, 32768}, "abc")), {"over the 1073741824 bytes allowed"});
  // Under the cap but holding 3 bytes: must fail fast, without allocating the declared 1e9 bytes.
  const auto t0 = std::chrono::steady_clock::now();
  expect_error("liar.gz", gzip(make_idx(IDX_U8, {1000, 1000, 1000}, "abc")),
               {"data is 3 bytes, shorter than the 1000000000 bytes"});
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));  // generous; only guards a hang
}

TEST_F(IdxTest, FileErrors) {
  IdxArray a;
  Status s = idx_read(path("missing"), &a);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find(path("missing")), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("No such file"), std::string::npos) << s.message();
  s = idx_read(dir_, &a);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("not a regular file"), std::string::npos) << s.message();
}

// Random byte changes, insertions and truncations of valid files, plain and gzip: every outcome
// is a Status (a crash or hang fails the test run); the seed keeps it reproducible.
TEST_F(IdxTest, MutationsNeverCrash) {
  const std::vector<std::string> seeds = {
      make_idx(IDX_U8, {3, 4, 5}, u8_data(60)), make_idx(IDX_I32, {2, 2}, u8_data(16)),
      make_idx(IDX_F32, {5}, u8_data(20))};
  std::mt19937 rng(1234);
  int ok = 0, bad = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    const bool gz = iter % 2 == 1;
    std::string f = seeds[iter % seeds.size()];
    if (gz) f = gzip(f);
    const int kind = static_cast<int>(rng() % 4);
    if (kind == 0) {
      f.resize(rng() % (f.size() + 1));
    } else {
      const int edits = 1 + static_cast<int>(rng() % 3);
      for (int e = 0; e < edits && !f.empty(); ++e) {
        const size_t at = rng() % f.size();
        if (kind == 1) f[at] = static_cast<char>(rng() & 0xff);
        if (kind == 2) f.insert(f.begin() + static_cast<std::ptrdiff_t>(at), static_cast<char>(rng() & 0xff));
        if (kind == 3) f[at] ^= static_cast<char>(1u << (rng() % 8));
      }
    }
    IdxArray a;
    Status s = idx_read_bytes(f, "m.idx", &a);
    if (s) {
      ++ok;
      const size_t n = static_cast<size_t>(a.shape.numel());
      EXPECT_EQ(n, a.type == IDX_U8 ? a.u8.size() : a.type == IDX_F32 ? a.f32.size() : a.i32.size());
    } else {
      ++bad;
      EXPECT_EQ(s.message().rfind("m.idx: ", 0), 0u) << s.message();
    }
  }
  EXPECT_GT(ok, 0);
  EXPECT_GT(bad, 0);
}

// A small fake Fashion-MNIST directory: `n` images of 2×3 and `labels`.
class FashionMnistTest : public TempDirTest {
 protected:
  void make_set(const std::string& prefix, uint32_t n_images, const std::string& labels, bool gz) {
    const std::string img = make_idx(IDX_U8, {n_images, 2, 3}, u8_data(n_images * 6));
    const std::string lab = make_idx(IDX_U8, {static_cast<uint32_t>(labels.size())}, labels);
    put(prefix + "-images-idx3-ubyte" + (gz ? ".gz" : ""), gz ? gzip(img) : img);
    put(prefix + "-labels-idx1-ubyte" + (gz ? ".gz" : ""), gz ? gzip(lab) : lab);
  }
};

TEST_F(FashionMnistTest, LoadsAndScales) {
  make_set("t10k", 3, std::string("\x00\x09\x04", 3), true);
  make_set("train", 2, std::string("\x01\x02", 2), false);
  Dataset d;
  Status s = fashion_mnist_load(dir_, false, &d);
  ASSERT_TRUE(s.is_ok()) << s.message();
  EXPECT_EQ(d.n, 3);
  EXPECT_EQ(d.rows, 2);
  EXPECT_EQ(d.cols, 3);
  EXPECT_EQ(d.labels, (std::vector<int32_t>{0, 9, 4}));
  ASSERT_EQ(d.images.size(), 18u);
  const std::string raw = u8_data(18);
  for (size_t i = 0; i < raw.size(); ++i)
    EXPECT_FLOAT_EQ(d.images[i], static_cast<unsigned char>(raw[i]) / 255.0f);
  s = fashion_mnist_load(dir_, true, &d);
  ASSERT_TRUE(s.is_ok()) << s.message();
  EXPECT_EQ(d.n, 2);
}

TEST_F(FashionMnistTest, EnvironmentVariableNamesTheDefaultDirectory) {
  make_set("t10k", 1, std::string("\x07", 1), false);
  const char* old = std::getenv(FASHION_MNIST_ENV);
  const std::string saved = old ? old : "";
  ::setenv(FASHION_MNIST_ENV, dir_.c_str(), 1);
  Dataset d;
  Status s = fashion_mnist_load("", false, &d);
  EXPECT_EQ(fashion_mnist_dir(""), dir_);
  if (old) ::setenv(FASHION_MNIST_ENV, saved.c_str(), 1); else ::unsetenv(FASHION_MNIST_ENV);
  ASSERT_TRUE(s.is_ok()) << s.message();
  EXPECT_EQ(d.labels, (std::vector<int32_t>{7}));
}

TEST_F(FashionMnistTest, Errors) {
  Dataset d;
  Status s = fashion_mnist_load(dir_, false, &d);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find(path("t10k-images-idx3-ubyte.gz")), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("make deps"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(FASHION_MNIST_ENV), std::string::npos) << s.message();

  make_set("t10k", 3, std::string("\x01\x02", 2), false);
  s = fashion_mnist_load(dir_, false, &d);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("has 3 images but"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("has 2 labels"), std::string::npos) << s.message();

  make_set("t10k", 2, std::string("\x01\x0a", 2), false);
  s = fashion_mnist_load(dir_, false, &d);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("label 1 (at byte 9) is 10, outside 0..9"), std::string::npos) << s.message();

  put("t10k-images-idx3-ubyte", make_idx(IDX_U8, {6}, "abcdef"));
  s = fashion_mnist_load(dir_, false, &d);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("expected u8 images of rank 3"), std::string::npos) << s.message();
}

// The real test set, from the Debian package dataset-fashion-mnist (`make deps`).
TEST(FashionMnistReal, TestSetHasTenThousandBalancedImages) {
  struct stat st;
  if (::stat(FASHION_MNIST_DEFAULT_DIR, &st) != 0)
    GTEST_SKIP() << FASHION_MNIST_DEFAULT_DIR << " is missing; `make deps` installs dataset-fashion-mnist";
  Dataset d;
  Status s = fashion_mnist_load(FASHION_MNIST_DEFAULT_DIR, false, &d);
  ASSERT_TRUE(s.is_ok()) << s.message();
  EXPECT_EQ(d.n, 10000);
  EXPECT_EQ(d.rows, 28);
  EXPECT_EQ(d.cols, 28);
  ASSERT_EQ(d.images.size(), 10000u * 28 * 28);
  ASSERT_EQ(d.labels.size(), 10000u);
  std::vector<int> count(10, 0);
  for (int32_t l : d.labels) {
    ASSERT_TRUE(l >= 0 && l <= 9) << l;
    ++count[l];
  }
  for (int c = 0; c < 10; ++c) EXPECT_EQ(count[c], 1000) << "class " << c;
  float lo = 1, hi = 0;
  for (float v : d.images) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_EQ(lo, 0.0f);
  EXPECT_EQ(hi, 1.0f);
}

}  // namespace
}  // namespace nnasm
