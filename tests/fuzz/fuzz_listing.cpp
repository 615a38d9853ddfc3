// libFuzzer target: the listing parser (serialize/listing.h) on arbitrary bytes. Whatever parses
// must also print and parse back to the same text, print(parse(print(P))) == print(P); a listing
// that does not is reported as a crash (__builtin_trap), with both texts on standard error. The
// programs hold descriptors alone (a DescriptorMap): parsing and printing need no runtime.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "ops/op.h"
#include "serialize/listing.h"

using namespace nnasm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  DescriptorMap descs(op_semantics());
  Program p(descs);
  if (!program_parse(text, "fuzz.nnasm", &p)) return 0;
  const std::string printed = program_print(p);

  DescriptorMap descs2(op_semantics());
  Program q(descs2);
  const Status s = program_parse(printed, "printed.nnasm", &q);
  if (!s) {
    std::fprintf(stderr, "printed listing does not parse back: %s\n--- printed:\n%s", s.message().c_str(),
                 printed.c_str());
    __builtin_trap();
  }
  const std::string reprinted = program_print(q);
  if (reprinted != printed) {
    std::fprintf(stderr, "round trip changed the listing\n--- printed:\n%s--- reprinted:\n%s", printed.c_str(),
                 reprinted.c_str());
    __builtin_trap();
  }
  return 0;
}
