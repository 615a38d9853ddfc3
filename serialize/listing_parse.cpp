// The listing parser: a recursive-descent reader over the lexer's tokens, one statement per line.
// It does no type checking of its own: declarations go through Program::declare and instructions
// through Program::append (operand counts, shape inference), and their messages are given the
// position of the token they concern. Immediates are read by the opcode table's schema, so the
// parser knows no opcode by name. It stops at the first error.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <unordered_map>

#include <fmt/format.h>

#include "serialize/listing.h"
#include "isa/bf16.h"
#include "isa/program_size.h"
#include "serialize/listing_lexer.h"

namespace nnasm {
namespace {

// The sections in the order a listing must give them; a new Section value is added here too.
constexpr Section SECTIONS[] = {Section::DERIVE, Section::FORWARD, Section::BACKWARD, Section::UPDATE};

char sigil_of(const Token& t) { return t.kind == Tok::GLOBAL ? '@' : '%'; }
bool is_operand(const Token& t) { return t.kind == Tok::LOCAL || t.kind == Tok::GLOBAL; }

struct OutputLine {
  TensorId id;
  Token name;
};

class Parser {
 public:
  Parser(const Lexed& lx, const std::string& file, Program* p) : lx_(lx), t_(lx.tokens), file_(file), p_(p) {}

  Status run() {
    while (peek().kind != Tok::END) NNASM_TRY(statement());
    for (const OutputLine& o : outputs_)
      if (!p_->defined(o.id)) return err(o.name, "output %{} is never defined", o.name.text);
    for (TensorId id : p_->outputs())
      if (p_->desc(id).type.dtype == DType::BF16) {
        const auto it = decl_line_.find(id);
        return Status::errorf("{}:{}: error: output {}{} is {}: model inputs and outputs are f32, i32, i8 or u8 "
                              "(convert it to f32 first)",
                              file_, it == decl_line_.end() ? 0 : it->second, p_->desc(id).sigil(), p_->desc(id).name,
                              p_->desc(id).type.str());
      }
    return Status::ok();
  }

 private:
  const Token& peek(size_t k = 0) const { return t_[std::min(pos_ + k, t_.size() - 1)]; }
  const Token& next() {
    const Token& t = t_[pos_];
    if (pos_ + 1 < t_.size()) ++pos_;
    return t;
  }

  Status located(const Token& at, const std::string& msg) const {
    return Status::errorf("{}:{}:{}: error: {}", file_, at.line, at.col, msg);
  }
  // A message about an ERROR token is the lexer's, whatever the parser expected there.
  template <typename... A>
  Status err(const Token& at, fmt::format_string<A...> f, A&&... a) const {
    if (at.kind == Tok::ERROR) return located(at, lx_.message);
    return located(at, fmt::format(f, std::forward<A>(a)...));
  }

  Status end_of_statement() {
    const Token& t = next();
    if (t.kind == Tok::NEWLINE || t.kind == Tok::END) return Status::ok();
    return err(t, "unexpected {}", describe(t));
  }

  Status statement() {
    const Token& t = peek();
    if (t.kind == Tok::NEWLINE) {
      next();
      return Status::ok();
    }
    if (t.kind == Tok::IDENT) {
      if (peek(1).kind == Tok::COLON) return section_label();
      if (t.text == "output") return output_line();
      if (t.text == "mode" && peek(1).kind == Tok::IDENT) {
        if (in_section_) return err(t, "'mode' must come before '{}:'", section_name(Section::FORWARD));
        return mode_line();
      }
      if (t.text == "input" || t.text == "param" || t.text == "const" || t.text == "state") {
        if (in_section_) return err(t, "declarations must come before '{}:'", section_name(Section::FORWARD));
        return declaration();
      }
      if (in_section_) return instruction();
      if (op_by_mnemonic(t.text)) return err(t, "instruction before '{}:'", section_name(Section::FORWARD));
    }
    if (in_section_) return err(t, "expected an instruction, got {}", describe(t));
    return err(t, "expected a declaration (input, param, const, state, output, mode) or '{}:', got {}", section_name(Section::FORWARD),
               describe(t));
  }

