#!/usr/bin/env bash
# Keeps README's word on what `make` leaves under build/: every `build/...` path README.md names in
# backticks exists after `make test` (which runs this), and a named folder (`build/samples/`)
# holds a program for every sample source in samples/. Exit status 0 when all exist.
set -euo pipefail
NNASM=$(cd "$(dirname "$0")/.." && pwd)
cd "$NNASM"
missing=0
for path in $(grep -o '`build/[^` ]*`' README.md | tr -d '`' | sort -u); do
  case "$path" in
    */)
      for src in "${path#build/}"*.cpp "${path#build/}"*.c; do
        [ -e "$src" ] || continue
        exe="$path$(basename "${src%.*}")"
        [ -x "$exe" ] || { echo "readme_files: README names $path, but $exe is missing" >&2; missing=1; }
      done ;;
    *) [ -e "$path" ] || { echo "readme_files: README names $path, which is missing" >&2; missing=1; } ;;
  esac
done
[ "$missing" = 0 ] && echo "readme_files: every file README names under build/ is there"
