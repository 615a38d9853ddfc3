#!/usr/bin/env bash
# Compares two builds of nnasm on a host whose speed drifts (a shared VM): runs `A bench ARGS`
# and `B bench ARGS` as PAIRS pairs of processes, A first in odd pairs and B first in even ones
# (on a shared VM the second process of a pair can run faster, whichever build it is), and
# prints, for the p50 and the min of each process, the median over the pairs of B − A and in how
# many pairs B was faster. A difference is worth believing when its sign holds in most pairs.
#
# Usage: tests/bench/paired.sh A B PAIRS [nnasm bench arguments...]
# Example (the build before a change against this one, the 2-thread GEMV):
#   git worktree add /tmp/before HEAD~1 && make -C /tmp/before build/nnasm
#   tests/bench/paired.sh /tmp/before/build/nnasm build/nnasm 14 \
#     tests/bench/gemv_1x784x256.nnasm --threads 2 --seconds 1
set -euo pipefail
if [ $# -lt 4 ]; then
  sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
a=$1 b=$2 pairs=$3
shift 3
case $pairs in '' | *[!0-9]*) echo "paired.sh: PAIRS must be a count, got '$pairs'" >&2; exit 2 ;; esac
for bin in "$a" "$b"; do
  [ -x "$bin" ] || { echo "paired.sh: $bin is not an executable" >&2; exit 2; }
done

# One process: "p50 min" in µs from nnasm bench's latency line.
measure() {
  "$1" bench "${@:2}" | awk '/^latency:/ {
      for (i = 1; i <= NF; ++i) {
        v = $(i + 1); u = $(i + 2); if (u == "ms") v *= 1000
        if ($i == "p50") p50 = v
        if ($i == "min") lo = v
      }
      print p50, lo }'
}

rows=""
for ((i = 1; i <= pairs; ++i)); do
  if ((i % 2)); then
    ra=$(measure "$a" "$@"); rb=$(measure "$b" "$@")
  else
    rb=$(measure "$b" "$@"); ra=$(measure "$a" "$@")
  fi
  echo "pair $i (p50 min, us): A $ra  B $rb" >&2
  rows+="$ra $rb"$'\n'
done
printf '%s' "$rows" | awk -v pairs="$pairs" '
  function median(x, n,   i, j, t) {
    for (i = 2; i <= n; ++i) for (j = i; j > 1 && x[j - 1] > x[j]; --j) { t = x[j]; x[j] = x[j - 1]; x[j - 1] = t }
    return n % 2 ? x[(n + 1) / 2] : (x[n / 2] + x[n / 2 + 1]) / 2
  }
  NF == 4 { n++; ap[n] = $1; am[n] = $2; dp[n] = $3 - $1; dm[n] = $4 - $2; fp += $3 < $1; fm += $4 < $2 }
  END {
    if (n != pairs) { print "paired.sh: " n " of " pairs " pairs gave figures" > "/dev/stderr"; exit 1 }
    printf "p50: A %.2f us (median), B - A %+.3f us (median of pairs), B faster in %d of %d\n", median(ap, n), median(dp, n), fp, n
    printf "min: A %.2f us (median), B - A %+.3f us (median of pairs), B faster in %d of %d\n", median(am, n), median(dm, n), fm, n
  }'
