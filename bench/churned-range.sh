#!/usr/bin/env bash
# LRANGE over a list whose positions were popped and pushed again, alone (redis-benchmark's
# LRANGE_* lines also run a burst of LPUSHes first). Both servers are churned the same way
# first: PREP_PASSES passes of `redis-benchmark -t lpush,rpush,lpop,rpop,lrange_100,lrange_300`
# (N requests each, 3-byte values, -P 16), which leaves the head of `mylist` at positions that
# also have versions in older tables. Then ROUNDS alternating bursts of N `LRANGE mylist 0 LAST`
# against each, recording requests/s and the server's CPU time per request (user + system, from
# /proc). Prints CSV lines `round,side,requests_per_s,cpu_us_per_request`, then the medians.
#
#   A_BIN=target/release/strata bench/churned-range.sh              # against redis-server
#   A_BIN=target/release/strata B_BIN=/path/to/older/strata LAST=299 bench/churned-range.sh
#
# B is redis-server (append-only file, fsync every second) unless B_BIN names a Strata build.
set -euo pipefail
cd "$(dirname "$0")/.."
A_BIN=${A_BIN:-./target/release/strata}
B_BIN=${B_BIN:-}
N=${N:-30000}
ROUNDS=${ROUNDS:-5}
LAST=${LAST:-99}
PREP_PASSES=${PREP_PASSES:-2}
PIPELINE=${PIPELINE:-16}
CLIENTS=${CLIENTS:-50}
A_PORT=${A_PORT:-17403}
B_PORT=${B_PORT:-17404}
WORK=${BENCH_DIR:-./bench-data}/churned-range
OUT=${OUT:-/dev/stdout}
# shellcheck source=bench/lib.sh
. bench/lib.sh
start_pair
for port in "$A_PORT" "$B_PORT"; do
  for _ in $(seq 1 "$PREP_PASSES"); do
    redis-benchmark -p "$port" -t lpush,rpush,lpop,rpop,lrange_100,lrange_300 -n 50000 \
      -r 1000000 -d 3 -c "$CLIENTS" -P 16 -q >/dev/null 2>&1
  done
done
lines=$(mktemp)
echo "# $(date -u +%FT%TZ) LRANGE mylist 0 $LAST N=$N rounds=$ROUNDS prep=$PREP_PASSES -P $PIPELINE, $(nproc) cores, A=$A_BIN B=${B_BIN:-redis-server}" >"$OUT"
for round in $(seq 1 "$ROUNDS"); do
  for side in $(sides_in_turn "$round"); do
    pick_side "$side"
    before=$(cpu_ticks "$pid")
    rps=$(redis-benchmark -p "$port" -n "$N" -c "$CLIENTS" -P "$PIPELINE" --csv \
      lrange mylist 0 "$LAST" 2>/dev/null | grep -v '"test"' | tail -1 | cut -d, -f2 | tr -d '"')
    after=$(cpu_ticks "$pid")
    us=$(us_per_request "$before" "$after" "$N")
    echo "$round,$side,$rps,$us" | tee -a "$lines" >>"$OUT"
  done
done
echo
awk -F, "$AWK_MEDIAN"'
  { r[$2] = r[$2] " " $3; c[$2] = c[$2] " " $4 }
  END {
    ra = median(r["A"]); rb = median(r["B"])
    printf "LRANGE mylist 0 %s: A %.0f requests/s, B %.0f, A / B %.2f; CPU us/request A %.2f, B %.2f (medians of %d bursts)\n",
      last, ra, rb, ra / rb, median(c["A"]), median(c["B"]), rounds
  }' last="$LAST" rounds="$ROUNDS" "$lines"
rm -f "$lines"