  Status section_label() {
    const Token name = next();
    next();  // the colon
    int index = -1;
    for (size_t k = 0; k < sizeof SECTIONS / sizeof *SECTIONS; ++k)
      if (name.text == section_name(SECTIONS[k])) index = static_cast<int>(k);
    if (index < 0) return err(name, "unknown section '{}'", name.text);
    if (in_section_ && index == section_index_) return err(name, "duplicate section '{}:'", name.text);
    if (in_section_ && index < section_index_)
      return err(name, "section '{}:' must come before '{}:'", name.text, section_name(SECTIONS[section_index_]));
    in_section_ = true;
    section_index_ = index;
    return end_of_statement();
  }

  // mode training | mode inference
  Status mode_line() {
    next();  // 'mode'
    const Token m = next();
    if (m.text != "training" && m.text != "inference")
      return err(m, "mode is 'training' or 'inference', got '{}'", m.text);
    p_->set_training(m.text == "training");
    return end_of_statement();
  }

  // ---- declarations ----

  Status redefinition(const Token& name, TensorId id) const {
    auto line = decl_line_.find(id);
    return err(name, "redefinition of {}{} (declared at line {})", sigil_of(name), name.text,
               line == decl_line_.end() ? 0 : line->second);
  }

  Status check_sigil(const Token& t, const TensorDesc& d) const {
    if (sigil_of(t) == d.sigil()) return Status::ok();
    return err(t, "wrong sigil: {}{} is declared as {}{}", sigil_of(t), t.text, d.sigil(), d.name);
  }

  Status declaration() {
    const Token kw = next();
    const Role role = kw.text == "input"   ? Role::INPUT
                      : kw.text == "param" ? Role::PARAM
                      : kw.text == "state" ? Role::STATE
                                           : Role::CONST;
    const Tok want = role == Role::INPUT ? Tok::LOCAL : Tok::GLOBAL;
    const char want_sigil = want == Tok::LOCAL ? '%' : '@';
    const Token name = next();
    if (!is_operand(name)) return err(name, "expected a tensor name like {}x, got {}", want_sigil, describe(name));
    if (name.kind != want)
      return err(name, "wrong sigil: {} {}{} is written {}{}", kw.text, sigil_of(name), name.text, want_sigil,
                 name.text);
    const TensorId old = p_->find(std::string(name.text));
    if (old != NO_TENSOR) return redefinition(name, old);
    const Token& colon = next();
    if (colon.kind != Tok::COLON) return err(colon, "expected ':' and a type after {}", describe(name));

    TensorDesc d;
    d.name = std::string(name.text);
    d.role = role;
    NNASM_TRY(type(&d.type, fmt::format("{}{}", want_sigil, d.name)));
    if (role != Role::INPUT) {
      if (peek().kind == Tok::IDENT && peek().text == "init") {
        next();
        NNASM_TRY(init(&d.init));
      }
      if (peek().kind == Tok::EQUALS) {
        next();
        NNASM_TRY(values(d, &d.values));
      }
    }
    NNASM_TRY(end_of_statement());
    if (role == Role::CONST && d.values.empty() && d.init.kind == InitKind::NONE)
      return err(kw, "const @{} needs values (= [...]) or an init= kind", d.name);
    Result<TensorId> id = p_->declare(std::move(d), true);
    if (!id) return located(name, id.status().message());
    decl_line_[*id] = name.line;
    return Status::ok();
  }

