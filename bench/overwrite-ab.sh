#!/bin/bash
# Overwrites of existing keys through `strata serve`, one build after another, on a fresh
# directory each: 1 M SETs of 1 KiB over 1 M keys first (so every later SET overwrites), 5 s to
# settle, then SET -P 16 and SET -P 1 over the same keys. Prints requests/s per build and round.
#   BINS="path/to/new/strata path/to/old/strata" ROUNDS=2 bench/overwrite-ab.sh
set -euo pipefail
BINS=${BINS:?set BINS to the strata binaries to compare}
ROUNDS=${ROUNDS:-2}
PORT=${PORT:-16400}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
for round in $(seq 1 "$ROUNDS"); do
  for bin in $BINS; do
    rm -rf "$WORK/d"
    RUST_LOG=warn "$bin" --dir "$WORK/d" serve --port "$PORT" --appendfsync everysec > /dev/null 2>&1 &
    pid=$!
    sleep 1.5
    redis-benchmark -p "$PORT" -t set -n 1000000 -r 1000000 -d 1024 -c 50 -P 16 -q > /dev/null 2>&1
    sleep 5
    for P in 16 1; do
      n=300000; [ "$P" = 1 ] && n=100000
      r=$(redis-benchmark -p "$PORT" -t set -n "$n" -r 1000000 -d 1024 -c 50 -P "$P" -q 2>/dev/null \
        | tr '\r' '\n' | grep "requests per second" | tail -1)
      echo "round $round $bin P$P $r"
    done
    kill "$pid"; wait "$pid" 2>/dev/null || true
  done
done
