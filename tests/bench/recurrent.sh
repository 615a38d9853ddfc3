#!/usr/bin/env bash
# The recurrent layers' figures of docs/benchmarks.md, one thread: this machine's L2 read
# bandwidth (tests/bench/models/l2_read.cpp), then each listing's p50 with `nnasm bench` and the share of
# that bandwidth its weights stream at, counting only the bytes every step must read from L2 (the
# LSTM's recurrent weights R; for the stepped model also W, since one step's projection reads it
# whole), over the whole run's time: a lower bound.
#
# Usage: tests/bench/recurrent.sh [SECONDS]   (default 2; from the repo root, after
# `make build/nnasm build/bench-models/l2_read`, which `make bench-recurrent` does)
set -euo pipefail
seconds=${1:-2}
cd "$(dirname "$0")/../.."
line=$(build/bench-models/l2_read 256)
echo "$line"
bw=$(awk '{ print $4 }' <<<"$line")

# p50 in µs from `nnasm bench`.
p50() {
  build/nnasm bench "$1" --threads 1 --seconds "$seconds" |
    awk '/^latency:/ { v = $3; if ($4 == "ms") v *= 1000; print v }'
}
# listing, bytes a step reads from L2, steps a run, what it is
row() {
  local us; us=$(p50 "$1")
  awk -v us="$us" -v bytes="$2" -v steps="$3" -v bw="$bw" -v what="$4" 'BEGIN {
    printf "| %s | %.1f µs | %.2f µs | %.0f%% |\n", what, us, us / steps, 100 * bytes * steps / (us * 1e-6) / (bw * 1e9) }'
}
echo "| listing (batch 1, one thread) | p50 | per step and layer | of L2 bandwidth |"
echo "|---|---:|---:|---:|"
row tests/bench/lstm_64x128x2_t32.nnasm $((512 * 128 * 4)) 64 "LSTM 64→128→128, 32 steps (\`lstm_64x128x2_t32\`)"
row tests/bench/gru_32x64_t16.nnasm $((192 * 64 * 4)) 16 "GRU 32→64, 16 steps (\`gru_32x64_t16\`)"
row tests/bench/lstm_step_28x128.nnasm $((512 * (128 + 28) * 4)) 1 "LSTM 28→128 stepped once a run (\`lstm_step_28x128\`)"
