#!/usr/bin/env bash
# Keeps docs/install.md true: installs nnasm (make install DESTDIR=… PREFIX=…) into a temporary
# folder, checks that libnnasm.so is a library a game can ship (its soname, no protobuf or onnx
# among its dependencies, nothing but nnasm_* and nnasm:: exported), then builds this folder's two
# consumer programs from scratch against the installed tree twice — with CMake (CMakeLists.txt:
# find_package(nnasm), nnasm::nnasm, nnasm::c and nnasm::import) and with pkg-config and a plain
# g++/gcc line — and runs each: model.cpp (C++ shell functions, checked against a plain loop),
# embed.c (the C API on tiny.nnasm) and import.cpp (a call into libnnasm_import). `make test` runs it (not under SAN); exit status 0 when all hold.
set -euo pipefail
NNASM=$(cd "$(dirname "$0")/../.." && pwd)
here="$NNASM/tests/install"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
die() { echo "consumer_test: $*" >&2; exit 1; }
step() { echo "consumer_test: $*"; }

# DESTDIR and PREFIX both: the files land under $work/root, and name $prefix inside them.
prefix=/opt/nnasm-test
root="$work/root"
inst="$root$prefix"
make -C "$NNASM" --no-print-directory -s install DESTDIR="$root" PREFIX="$prefix" >/dev/null ||
  die "make install failed"
# The pkg-config files name the prefix; the CMake package finds its own place, so it works moved.
sed -i "s|^prefix=.*|prefix=$inst|" "$inst"/lib/pkgconfig/*.pc

version=$(sed -n 's/^#define NNASM_VERSION_STRING "\(.*\)"/\1/p' "$NNASM/engine/version.h")
major=${version%%.*}
lib="$inst/lib/libnnasm.so.$version"
for f in "$lib" "$inst/lib/libnnasm_import.so.$version" "$inst/lib/libnnasm.a" "$inst/include/nnasm.h" \
         "$inst/include/nnasm/shell/shell.h" "$inst/lib/cmake/nnasm/nnasmConfig.cmake" \
         "$inst/lib/cmake/nnasm/nnasmConfigVersion.cmake" "$inst/lib/pkgconfig/nnasm.pc" \
         "$inst/lib/pkgconfig/nnasm++.pc" "$inst/bin/nnasm"; do
  [ -e "$f" ] || die "make install left no ${f#"$inst"/}"
done
for l in libnnasm libnnasm_import; do
  [ "$(readlink "$inst/lib/$l.so.$major")" = "$l.so.$version" ] || die "$l.so.$major is not a link to $l.so.$version"
  [ "$(readlink "$inst/lib/$l.so")" = "$l.so.$version" ] || die "$l.so is not a link to $l.so.$version"
done

step "libnnasm.so: soname, dependencies, exported symbols"
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "libnnasm.so.$major" ] || die "libnnasm.so's soname is '$soname', not libnnasm.so.$major"
if readelf -d "$lib" | grep -E 'NEEDED.*(protobuf|onnx|libz\.)'; then
  die "libnnasm.so needs protobuf, onnx or zlib (they belong to libnnasm_import and the samples)"
fi
exported=$(nm -D --defined-only "$lib" | c++filt | cut -d' ' -f3-)
[ -n "$exported" ] || die "libnnasm.so exports nothing"
stray=$(grep -v -E '^(nnasm_|nnasm::|(vtable|VTT|typeinfo|typeinfo name|guard variable) for nnasm::|(non-)?virtual thunk to nnasm::)' \
        <<< "$exported" || true)
[ -z "$stray" ] || die "libnnasm.so exports more than nnasm_* and nnasm:: (api/libnnasm.map):
$(head -n 10 <<< "$stray")"
grep -q 'fmt::' <<< "$exported" && die "libnnasm.so exports fmt:: symbols"
grep -q '^nnasm_model_load_file$' <<< "$exported" || die "libnnasm.so does not export the C API"

step "the installed C++ headers: all of them compile with -I$prefix/include alone"
(cd "$inst/include" && find nnasm -name '*.h' | sort | sed 's|.*|#include <&>|') > "$work/all_headers.cpp"
[ -s "$work/all_headers.cpp" ] || die "no C++ headers under include/nnasm/"
g++ -std=c++17 -fsyntax-only -I"$inst/include" "$work/all_headers.cpp" ||
  die "the installed headers do not compile with -I$prefix/include alone"

run_pair() {  # $1: the folder holding model, embed and import
  LD_LIBRARY_PATH="$inst/lib" "$1/model" > "$1/model.out" || die "$1/model failed"
  grep -q '^model: ok 2\.0000' "$1/model.out" || die "$1/model printed: $(head -n 1 "$1/model.out")"
  LD_LIBRARY_PATH="$inst/lib" "$1/embed" "$here/tiny.nnasm" > "$1/embed.out" || die "$1/embed failed"
  grep -q '^embed: ok' "$1/embed.out" || die "$1/embed printed: $(cat "$1/embed.out")"
  local deps; deps=$(LD_LIBRARY_PATH="$inst/lib" ldd "$1/model")
  grep -q "libnnasm.so.$major => $inst/lib/" <<< "$deps" || die "$1/model is not linked to the installed libnnasm.so"
  LD_LIBRARY_PATH="$inst/lib" "$1/import" > "$1/import.out" || die "$1/import failed"
  grep -q '^import: ok' "$1/import.out" || die "$1/import printed: $(cat "$1/import.out")"
  echo "  $(head -n 1 "$1/model.out"); $(cat "$1/embed.out"); $(cat "$1/import.out")"
}

step "CMake: find_package(nnasm), nnasm::nnasm, nnasm::c and nnasm::import"
cmake -S "$here" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$inst" -DCMAKE_BUILD_TYPE=Release >"$work/cmake.log" 2>&1 ||
  { cat "$work/cmake.log" >&2; die "cmake configure failed"; }
cmake --build "$work/cmake" >>"$work/cmake.log" 2>&1 || { cat "$work/cmake.log" >&2; die "cmake build failed"; }
run_pair "$work/cmake"

step "pkg-config: nnasm++, nnasm and nnasm_import with g++ and gcc"
export PKG_CONFIG_PATH="$inst/lib/pkgconfig"
mkdir -p "$work/pc"
# shellcheck disable=SC2046  # pkg-config's flags are meant to split
g++ -std=c++17 -O2 "$here/model.cpp" -o "$work/pc/model" $(pkg-config --cflags --libs nnasm++) ||
  die "g++ with pkg-config nnasm++ failed"
# shellcheck disable=SC2046
gcc -std=c99 -O2 "$here/embed.c" -o "$work/pc/embed" $(pkg-config --cflags --libs nnasm) -lm ||
  die "gcc with pkg-config nnasm failed"
# shellcheck disable=SC2046
g++ -std=c++17 -O2 "$here/import.cpp" -o "$work/pc/import" $(pkg-config --cflags --libs nnasm_import) ||
  die "g++ with pkg-config nnasm_import failed"
run_pair "$work/pc"
echo "consumer_test: the installed nnasm builds and runs with CMake and with pkg-config"
