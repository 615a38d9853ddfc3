#!/usr/bin/env bash
# Checks that every #include "..." between the library's folders points down the list of layers in
# tests/layers/allowed.txt, and that the list itself is one-way (no layer reaches itself through
# others). Prints each offending include as file:line and exits 1; silent and 0 when all is well.
set -euo pipefail
cd "$(dirname "$0")/.."
list=tests/layers/allowed.txt
awk -v list="$list" '
  function layer_of(path,   best, l) {
    best = ""
    for (l in allowed) if (index(path, l "/") == 1 && length(l) > length(best)) best = l
    return best
  }
  function reaches(a, b, seen,   c, n, parts, i) {  # does a include b through the list?
    n = split(allowed[a], parts, " ")
    for (i = 1; i <= n; i++) {
      c = parts[i]
      if (c == b) return 1
      if (!(c in seen)) { seen[c] = 1; if (reaches(c, b, seen)) return 1 }
    }
    return 0
  }
  FILENAME == list {
    sub(/#.*/, "")
    if (NF == 0) next
    name = $1; sub(/:$/, "", name)
    $1 = ""; allowed[name] = substr($0, 2)
    next
  }
  FNR == 1 && !checked_list {
    checked_list = 1
    for (l in allowed) {
      n = split(allowed[l], parts, " ")
      for (i = 1; i <= n; i++) if (!(parts[i] in allowed)) { printf "%s: %s names an unknown layer %s\n", list, l, parts[i]; bad = 1 }
      delete seen
      if (reaches(l, l, seen)) { printf "%s: layer %s reaches itself: the list is not one-way\n", list, l; bad = 1 }
    }
  }
  /^[ \t]*#[ \t]*include[ \t]*"/ {
    inc = $0; sub(/^[^"]*"/, "", inc); sub(/".*/, "", inc)
    from = layer_of(FILENAME); to = layer_of(inc)
    if (from == "" || to == "" || from == to) next
    if ((" " allowed[from] " ") !~ (" " to " ")) {
      printf "%s:%d: %s includes %s (layer %s), which its layer may not (%s)\n", FILENAME, FNR, from, inc, to, list
      bad = 1
    }
  }
  END { exit bad }
' "$list" $(git ls-files -co --exclude-standard -- '*.h' '*.cpp' '*.c' '*.def' | grep -v '^tests/')
