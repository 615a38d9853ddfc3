#!/usr/bin/env bash
# The LSTM training step of samples/fashion_lstm.cpp's model at batch 64, one thread: nnasm
# (tests/bench/lstm_train_b64.nnasm, `nnasm bench --train`) against PyTorch 1.13 eager
# (tests/bench/torch_lstm_train.py), side by side in alternating rounds (nnasm first in odd
# rounds, PyTorch first in even ones, as a shared VM's speed drifts), each round a process of each
# timing for SECONDS. Prints each round's p50s, then the medians over the rounds and their ratio
# (the issue's target: nnasm ≤ 0.5 × PyTorch).
#
# Usage: tests/bench/lstm_train_b64.sh [ROUNDS [SECONDS]]    (defaults 6 and 3; from the repo root,
# after `make build/nnasm`; PyTorch from Debian's python3-torch)
set -euo pipefail
rounds=${1:-6} seconds=${2:-3}
cd "$(dirname "$0")/../.."
nnasm=(build/nnasm bench tests/bench/lstm_train_b64.nnasm --train --threads 1 --seconds "$seconds")
torch=(/usr/bin/python3 tests/bench/torch_lstm_train.py "$seconds")

# p50 in ms from a `latency:` line.
p50() { awk '/^latency:/ { for (i = 1; i <= NF; ++i) if ($i == "p50") { v = $(i + 1); if ($(i + 2) == "us") v /= 1000; print v } }'; }

rows=""
for ((i = 1; i <= rounds; ++i)); do
  if ((i % 2)); then
    a=$("${nnasm[@]}" | p50); b=$("${torch[@]}" | p50)
  else
    b=$("${torch[@]}" | p50); a=$("${nnasm[@]}" | p50)
  fi
  echo "round $i: nnasm p50 $a ms, PyTorch p50 $b ms" >&2
  rows+="$a $b"$'\n'
done
printf '%s' "$rows" | awk -v rounds="$rounds" '
  function median(x, n,   i, j, t) {
    for (i = 2; i <= n; ++i) for (j = i; j > 1 && x[j - 1] > x[j]; --j) { t = x[j]; x[j] = x[j - 1]; x[j - 1] = t }
    return n % 2 ? x[(n + 1) / 2] : (x[n / 2] + x[n / 2 + 1]) / 2
  }
  NF == 2 { n++; a[n] = $1; b[n] = $2 }
  END {
    if (n != rounds) { print "lstm_train_b64.sh: " n " of " rounds " rounds gave figures" > "/dev/stderr"; exit 1 }
    ma = median(a, n); mb = median(b, n)
    printf "LSTM(128) training step, batch 64, 1 thread: nnasm %.2f ms, PyTorch %.2f ms (medians of %d rounds): %.2fx\n", ma, mb, n, ma / mb
  }'
