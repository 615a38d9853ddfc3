// The expression parser (recursive descent over the text, no tokenizer: nothing to allocate) and
// printer. Function names and immediate keys come from the opcode table, so an elementwise op
// added there is callable here with no change to this file.
#include "ops/elementwise/expr.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <new>

#include <fmt/format.h>

namespace nnasm {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

class Parser {
 public:
  Parser(std::string_view t, ExprNode* nodes, int cap) : t_(t), nodes_(nodes), cap_(cap) {}

  Status run(int* n) {
    int root;
    NNASM_TRY(expr(0, &root));
    skip_space();
    if (p_ < t_.size()) return error(p_, "unexpected '{}' after the expression", t_[p_]);
    *n = n_;
    return Status::ok();
  }

 private:
  template <typename... A>
  Status error(size_t at, fmt::format_string<A...> f, A&&... a) const {
    return Status::error(fmt::format("column {}: ", at + 1) + fmt::format(f, std::forward<A>(a)...));
  }
  std::string seen(size_t at) const { return at < t_.size() ? fmt::format("'{}'", t_[at]) : "the end"; }

  void skip_space() {
    while (p_ < t_.size() && (t_[p_] == ' ' || t_[p_] == '\t')) ++p_;
  }
  bool eat(char c) {
    skip_space();
    if (p_ < t_.size() && t_[p_] == c) return ++p_, true;
    return false;
  }
  std::string_view name() {
    const size_t b = p_;
    while (p_ < t_.size() && is_name_char(t_[p_])) ++p_;
    return t_.substr(b, p_ - b);
  }

  Status add(ExprNode node, int* index) {
    if (n_ == cap_) return error(node.col - 1, "more than {} terms", cap_);
    new (&nodes_[n_]) ExprNode(node);  // into raw scratch memory: no allocation
    *index = n_++;
    return Status::ok();
  }

  // A number as the listing reads one: optional sign, digits with an optional fraction and
  // exponent, or inf / nan; rounded to f32 through double, as the listing rounds immediates.
  Status number(float* out) {
    const size_t b = p_;
    size_t q = p_;
    const bool neg = q < t_.size() && t_[q] == '-';
    if (q < t_.size() && (t_[q] == '-' || t_[q] == '+')) ++q;
    // The word runs over everything a malformed number might hold ("1.2.3", "1e+x"), so the whole
    // of it is reported.
    size_t e = q;
    while (e < t_.size() &&
           (is_name_char(t_[e]) || t_[e] == '.' || ((t_[e] == '+' || t_[e] == '-') && (t_[e - 1] | 0x20) == 'e')))
      ++e;
    p_ = e;
    const std::string_view body = t_.substr(q, e - q), word = t_.substr(b, e - b);
    double v = 0;
    if (body == "inf" || (body == "nan" && q == b)) {
      v = body == "inf" ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
    } else {
      size_t i = 0, digits = 0;
      while (i < body.size() && is_digit(body[i])) ++i, ++digits;
      if (i < body.size() && body[i] == '.')
        for (++i; i < body.size() && is_digit(body[i]); ++i) ++digits;
      if (digits && i < body.size() && (body[i] | 0x20) == 'e') {
        size_t exp_digits = 0;
        if (++i < body.size() && (body[i] == '+' || body[i] == '-')) ++i;
        for (; i < body.size() && is_digit(body[i]); ++i) ++exp_digits;
        if (!exp_digits) digits = 0;
      }
      if (!digits || i != body.size()) return error(b, "bad number '{}'", word);
      // from_chars takes no leading '.', which the check above allows.
      char buf[80];
      if (body.size() + 1 >= sizeof buf) return error(b, "number '{}' is too long", word);
      size_t len = 0;
      if (body[0] == '.') buf[len++] = '0';
      for (char c : body) buf[len++] = c;
      if (std::from_chars(buf, buf + len, v).ec != std::errc()) return error(b, "bad number '{}'", word);
    }
    if (neg) v = -v;
    if (std::isfinite(v) && std::fabs(v) >= 0x1.ffffffp+127) return error(b, "number '{}' is out of f32 range", word);
    *out = static_cast<float>(v);
    return Status::ok();
  }