  Status output_line() {
    next();  // 'output'
    const Token name = next();
    if (!is_operand(name)) return err(name, "expected a tensor name like %y, got {}", describe(name));
    const TensorId id = p_->find(std::string(name.text));
    if (id != NO_TENSOR) {
      NNASM_TRY(check_sigil(name, p_->desc(id)));
      if (p_->desc(id).is_output) return err(name, "duplicate output {}{}", sigil_of(name), name.text);
    } else if (name.kind == Tok::GLOBAL) {
      return err(name, "wrong sigil: @{} is not declared, and a tensor that an instruction defines is written %{}",
                 name.text, name.text);
    }
    TensorType ty;
    Token type_at;
    const bool typed = peek().kind == Tok::COLON;
    if (typed) {
      next();
      type_at = peek();
      NNASM_TRY(type(&ty, fmt::format("{}{}", sigil_of(name), name.text)));
    }
    NNASM_TRY(end_of_statement());
    if (id != NO_TENSOR) {
      const TensorDesc& d = p_->desc(id);
      if (typed && p_->type_known(id) && !(d.type == ty))
        return err(type_at, "output {}{} is declared {} but it is {}", d.sigil(), d.name, ty.str(), d.type.str());
      if (p_->type_known(id) && d.type.dtype == DType::BF16)
        return err(name, "output {}{} is {}: model inputs and outputs are f32, i32, i8 or u8 (convert it to f32 first)",
                   d.sigil(), d.name, d.type.str());
      p_->mark_output(id);
      return Status::ok();
    }
    TensorDesc d;
    d.name = std::string(name.text);
    d.role = Role::TEMPORARY;
    d.is_output = true;
    d.type = ty;
    Result<TensorId> r = p_->declare(std::move(d), typed);
    if (!r) return located(name, r.status().message());
    decl_line_[*r] = name.line;
    outputs_.push_back(OutputLine{*r, name});
    return Status::ok();
  }

  // f32[d0,d1,...] or i32[...]; the shape is checked against the limits before it is used.
  Status type(TensorType* out, const std::string& what) {
    const Token dt = next();
    if (dt.kind != Tok::IDENT) return err(dt, "expected a type like f32[2,3], got {}", describe(dt));
    if (dt.text == "f32") out->dtype = DType::F32;
    else if (dt.text == "i32") out->dtype = DType::I32;
    else if (dt.text == "bf16") out->dtype = DType::BF16;
    else if (dt.text == "i8") out->dtype = DType::I8;
    else if (dt.text == "u8") out->dtype = DType::U8;
    else return err(dt, "unknown element type '{}' (expected f32, i32, bf16, i8 or u8)", dt.text);
    const Token& open = next();
    if (open.kind != Tok::LBRACKET) return err(open, "expected '[' after '{}', got {}", dt.text, describe(open));
    Shape s;
    if (peek().kind == Tok::RBRACKET) {
      next();
    } else {
      for (;;) {
        const Token& d = next();
        if (s.rank == MAX_RANK) return err(d, "a shape has at most {} dimensions", MAX_RANK);
        int64_t v;
        if (d.kind != Tok::NUMBER || !parse_i64(d.text, &v))
          return err(d, "expected a dimension (a positive integer), got {}", describe(d));
        s.dims[s.rank++] = v;
        const Token& sep = next();
        if (sep.kind == Tok::RBRACKET) break;
        if (sep.kind != Tok::COMMA) return err(sep, "expected ',' or ']' in the shape, got {}", describe(sep));
      }
    }
    Status ok = check_shape(s, what);
    if (!ok) return located(dt, ok.message());
    out->shape = s;
    return Status::ok();
  }

  // A number token that must be well formed; `what` says what was expected instead of a non-number.
  Status number(const Token& t, const char* what, double* out) {
    if (t.kind == Tok::NUMBER || (t.kind == Tok::IDENT && (t.text == "nan" || t.text == "inf"))) {
      if (!parse_f64(t.text, out)) return err(t, "bad number '{}'", t.text);
      return Status::ok();
    }
    return err(t, "expected {}, got {}", what, describe(t));
  }

  // An f32 value, rounded to float as the tensor or immediate will hold it.
  Status f32_value(const Token& t, double* out) {
    double v;
    NNASM_TRY(number(t, "a number", &v));
    // Below 2^128 - 2^103 a value rounds to a finite float (FLT_MAX itself prints as 3.4028235e+38).
    if (std::isfinite(v) && std::fabs(v) >= 0x1.ffffffp+127) return err(t, "number '{}' is out of f32 range", t.text);
    *out = static_cast<double>(static_cast<float>(v));
    return Status::ok();
  }

  Status i32_value(const Token& t, double* out) {
    double ignored;
    NNASM_TRY(number(t, "an integer", &ignored));
    int64_t v;
    if (!parse_i64(t.text, &v) || v < INT32_MIN || v > INT32_MAX)
      return err(t, "an i32 value must be an integer in i32 range, got '{}'", t.text);
    *out = static_cast<double>(v);
    return Status::ok();
  }

