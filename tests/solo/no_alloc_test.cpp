// `run` must not touch the allocator: counted with a replaced global operator new, which is why
// this test has a process of its own.
#include <atomic>
#include <cstdlib>
#include <new>

#include <gtest/gtest.h>

#include "tests/test_programs.h"

namespace {
std::atomic<bool> counting{false};
std::atomic<long> allocations{0};
}  // namespace

void* operator new(std::size_t n) {
  if (counting) ++allocations;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace nnasm {

TEST(NoAlloc, CounterSeesAllocations) {
  counting = true;
  auto* p = new std::vector<int>(100);
  counting = false;
  delete p;
  EXPECT_GE(allocations.load(), 1);
}

TEST(NoAlloc, RunOfEveryOpAllocatesNothing) {
  Context ctx;
  Program p(ctx);
  Graph g(p);
  record_every_op(g);
  ASSERT_TRUE(g.status()) << g.status().message();
  auto ex = Executor::prepare(p);
  ASSERT_TRUE(ex) << ex.status().message();
  for (int i = 0; i < 15; ++i) ex.value()->tensor("a")->f32()[i] = 0.1f * static_cast<float>(i) - 0.7f;
  for (int i = 0; i < 5; ++i) ex.value()->tensor("b")->f32()[i] = 0.3f * static_cast<float>(i) - 0.5f;
  allocations = 0;
  counting = true;
  for (int i = 0; i < 3; ++i) ex.value()->run();
  counting = false;
  EXPECT_EQ(allocations.load(), 0);
  EXPECT_TRUE(std::isfinite(ex.value()->tensor("y")->f32()[0]));
}

}  // namespace nnasm
