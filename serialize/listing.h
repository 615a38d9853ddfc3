// The text listing: a Program written as assembler-like source (declarations, then `forward:`,
// `backward:` and `update:` sections of instructions) and read back. The printer writes one normalized form, and the parser
// reads it (and looser hand-written text) so that print(parse(print(P))) == print(P). Both are
// driven by the opcode table, so a new opcode needs no code here. The format is described in
// docs/listing.md; in short:
//
//   input  %x : f32[1,784]
//   param  @w : f32[784,10]  init=he_normal
//   const  @k : f32[3] = [1, 2.5, -3]
//   output %y
//
//   forward:
//     MATMUL       %x, @w -> %t0  transA=0 transB=0       ; f32[1,10]
//     SOFTMAX      %t0 -> %y  axis=-1                     ; f32[1,10]
#pragma once
#include <functional>
#include <string>
#include <string_view>

#include "isa/program.h"
#include "isa/status.h"

namespace nnasm {

// The normalized listing of `p`: declarations of inputs, params and consts and `output` lines in
// declaration order, a blank line, `forward:`, then every instruction with all of its immediates
// and its inferred output types in a trailing comment. Deterministic. Requires every tensor name
// to be a listing name ([A-Za-z_][A-Za-z0-9_.]*) for the text to parse back. Thread-safe for
// concurrent readers of `p`.
std::string program_print(const Program& p);

// The same, with `note(i)` (when non-empty) added to instruction i's trailing comment — e.g. the
// kernel the executor chose — so a listing shows what the engine decided. The parser ignores it.
std::string program_print(const Program& p, const std::function<std::string(size_t)>& note);

// Parses listing `text` into `*out`, which must be an empty Program (bound to a Context): its
// tensors are added to that Context. `filename` is used in messages only. Stops at the first
// error and returns "FILE:LINE:COL: error: MESSAGE" (1-based, COL at the offending token); `*out`
// then holds a partial program and should be discarded. Total: any byte string gives a program
// or an error. Allocates only in proportion to `text`. Not thread-safe for one Program.
Status program_parse(std::string_view text, const std::string& filename, Program* out);

// Reads the file at `path` and parses it as above. An unreadable file gives
// "PATH: error: cannot read: REASON".
Status program_parse_file(const std::string& path, Program* out);

}  // namespace nnasm
