#!/usr/bin/env bash
# Do keys with expiry times slow down GET and SET of keys without? One `strata serve` at a
# time on a fresh directory (no second server competing for the cores), alternating: both
# preloaded with 1 M small keys, with expiry times (EX 100000) or without, then 20 s to settle;
# then redis-benchmark
# SET and GET of 1 KiB values on other keys, twice. Prints one line per run and the medians.
#
#   ROUNDS=5 bench/ttl-overhead.sh
#
# Needs redis-benchmark and a release build (`cargo build --release -p strata-cli`).
set -euo pipefail
cd "$(dirname "$0")/.."
S=${STRATA_BIN:-./target/release/strata}
ROUNDS=${ROUNDS:-5}
N=${N:-300000}
PORT=${PORT:-16395}
DIR=${BENCH_DIR:-./bench-data}/ttl-overhead
rate() { tr '\r' '\n' | grep "requests per second" | tail -1 | awk '{print int($2)}'; }
run() { # ttl-args
  rm -rf "$DIR" && mkdir -p "$DIR"
  RUST_LOG=warn "$S" --dir "$DIR" serve --port "$PORT" --appendfsync everysec >/dev/null 2>&1 &
  local pid=$!
  for _ in $(seq 1 100); do redis-cli -p "$PORT" PING >/dev/null 2>&1 && break; sleep 0.1; done
  # shellcheck disable=SC2086
  redis-benchmark -p "$PORT" -n 1000000 -r 100000000 -c 50 -P 16 -q SET ttl:__rand_int__ v $1 >/dev/null
  # Let the flushes and compactions of the preload finish in both modes.
  sleep "${SETTLE_SECS:-20}"
  local out=""
  for k in 1 2; do
    for t in set get; do
      out="$out $t$k=$(redis-benchmark -p "$PORT" -t $t -n "$N" -r 1000000 -d 1024 -c 50 -P 16 -q | rate)"
    done
  done
  kill "$pid"; wait "$pid" 2>/dev/null || true
  echo "$out"
}
for r in $(seq 1 "$ROUNDS"); do
  echo "plain: $(run "")"
  echo "ttl:   $(run "EX 100000")"
done
