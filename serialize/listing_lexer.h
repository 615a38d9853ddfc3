// The listing's tokenizer, and the number syntax shared by its parser. Lines matter in the
// listing (one statement per line), so ends of line are tokens; comments and blanks are not. The
// lexer never fails: an unexpected byte becomes an ERROR token, after which it stops, so the
// parser reports whichever error comes first in the file.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace nnasm {

enum class Tok : uint8_t {
  IDENT,     // keyword, mnemonic, dtype, immediate key, enum value: [A-Za-z_][A-Za-z0-9_.]*
  LOCAL,     // %name (text holds the name without the sigil)
  GLOBAL,    // @name
  NUMBER,    // anything that starts like a number; validated by parse_f64 / parse_i64
  STRING,    // "text" on one line (text holds what is between the quotes, escapes as written)
  COLON,
  COMMA,
  LBRACKET,
  RBRACKET,
  EQUALS,
  ARROW,     // ->
  NEWLINE,   // end of a line; placed at the comment's ';' when the line ends in one
  END,       // end of input; always the last token
  ERROR,     // an unexpected byte; Lexed::message says why; always followed by END
};

struct Token {
  Tok kind = Tok::END;
  std::string_view text;  // a view into the source
  int line = 1;
  int col = 1;
};

struct Lexed {
  std::vector<Token> tokens;
  std::string message;  // what is wrong at the ERROR token, if there is one
};

// Splits `src` into tokens; the views point into `src`, which must outlive the result.
void lex_listing(std::string_view src, Lexed* out);

// How a token reads in a message: 'RELU', '%x', end of line, end of file.
std::string describe(const Token& t);

// Strict number syntax, independent of the C locale: an optional sign, digits with an optional
// fraction and exponent, or nan / inf / -inf. False on anything else, including overflow.
bool parse_f64(std::string_view s, double* out);
// An optionally signed decimal integer that fits in int64.
bool parse_i64(std::string_view s, int64_t* out);
// A STRING token's text with its escapes (\" and \\) resolved.
std::string unescape_string(std::string_view s);

}  // namespace nnasm
