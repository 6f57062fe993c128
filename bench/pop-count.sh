#!/usr/bin/env bash
# Pops with a count from a long list, two servers side by side in alternating bursts: for each
# of ROUNDS rounds and each server (which goes first alternates by round), the list `mylist` is
# filled with FILL elements (redis-benchmark's LPUSH, not measured), then REQUESTS pops of
# COMMAND are measured: requests/s and the CPU time the server spent per request (user +
# system, from /proc). Prints CSV lines `round,side,command,requests_per_s,cpu_us_per_request`
# and a table of medians.
#
#   A_BIN=target/release/strata B_BIN=/path/to/older/strata bench/pop-count.sh
#   COMMAND="rpop mylist 100" FILL=2000000 REQUESTS=10000 bench/pop-count.sh
#
# B is redis-server (append-only file, fsync every second) unless B_BIN names a Strata build.
# Needs redis-server, redis-benchmark and redis-cli (Debian: redis-server, redis-tools).
set -euo pipefail
cd "$(dirname "$0")/.."
A_BIN=${A_BIN:-./target/release/strata}
B_BIN=${B_BIN:-}
COMMAND=${COMMAND:-lpop mylist 100}
FILL=${FILL:-1000000}
REQUESTS=${REQUESTS:-5000}
ROUNDS=${ROUNDS:-5}
CLIENTS=${CLIENTS:-4}
A_PORT=${A_PORT:-17411}
B_PORT=${B_PORT:-17412}
WORK=${BENCH_DIR:-./bench-data}/pop-count
# shellcheck source=bench/lib.sh
. bench/lib.sh
start_pair
lines=$(mktemp)
echo "# $(date -u +%FT%TZ) command='$COMMAND' fill=$FILL requests=$REQUESTS rounds=$ROUNDS clients=$CLIENTS, $(nproc) cores, A=$A_BIN B=${B_BIN:-redis-server}"
for round in $(seq 1 "$ROUNDS"); do
  for side in $(sides_in_turn "$round"); do
    pick_side "$side"
    redis-cli -p "$port" DEL mylist >/dev/null
    redis-benchmark -p "$port" -t lpush -n "$FILL" -d 3 -c 50 -P 16 -q >/dev/null 2>&1
    before=$(cpu_ticks "$pid")
    # shellcheck disable=SC2086 # the command's words are redis-benchmark's arguments
    rps=$(redis-benchmark -p "$port" -n "$REQUESTS" -c "$CLIENTS" --csv -q $COMMAND 2>/dev/null \
      | grep -v '"test"' | tail -1 | cut -d, -f2 | tr -d '"')
    after=$(cpu_ticks "$pid")
    us=$(us_per_request "$before" "$after" "$REQUESTS")
    echo "$round,$side,$COMMAND,$rps,$us" | tee -a "$lines"
  done
done

echo
echo "| command | A requests/s | B requests/s | A / B | A CPU us/request | B CPU us/request |"
echo "| --- | ---: | ---: | ---: | ---: | ---: |"
awk -F, "$AWK_MEDIAN"'
  { rps[$2] = rps[$2] " " $4; cpu[$2] = cpu[$2] " " $5; c = $3 }
  END {
    ra = median(rps["A"]); rb = median(rps["B"])
    printf "| %s | %.0f | %.0f | %.2f | %.1f | %.1f |\n", toupper(c), ra, rb, (rb > 0 ? ra / rb : 0), median(cpu["A"]), median(cpu["B"])
  }' "$lines"
echo "(medians of $ROUNDS bursts each)"
rm -f "$lines"
