#!/usr/bin/env bash
# Keeps README's "Use nnasm from your own project" true: takes the C++ program of "## A model in
# C++" and the first ```sh block of "## Use nnasm from your own project" out of README.md, runs
# those commands as written (NNASM set to this checkout, HOME a scratch directory, so the install
# goes there), runs the program, and checks that it prints the listing of "## A listing".
# `make test` runs it after the suite. Exit status 0 when all three hold.
set -euo pipefail
NNASM=$(cd "$(dirname "$0")/.." && pwd)
export NNASM
readme="$NNASM/README.md"
[ -f "$NNASM/build/libnnasm.so" ] || { echo "readme_build: build/libnnasm.so is missing (run make first)" >&2; exit 1; }

# The first fenced block opening with ```LANG (any language when LANG is empty) in the section
# whose heading is exactly HEADING.
block() {
  awk -v heading="$1" -v lang="$2" '
    /^## / { in_section = ($0 == heading); next }
    in_section && !inside && !done && /^```/ { if (lang == "" || $0 == "```" lang) { inside = 1; next } }
    inside && /^```/ { inside = 0; done = 1; next }
    inside { print }' "$readme"
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
block "## A model in C++" cpp > "$work/my.cpp"
block "## Use nnasm from your own project" sh > "$work/build.sh"
block "## A listing" "" > "$work/listing.txt"
for f in my.cpp build.sh listing.txt; do
  [ -s "$work/$f" ] || { echo "readme_build: README.md has no block for $f" >&2; exit 1; }
done

echo "readme_build: $(tr -d '\\' < "$work/build.sh" | tr -s ' \n' ' ')"
(cd "$work" && HOME="$work" bash -e build.sh) || { echo "readme_build: README's compile line failed" >&2; exit 1; }
(cd "$work" && ./my > out.txt) || { echo "readme_build: README's program failed" >&2; exit 1; }
if ! head -n "$(wc -l < "$work/listing.txt")" "$work/out.txt" | diff -u "$work/listing.txt" - >&2; then
  echo "readme_build: the program's listing (+) differs from README's (-)" >&2
  exit 1
fi
echo "readme_build: README's program builds with README's command line and prints README's listing"
