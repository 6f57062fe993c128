#!/usr/bin/env bash
# Two builds of `strata serve`, one at a time on a fresh directory (no second server competing
# for the cores), alternating: redis-benchmark SET then GET of 1 KiB values, twice.
#
#   OLD_BIN=/path/to/old/strata ROUNDS=3 bench/server-ab.sh
#
# Build the old one in a worktree with its own target directory, e.g.
#   git worktree add /tmp/old <commit> && (cd /tmp/old && CARGO_TARGET_DIR=/tmp/old-target \
#     cargo build --release -p strata-cli)
set -euo pipefail
cd "$(dirname "$0")/.."
NEW_BIN=${NEW_BIN:-./target/release/strata}
OLD_BIN=${OLD_BIN:?set OLD_BIN to the other build}
ROUNDS=${ROUNDS:-3}
N=${N:-300000}
PORT=${PORT:-16393}
DIR=${BENCH_DIR:-./bench-data}/server-ab
rate() { tr '\r' '\n' | grep "requests per second" | tail -1 | awk '{print int($2)}'; }
run() {
  rm -rf "$DIR" && mkdir -p "$DIR"
  RUST_LOG=warn "$1" --dir "$DIR" serve --port "$PORT" --appendfsync everysec >/dev/null 2>&1 &
  local pid=$!
  for _ in $(seq 1 100); do redis-cli -p "$PORT" PING >/dev/null 2>&1 && break; sleep 0.1; done
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
  echo "new: $(run "$NEW_BIN")"
  echo "old: $(run "$OLD_BIN")"
done
