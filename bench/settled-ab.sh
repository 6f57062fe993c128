#!/usr/bin/env bash
# Two `strata serve` (two builds, or one build with two sets of flags) side by side on a store
# preloaded with SETs of 1 KiB values and left to settle (flushes and compactions done), then
# redis-benchmark tests on both, alternating which goes first each round. Prints one line per
# round and test with requests/s of A and B and the ratio A / B.
#
#   A_BIN=target/release/strata B_BIN=/tmp/old/strata TESTS=get,incr ROUNDS=5 bench/settled-ab.sh
#   A_ARGS="--io-threads 2" B_ARGS="--io-threads 1" TESTS=get,sadd bench/settled-ab.sh
#
# Needs redis-benchmark and redis-cli (Debian: redis-tools) and release builds.
set -euo pipefail
cd "$(dirname "$0")/.."
A_BIN=${A_BIN:-./target/release/strata}
B_BIN=${B_BIN:-$A_BIN}
A_ARGS=${A_ARGS:-}
B_ARGS=${B_ARGS:-}
TESTS=${TESTS:-get}
ROUNDS=${ROUNDS:-3}
N=${N:-300000}
PRELOAD_N=${PRELOAD_N:-300000}
SETTLE_SECS=${SETTLE_SECS:-30}
PIPELINE=${PIPELINE:-16}
A_PORT=${A_PORT:-16501}
B_PORT=${B_PORT:-16502}
DIR=${BENCH_DIR:-./bench-data}/settled-ab
rate() { tr '\r' '\n' | grep "requests per second" | tail -1 | awk '{print int($2)}'; }
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true' EXIT
rm -rf "$DIR" && mkdir -p "$DIR/a" "$DIR/b"
# shellcheck disable=SC2086 # the flags are a list
RUST_LOG=warn "$A_BIN" --dir "$DIR/a" serve --port "$A_PORT" --appendfsync everysec $A_ARGS >/dev/null 2>&1 &
pids+=($!)
# shellcheck disable=SC2086
RUST_LOG=warn "$B_BIN" --dir "$DIR/b" serve --port "$B_PORT" --appendfsync everysec $B_ARGS >/dev/null 2>&1 &
pids+=($!)
for port in "$A_PORT" "$B_PORT"; do
  for _ in $(seq 1 100); do redis-cli -p "$port" PING >/dev/null 2>&1 && break; sleep 0.1; done
done
for port in "$A_PORT" "$B_PORT"; do
  redis-benchmark -p "$port" -t set -n "$PRELOAD_N" -r 1000000 -d 1024 -c 50 -P 16 -q >/dev/null
  sleep "$SETTLE_SECS"
done
bench() { redis-benchmark -p "$1" -t "$2" -n "$N" -r 1000000 -d 1024 -c 50 -P "$PIPELINE" -q | rate; }
echo "# $(date -u +%FT%TZ) A=$A_BIN $A_ARGS B=$B_BIN $B_ARGS N=$N -P $PIPELINE, $(nproc) cores"
for r in $(seq 1 "$ROUNDS"); do
  for t in ${TESTS//,/ }; do
    if [ $((r % 2)) -eq 1 ]; then
      a=$(bench "$A_PORT" "$t"); b=$(bench "$B_PORT" "$t")
    else
      b=$(bench "$B_PORT" "$t"); a=$(bench "$A_PORT" "$t")
    fi
    echo "round $r $t a=$a b=$b ratio=$(awk -v a="$a" -v b="$b" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "-"}')"
  done
done