  Status expr(int depth, int* index) {
    skip_space();
    if (depth >= EXPR_MAX_DEPTH) return error(p_, "nested more than {} deep", EXPR_MAX_DEPTH);
    ExprNode node;
    node.col = static_cast<int>(p_) + 1;
    if (p_ < t_.size() && t_[p_] == '%') {
      ++p_;
      const size_t b = p_;
      int64_t k = 0;
      while (p_ < t_.size() && is_digit(t_[p_]) && k <= std::numeric_limits<int>::max()) k = k * 10 + (t_[p_++] - '0');
      if (p_ == b) return error(p_, "expected an input number after '%', got {}", seen(p_));
      if (k > std::numeric_limits<int>::max()) return error(b, "input number too large");
      node.kind = ExprKind::INPUT;
      node.input = static_cast<int>(k);
      return add(node, index);
    }
    if (p_ < t_.size() && is_name_start(t_[p_])) {
      const size_t b = p_;
      const std::string_view fn = name();
      skip_space();
      if (p_ < t_.size() && t_[p_] == '(') return call(depth, fn, b, index);
      if (fn == "inf" || fn == "nan") {
        p_ = b;
        node.kind = ExprKind::CONST;
        NNASM_TRY(number(&node.value));
        return add(node, index);
      }
      return error(p_, "expected '(' after '{}', got {}", fn, seen(p_));
    }
    if (p_ < t_.size() && (is_digit(t_[p_]) || t_[p_] == '-' || t_[p_] == '+' || t_[p_] == '.')) {
      node.kind = ExprKind::CONST;
      NNASM_TRY(number(&node.value));
      return add(node, index);
    }
    return error(p_, "expected an input like %0, a number or a call like exp(...), got {}", seen(p_));
  }

  // The op named `fn` (its mnemonic in lower case), or an error at `at`.
  Status function(std::string_view fn, size_t at, const OpInfo** info) const {
    char upper[32];
    if (fn.size() >= sizeof upper) return error(at, "unknown function '{}'", fn);
    bool lower = true;
    for (size_t i = 0; i < fn.size(); ++i) {
      lower = lower && !(fn[i] >= 'A' && fn[i] <= 'Z');
      upper[i] = fn[i] >= 'a' && fn[i] <= 'z' ? static_cast<char>(fn[i] - 'a' + 'A') : fn[i];
    }
    *info = op_by_mnemonic(std::string_view(upper, fn.size()));
    if (!*info || !lower) return error(at, "unknown function '{}'{}", fn, *info ? " (names are lowercase)" : "");
    if (!elementwise_op((*info)->op)) return error(at, "{} is not an elementwise op", (*info)->mnemonic);
    return Status::ok();
  }

  // fn "(" args [, key=value]... ")"; the name is read, p_ is at the '('.
  Status call(int depth, std::string_view fn, size_t at, int* index) {
    const OpInfo* info = nullptr;
    NNASM_TRY(function(fn, at, &info));
    ++p_;  // '('
    ExprNode node;
    node.kind = ExprKind::CALL;
    node.op = info->op;
    node.col = static_cast<int>(at) + 1;
    bool given[EwImms::MAX] = {false, false};
    for (size_t k = 0; k < info->imms.size() && k < EwImms::MAX; ++k) {
      node.imm.f[k] = static_cast<float>(info->imms[k].default_value.f);
      node.imm.i[k] = info->imms[k].default_value.i;
    }
    const int arity = elementwise_op(info->op)->arity;
    int n_args = 0;
    for (bool first = true;; first = false) {
      skip_space();
      if (p_ < t_.size() && t_[p_] == ')' && !first) break;
      if (!first && !eat(',')) return error(p_, "expected ',' or ')' in {}(...), got {}", fn, seen(p_));
      skip_space();
      // key=value, or an argument.
      const size_t b = p_;
      const std::string_view key = p_ < t_.size() && is_name_start(t_[p_]) ? name() : std::string_view();
      if (!key.empty() && eat('=')) {
        NNASM_TRY(immediate(*info, fn, key, b, given, &node.imm));
        continue;
      }
      p_ = b;
      for (bool g : given)
        if (g) return error(b, "arguments of {} come before its immediates", fn);
      int arg;
      NNASM_TRY(expr(depth + 1, &arg));
      if (n_args < arity) node.arg[n_args] = arg;
      ++n_args;
    }
    ++p_;  // ')'
    if (n_args != arity)
      return error(at, "{} takes {} argument{}, got {}", fn, arity, arity == 1 ? "" : "s", n_args);
    for (size_t k = 0; k < info->imms.size() && k < EwImms::MAX; ++k)
      if (!given[k] && !info->imms[k].has_default) return error(at, "{} needs immediate '{}'", fn, info->imms[k].key);
    return add(node, index);
  }

