// The names of roles and init kinds as the listing spells them.
#include "isa/tensor.h"

namespace nnasm {

const char* role_name(Role r) {
  switch (r) {
    case Role::INPUT: return "input";
    case Role::OUTPUT: return "output";
    case Role::PARAM: return "param";
    case Role::CONST: return "const";
    case Role::TEMPORARY: return "temporary";
    case Role::STATE: return "state";
  }
  return "?";
}

namespace {
const char* const INIT_NAMES[] = {"none",   "zeros",          "ones",          "constant",   "uniform",
                                  "normal", "xavier_uniform", "xavier_normal", "he_uniform", "he_normal"};
}

const char* init_name(InitKind k) { return INIT_NAMES[static_cast<int>(k)]; }

bool init_from_name(const std::string& s, InitKind* out) {
  for (int i = 0; i < static_cast<int>(sizeof INIT_NAMES / sizeof *INIT_NAMES); ++i)
    if (s == INIT_NAMES[i]) {
      *out = static_cast<InitKind>(i);
      return true;
    }
  return false;
}

}  // namespace nnasm