  // An i8 or u8 value: an integer in the type's range.
  Status int8_value(const Token& t, DType dt, double* out) {
    double ignored;
    NNASM_TRY(number(t, "an integer", &ignored));
    const int64_t lo = dt == DType::I8 ? -128 : 0, hi = dt == DType::I8 ? 127 : 255;
    int64_t v;
    if (!parse_i64(t.text, &v) || v < lo || v > hi)
      return err(t, "an {} value must be an integer in {}..{}, got '{}'", dtype_name(dt), lo, hi, t.text);
    *out = static_cast<double>(v);
    return Status::ok();
  }

  // A bf16 value: any number, rounded to the nearest bf16 (ties to even) as the tensor holds it.
  Status bf16_value(const Token& t, double* out) {
    double v;
    NNASM_TRY(number(t, "a number", &v));
    bool overflow;
    const uint16_t h = bf16_from_double(v, &overflow);
    if (overflow) return err(t, "number '{}' is out of bf16 range (its largest finite value is 3.3895314e+38)", t.text);
    *out = static_cast<double>(bf16_to_f32(h));
    return Status::ok();
  }

  Status element_value(const Token& t, DType dt, double* out) {
    switch (dt) {
      case DType::I32: return i32_value(t, out);
      case DType::BF16: return bf16_value(t, out);
      case DType::I8:
      case DType::U8: return int8_value(t, dt, out);
      default: return f32_value(t, out);
    }
  }

  // init=KIND [key=value ...]; 'init' is consumed.
  Status init(InitSpec* out) {
    const Token& eq = next();
    if (eq.kind != Tok::EQUALS) return err(eq, "expected '=' after 'init', got {}", describe(eq));
    const Token kind = next();
    InitKind k;
    if (kind.kind != Tok::IDENT || !init_from_name(std::string(kind.text), &k) || k == InitKind::NONE)
      return err(kind, "unknown init kind {}", describe(kind));
    std::vector<const char*> keys;
    if (k == InitKind::CONSTANT) keys = {"value"};
    if (k == InitKind::UNIFORM) keys = {"low", "high"};
    if (k == InitKind::NORMAL) keys = {"mean", "std"};
    double args[2] = {0, 0};
    bool given[2] = {false, false};
    while (peek().kind == Tok::IDENT && peek(1).kind == Tok::EQUALS) {
      const Token key = next();
      size_t i = 0;
      while (i < keys.size() && key.text != keys[i]) ++i;
      if (i == keys.size()) {
        if (keys.empty()) return err(key, "init={} takes no arguments, got '{}'", kind.text, key.text);
        return err(key, "init={} takes {}, not '{}'", kind.text, fmt::join(keys, " and "), key.text);
      }
      if (given[i]) return err(key, "init argument '{}' given twice", key.text);
      next();  // '='
      NNASM_TRY(f32_value(next(), &args[i]));
      given[i] = true;
    }
    for (size_t i = 0; i < keys.size(); ++i)
      if (!given[i]) return err(kind, "init={} needs {}=", kind.text, keys[i]);
    *out = InitSpec{k, args[0], args[1]};
    return Status::ok();
  }

  // [v, v, ...] with line breaks allowed inside; '=' is consumed. Never holds more values than the
  // (checked) shape, so a huge claimed shape costs nothing.
  Status values(const TensorDesc& d, std::vector<double>* out) {
    const Token open = next();
    if (open.kind != Tok::LBRACKET) return err(open, "expected '[' and values after '=', got {}", describe(open));
    const int64_t want = d.type.shape.numel();
    auto skip_newlines = [&] {
      while (peek().kind == Tok::NEWLINE) next();
    };
    skip_newlines();
    if (peek().kind == Tok::RBRACKET) {
      next();
    } else {
      for (;;) {
        const Token& v = next();
        if (static_cast<int64_t>(out->size()) == want && (v.kind == Tok::NUMBER || v.kind == Tok::IDENT))
          return err(v, "too many values: @{} is {}, which holds {}", d.name, d.type.str(), want);
        double x;
        NNASM_TRY(element_value(v, d.type.dtype, &x));
        out->push_back(x);
        skip_newlines();
        const Token& sep = next();
        if (sep.kind == Tok::RBRACKET) break;
        if (sep.kind != Tok::COMMA) return err(sep, "expected ',' or ']' in the values, got {}", describe(sep));
        skip_newlines();
      }
    }
    if (static_cast<int64_t>(out->size()) != want)
      return err(open, "@{} has {} value{} but {} holds {}", d.name, out->size(), out->size() == 1 ? "" : "s",
                 d.type.str(), want);
    return Status::ok();
  }

