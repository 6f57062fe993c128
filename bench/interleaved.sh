#!/usr/bin/env bash
# Two servers side by side, both up for the whole run, measured in short alternating bursts:
# for each of ROUNDS rounds and each redis-benchmark test, one burst of N requests against A
# and one against B (which goes first alternates by round), recording requests/s and the CPU
# time the server process spent per request (user + system, from /proc). Short bursts taken
# in turn see the same neighbours on a shared machine; the per-request CPU time also counts
# the server's background threads (flushes, compactions) the burst caused. Prints CSV lines
# `round,side,test,pipeline,requests_per_s,cpu_us_per_request` and then a table of medians.
# The LRANGE tests' bursts also run the LPUSHes redis-benchmark makes first: their requests/s
# is the LRANGE line's, their CPU time per request covers both.
#
#   A_BIN=target/release/strata bench/interleaved.sh             # against redis-server
#   A_BIN=target/release/strata B_BIN=/path/to/older/strata bench/interleaved.sh
#   TESTS=lpush,lpop N=50000 ROUNDS=10 VALUE_BYTES=3 PIPELINES="16 1" bench/interleaved.sh
#
# B is redis-server (append-only file, fsync every second) unless B_BIN names a Strata build.
# Needs redis-server, redis-benchmark and redis-cli (Debian: redis-server, redis-tools).
set -euo pipefail
cd "$(dirname "$0")/.."
A_BIN=${A_BIN:-./target/release/strata}
B_BIN=${B_BIN:-}
TESTS=${TESTS:-set,get,incr,mset}
N=${N:-50000}
ROUNDS=${ROUNDS:-10}
VALUE_BYTES=${VALUE_BYTES:-1024}
PIPELINES=${PIPELINES:-"16 1"}
CLIENTS=${CLIENTS:-50}
A_PORT=${A_PORT:-17401}
B_PORT=${B_PORT:-17402}
WORK=${BENCH_DIR:-./bench-data}/interleaved
OUT=${OUT:-/dev/stdout}
# shellcheck source=bench/lib.sh
. bench/lib.sh
start_pair
lines=$(mktemp)
echo "# $(date -u +%FT%TZ) N=$N rounds=$ROUNDS clients=$CLIENTS value=$VALUE_BYTES B, $(nproc) cores, A=$A_BIN B=${B_BIN:-redis-server}" >"$OUT"
for round in $(seq 1 "$ROUNDS"); do
  for p in $PIPELINES; do
    for t in ${TESTS//,/ }; do
      for side in $(sides_in_turn "$round"); do
        pick_side "$side"
        before=$(cpu_ticks "$pid")
        rps=$(redis-benchmark -p "$port" -t "$t" -n "$N" -r 1000000 -d "$VALUE_BYTES" -c "$CLIENTS" \
          -P "$p" --csv -q 2>/dev/null | grep -v '"test"' | tail -1 | cut -d, -f2 | tr -d '"')
        after=$(cpu_ticks "$pid")
        us=$(us_per_request "$before" "$after" "$N")
        echo "$round,$side,$t,$p,$rps,$us" | tee -a "$lines" >>"$OUT"
      done
    done
  done
done

echo
echo "| test | pipeline | A requests/s | B requests/s | A / B | A CPU us/request | B CPU us/request |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: |"
awk -F, "$AWK_MEDIAN"'
  { k = $3 " " $4; if (!(k in seen)) { seen[k] = 1; order[++m] = k }
    rps[k, $2] = rps[k, $2] " " $5; cpu[k, $2] = cpu[k, $2] " " $6 }
  END {
    for (i = 1; i <= m; i++) {
      k = order[i]; split(k, kp, " ")
      ra = median(rps[k, "A"]); rb = median(rps[k, "B"])
      printf "| %s | -P %s | %.0f | %.0f | %.2f | %.2f | %.2f |\n", toupper(kp[1]), kp[2], ra, rb, (rb > 0 ? ra / rb : 0), median(cpu[k, "A"]), median(cpu[k, "B"])
    }
  }' "$lines"
echo "(medians of $ROUNDS bursts each)"
rm -f "$lines"
