// Tokenizer and number syntax of the listing. Numbers are read with std::from_chars, never strtod,
// so a listing means the same under every C locale; the syntax is checked by hand first because
// from_chars alone would accept a prefix ("1e" as 1) or spellings we do not print ("infinity").
#include "serialize/listing_lexer.h"

#include <charconv>
#include <limits>

#include <fmt/format.h>

namespace nnasm {
namespace {

// ASCII by hand rather than <cctype>, whose answers for bytes over 127 depend on the C locale.
bool digit(char c) { return c >= '0' && c <= '9'; }
bool name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool name_char(char c) { return name_start(c) || digit(c) || c == '.'; }
// A number token runs over everything a malformed number might contain ("1.2.3", "--1", "1e+x"),
// so that the whole of it is reported rather than a confusing tail.
bool number_char(char c) { return name_char(c) || c == '+' || c == '-'; }

// The closing quote of the string opening at src[b], on the same line; a backslash escapes '"' and
// '\\' only. npos for a bad string, with *why and *at (the byte at fault) set.
size_t closing_quote(std::string_view src, size_t b, std::string* why, size_t* at) {
  for (size_t i = b + 1; i < src.size() && src[i] != '\n'; ++i) {
    const unsigned char u = static_cast<unsigned char>(src[i]);
    if (src[i] == '"') return i;
    if (src[i] == '\\' && i + 1 < src.size() && (src[i + 1] == '"' || src[i + 1] == '\\')) {
      ++i;
    } else if (src[i] == '\\') {
      *why = "a backslash in a string escapes only '\"' and '\\'";
      *at = i;
      return std::string_view::npos;
    } else if (u < 0x20 && u != '\t') {
      *why = fmt::format("unexpected byte 0x{:02x} in a string", static_cast<unsigned>(u));
      *at = i;
      return std::string_view::npos;
    }
  }
  *why = "unterminated string";
  *at = b;
  return std::string_view::npos;
}

}  // namespace

void lex_listing(std::string_view src, Lexed* out) {
  std::vector<Token>& toks = out->tokens;
  toks.clear();
  out->message.clear();
  size_t i = 0;
  int line = 1;
  size_t line_start = 0;
  auto push = [&](Tok k, size_t begin, size_t end) {
    toks.push_back(Token{k, src.substr(begin, end - begin), line, static_cast<int>(begin - line_start) + 1});
  };
  while (i < src.size()) {
    const char c = src[i];
    if (c == ' ' || c == '\t' || c == '\r') {
      ++i;
    } else if (c == '\n' || c == ';') {
      const size_t at = i;
      while (i < src.size() && src[i] != '\n') ++i;
      push(Tok::NEWLINE, at, at);
      if (i < src.size()) ++i;
      ++line;
      line_start = i;
    } else if (name_start(c)) {
      const size_t b = i;
      while (i < src.size() && name_char(src[i])) ++i;
      push(Tok::IDENT, b, i);
    } else if (c == '%' || c == '@') {
      const size_t b = i++;
      if (i >= src.size() || !name_start(src[i])) {
        push(Tok::ERROR, b, i);
        out->message = fmt::format("expected a name after '{}'", c);
        break;
      }
      while (i < src.size() && name_char(src[i])) ++i;
      toks.push_back(Token{c == '%' ? Tok::LOCAL : Tok::GLOBAL, src.substr(b + 1, i - b - 1), line,
                           static_cast<int>(b - line_start) + 1});
    } else if (c == '"') {
      std::string why;
      size_t at = 0;
      const size_t end = closing_quote(src, i, &why, &at);
      if (end == std::string_view::npos) {
        toks.push_back(Token{Tok::ERROR, src.substr(at, 1), line, static_cast<int>(at - line_start) + 1});
        out->message = why;
        break;
      }
      toks.push_back(Token{Tok::STRING, src.substr(i + 1, end - i - 1), line, static_cast<int>(i - line_start) + 1});
      i = end + 1;
    } else if (c == '-' && i + 1 < src.size() && src[i + 1] == '>') {
      push(Tok::ARROW, i, i + 2);
      i += 2;
    } else if (digit(c) || c == '.' || c == '-' || c == '+') {
      const size_t b = i++;
      while (i < src.size() && number_char(src[i]) && !(src[i] == '-' && i + 1 < src.size() && src[i + 1] == '>'))
        ++i;
      push(Tok::NUMBER, b, i);
    } else if (c == ':' || c == ',' || c == '[' || c == ']' || c == '=') {
      const Tok k = c == ':'   ? Tok::COLON
                    : c == ',' ? Tok::COMMA
                    : c == '[' ? Tok::LBRACKET
                    : c == ']' ? Tok::RBRACKET
                               : Tok::EQUALS;
      push(k, i, i + 1);
      ++i;
    } else {
      push(Tok::ERROR, i, i + 1);
      const unsigned char u = static_cast<unsigned char>(c);
      out->message = u >= 0x20 && u < 0x7f ? fmt::format("unexpected character '{}'", c)
                                     : fmt::format("unexpected byte 0x{:02x}", static_cast<unsigned>(u));
      break;
    }
  }
  const size_t end = src.size();
  toks.push_back(Token{Tok::END, src.substr(end, 0), line, static_cast<int>(end - line_start) + 1});
}

std::string describe(const Token& t) {
  switch (t.kind) {
    case Tok::NEWLINE: return "end of line";
    case Tok::END: return "end of file";
    case Tok::LOCAL: return fmt::format("'%{}'", t.text);
    case Tok::GLOBAL: return fmt::format("'@{}'", t.text);
    case Tok::STRING: return fmt::format("a string \"{}\"", t.text);
    default: return fmt::format("'{}'", t.text);
  }
}

bool parse_f64(std::string_view s, double* out) {
  std::string_view body = s;
  bool neg = false;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
    neg = body[0] == '-';
    body.remove_prefix(1);
  }
  if (body == "inf" || body == "nan") {
    const double v = body == "inf" ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
    if (body == "nan" && s[0] != 'n') return false;  // no signed NaN: it would not print back
    *out = neg ? -v : v;
    return true;
  }
  size_t i = 0, digits = 0;
  while (i < body.size() && digit(body[i])) ++i, ++digits;
  if (i < body.size() && body[i] == '.') {
    ++i;
    while (i < body.size() && digit(body[i])) ++i, ++digits;
  }
  if (digits == 0) return false;
  if (i < body.size() && (body[i] == 'e' || body[i] == 'E')) {
    ++i;
    if (i < body.size() && (body[i] == '+' || body[i] == '-')) ++i;
    size_t exp_digits = 0;
    while (i < body.size() && digit(body[i])) ++i, ++exp_digits;
    if (exp_digits == 0) return false;
  }
  if (i != body.size()) return false;
  // from_chars takes no '+' and no leading '.', which the check above allows.
  std::string text = neg ? "-" : "";
  if (body[0] == '.') text += '0';
  text += body;
  double v = 0;
  auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (r.ec != std::errc() || r.ptr != text.data() + text.size()) return false;
  *out = v;
  return true;
}

std::string unescape_string(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) out += s[i] == '\\' && i + 1 < s.size() ? s[++i] : s[i];
  return out;
}

bool parse_i64(std::string_view s, int64_t* out) {
  // Either "+digits" or what from_chars takes ("-digits" or "digits"), nothing in between.
  if (!s.empty() && s[0] == '+') {
    s.remove_prefix(1);
    if (s.empty() || !digit(s[0])) return false;
  }
  int64_t v = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || r.ec != std::errc() || r.ptr != s.data() + s.size()) return false;
  *out = v;
  return true;
}

}  // namespace nnasm