  // ---- instructions ----

  Status resolve_input(const Token& t, TensorId* id) {
    *id = p_->find(std::string(t.text));
    if (*id == NO_TENSOR || !p_->defined(*id)) return err(t, "undefined tensor {}{}", sigil_of(t), t.text);
    return check_sigil(t, p_->desc(*id));
  }

  // An output names a tensor no instruction has defined: an `output` line's, or a new temporary.
  // An in-place op's outputs are its inputs, already defined.
  Status resolve_output(const Token& t, int line, bool inplace, TensorId* id) {
    *id = p_->find(std::string(t.text));
    if (*id != NO_TENSOR) {
      if (p_->defined(*id) && !inplace) return redefinition(t, *id);
      return check_sigil(t, p_->desc(*id));
    }
    if (t.kind == Tok::GLOBAL)
      return err(t, "wrong sigil: @{} is not declared, and a tensor that an instruction defines is written %{}",
                 t.text, t.text);
    TensorDesc d;
    d.name = std::string(t.text);
    d.role = Role::TEMPORARY;
    Result<TensorId> r = p_->declare(std::move(d), false);
    if (!r) return located(t, r.status().message());
    *id = *r;
    decl_line_[*id] = line;
    return Status::ok();
  }

  Status imm_value(const OpInfo& info, const ImmSpec& s, const Token& key, Imm* v) {
    const Token& t = next();
    if (t.kind == Tok::ERROR) return err(t, "");
    auto wrong = [&](const char* want) {
      return err(key, "immediate '{}' of {} takes {}, got {}", s.key, info.mnemonic, want, describe(t));
    };
    v->type = s.type;
    double f;
    switch (s.type) {
      case ImmType::F32:
        if (t.kind != Tok::NUMBER && !(t.kind == Tok::IDENT && (t.text == "nan" || t.text == "inf")))
          return wrong("a number");
        NNASM_TRY(f32_value(t, &v->f));
        return Status::ok();
      case ImmType::I64:
        if (t.kind != Tok::NUMBER) return wrong("an integer");
        NNASM_TRY(number(t, "an integer", &f));
        if (!parse_i64(t.text, &v->i)) return wrong("an integer");
        return Status::ok();
      case ImmType::BOOL:
        if (t.text == "0" || t.text == "false") v->i = 0;
        else if (t.text == "1" || t.text == "true") v->i = 1;
        else return wrong("0 or 1");
        return Status::ok();
      case ImmType::ENUM:
        for (size_t c = 0; c < s.choices.size(); ++c)
          if (t.kind == Tok::IDENT && t.text == s.choices[c]) {
            v->i = static_cast<int64_t>(c);
            v->ident = s.choices[c];
            return Status::ok();
          }
        return err(key, "immediate '{}' of {} must be one of {}, got {}", s.key, info.mnemonic,
                   fmt::join(s.choices, "|"), describe(t));
      case ImmType::STR:
        if (t.kind != Tok::STRING) return wrong("a string in double quotes");
        v->ident = unescape_string(t.text);
        return Status::ok();
      case ImmType::INTS:
        if (t.kind != Tok::LBRACKET) return wrong("a list of integers like [1,2]");
        v->ints.clear();
        if (peek().kind == Tok::RBRACKET) {
          next();
          return Status::ok();
        }
        for (;;) {
          const Token& e = next();
          if (e.kind != Tok::NUMBER) return err(e, "expected an integer, got {}", describe(e));
          NNASM_TRY(number(e, "an integer", &f));
          int64_t n;
          if (!parse_i64(e.text, &n))
            return err(key, "immediate '{}' of {} takes a list of integers, got '{}'", s.key, info.mnemonic, e.text);
          v->ints.push_back(n);
          const Token& sep = next();
          if (sep.kind == Tok::RBRACKET) return Status::ok();
          if (sep.kind != Tok::COMMA) return err(sep, "expected ',' or ']' in the list, got {}", describe(sep));
        }
    }
    return Status::ok();
  }

