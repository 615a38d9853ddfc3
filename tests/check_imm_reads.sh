#!/usr/bin/env bash
# Checks that no code outside isa/ reads an immediate by a written-out position (ins.f(0),
# ins.i(2), ins.ints(1), ins.imm[3]): positions come from the opcode table through NNASM_IMM
# (isa/opcode.h), so a schema that changes order breaks the build, not a run. Prints each
# offending line as file:line and exits 1; silent and 0 when all is well.
set -euo pipefail
cd "$(dirname "$0")/.."
if grep -rnE '\.(i|f|ints)\([0-9]+\)|imm\[[0-9]+\]' --include='*.cpp' --include='*.h' \
     api engine jit ops serialize shell samples; then
  echo "read immediates by name: NNASM_IMM(OP, key) (isa/opcode.h)" >&2
  exit 1
fi