  // The value after `key=`, into its schema slot.
  Status immediate(const OpInfo& info, std::string_view fn, std::string_view key, size_t at, bool* given, EwImms* imm) {
    const int k = imm_index(info, key);
    if (k < 0 || k >= EwImms::MAX) {
      if (info.imms.empty()) return error(at, "{} takes no immediates, got '{}'", fn, key);
      std::string keys;
      for (const ImmSpec& s : info.imms) keys += (keys.empty() ? "" : ", ") + s.key;
      return error(at, "{} has no immediate '{}' (it takes {})", fn, key, keys);
    }
    if (given[k]) return error(at, "immediate '{}' given twice", key);
    given[k] = true;
    skip_space();
    const ImmSpec& spec = info.imms[k];
    if (spec.type == ImmType::F32) return number(&imm->f[k]);
    const size_t b = p_;
    const std::string_view value = name();
    for (size_t c = 0; c < spec.choices.size(); ++c)
      if (spec.type == ImmType::ENUM && value == spec.choices[c]) {
        imm->i[k] = static_cast<int64_t>(c);
        return Status::ok();
      }
    std::string choices;
    for (const std::string& c : spec.choices) choices += (choices.empty() ? "" : "|") + c;
    return error(b, "immediate '{}' of {} must be one of {}, got '{}'", key, fn, choices, value);
  }

  std::string_view t_;
  ExprNode* nodes_;
  int cap_;
  int n_ = 0;
  size_t p_ = 0;
};

std::string lowercase(const char* s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

std::string print_node(const std::vector<ExprNode>& nodes, int i) {
  const ExprNode& n = nodes[i];
  switch (n.kind) {
    case ExprKind::INPUT: return fmt::format("%{}", n.input);
    case ExprKind::CONST: return float_to_string(n.value);
    case ExprKind::CALL: break;
  }
  const OpInfo& info = op_info(n.op);
  std::string s = lowercase(info.mnemonic) + "(";
  for (int k = 0; k < elementwise_op(n.op)->arity; ++k) s += (k ? "," : "") + print_node(nodes, n.arg[k]);
  for (size_t k = 0; k < info.imms.size() && k < EwImms::MAX; ++k) {
    const ImmSpec& spec = info.imms[k];
    if (spec.type == ImmType::F32 && !(spec.has_default && static_cast<float>(spec.default_value.f) == n.imm.f[k]))
      s += fmt::format(",{}={}", spec.key, float_to_string(n.imm.f[k]));
    if (spec.type == ImmType::ENUM && !(spec.has_default && spec.default_value.i == n.imm.i[k]))
      s += fmt::format(",{}={}", spec.key, spec.choices[static_cast<size_t>(n.imm.i[k])]);
  }
  return s + ")";
}

}  // namespace

Status expr_parse(std::string_view text, ExprNode* nodes, int cap, int* n) { return Parser(text, nodes, cap).run(n); }

Result<std::vector<ExprNode>> expr_parse(std::string_view text) {
  std::vector<ExprNode> nodes(text.size() + 1);
  int n = 0;
  NNASM_TRY(expr_parse(text, nodes.data(), static_cast<int>(nodes.size()), &n));
  nodes.resize(static_cast<size_t>(n));
  return nodes;
}

std::string expr_print(const std::vector<ExprNode>& nodes) {
  return nodes.empty() ? std::string() : print_node(nodes, static_cast<int>(nodes.size()) - 1);
}

}  // namespace nnasm