  // MNEMONIC in, ... -> out, ... key=value ...
  Status instruction() {
    const Token mn = next();
    const OpInfo* info = op_by_mnemonic(mn.text);
    if (!info) return err(mn, "unknown mnemonic '{}'", mn.text);
    Instruction ins = make_instruction(info->op, {}, {});
    ins.section = SECTIONS[section_index_];
    ins.loc = SrcLoc{file_, mn.line, mn.col};

    if (peek().kind == Tok::ARROW) {
      next();
    } else {
      for (;;) {
        const Token& t = next();
        if (!is_operand(t)) return err(t, "expected an input operand like %x, got {}", describe(t));
        TensorId id;
        NNASM_TRY(resolve_input(t, &id));
        ins.in.push_back(id);
        const Token& sep = next();
        if (sep.kind == Tok::ARROW) break;
        if (sep.kind != Tok::COMMA) return err(sep, "expected ',' or '->' after an input, got {}", describe(sep));
      }
    }
    for (;;) {
      const Token& t = next();
      if (!is_operand(t)) return err(t, "expected an output operand like %y, got {}", describe(t));
      TensorId id;
      NNASM_TRY(resolve_output(t, mn.line, info->flags & OPF_INPLACE, &id));
      ins.out.push_back(id);
      if (peek().kind != Tok::COMMA) break;
      next();
    }

    std::vector<bool> given(info->imms.size(), false);
    while (peek().kind == Tok::IDENT) {
      const Token key = next();
      const int k = imm_index(*info, key.text);
      if (k < 0) {
        std::vector<std::string> keys;
        for (const ImmSpec& s : info->imms) keys.push_back(s.key);
        if (keys.empty()) return err(key, "{} takes no immediates, got '{}'", info->mnemonic, key.text);
        return err(key, "{} has no immediate '{}' (it takes {})", info->mnemonic, key.text, fmt::join(keys, ", "));
      }
      if (given[k]) return err(key, "immediate '{}' given twice", key.text);
      const Token& eq = next();
      if (eq.kind != Tok::EQUALS) return err(eq, "expected '=' after '{}', got {}", key.text, describe(eq));
      NNASM_TRY(imm_value(*info, info->imms[k], key, &ins.imm[k]));
      given[k] = true;
    }
    NNASM_TRY(end_of_statement());
    for (size_t k = 0; k < info->imms.size(); ++k)
      if (!given[k] && !info->imms[k].has_default)
        return err(mn, "{} needs immediate '{}'", info->mnemonic, info->imms[k].key);
    Status s = p_->append(std::move(ins));
    if (!s) return located(mn, s.message());
    return Status::ok();
  }

  const Lexed& lx_;
  const std::vector<Token>& t_;
  const std::string& file_;
  Program* p_;
  size_t pos_ = 0;
  bool in_section_ = false;
  int section_index_ = 0;
  std::vector<OutputLine> outputs_;
  std::unordered_map<TensorId, int> decl_line_;
};

}  // namespace

Status program_parse(std::string_view text, const std::string& filename, Program* out) {
  if (!out) return Status::errorf("{}: error: no program to parse into", filename);
  if (!out->tensors().empty() || !out->code().empty())
    return Status::errorf("{}: error: the program to parse into is not empty", filename);
  Lexed lx;
  lex_listing(text, &lx);
  NNASM_TRY(Parser(lx, filename, out).run());
  // Prepare would allocate every tensor declared: the same limit as importers and model files.
  return check_program_bytes(*out).with_prefix(filename + ": error: ");
}

Status program_parse_file(const std::string& path, Program* out) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return Status::errorf("{}: error: cannot read: {}", path, std::strerror(errno));
  std::string text;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  const bool failed = std::ferror(f);
  const int e = errno;
  std::fclose(f);
  if (failed) return Status::errorf("{}: error: cannot read: {}", path, std::strerror(e));
  return program_parse(text, path, out);
}

}  // namespace nnasm
