#!/usr/bin/env bash
# `redis-benchmark` against `strata serve` and against `redis-server` (append-only file, fsync
# every second) on this machine, in one run, alternating the servers so that both see the same
# conditions. Prints a markdown table (requests/s and the ratio Strata / Redis) and appends the
# raw CSV lines to bench/redis-compare.csv.
#
#   bench/redis-compare.sh            # 1 M requests per test, pipelines of 16 and 1, 2 rounds
#   N=200000 ROUNDS=1 bench/redis-compare.sh
#   STRATA_ARGS="--background-nice 0" bench/redis-compare.sh   # extra flags for strata serve
#   TESTS=set,get bench/redis-compare.sh    # redis-benchmark tests (default set,get,incr,mset)
#   OTHER_BIN=/path/to/older/strata bench/redis-compare.sh   # Strata against another Strata
#                                                           # build instead of Redis
#   OTHER_BIN=target/release/strata STRATA_ARGS="--io-threads 1" OTHER_ARGS="" \
#     bench/redis-compare.sh                                # one build, two settings
#   OTHER_BIN=target/release/strata PRELOAD_STRATA="SET ttl:__rand_int__ v" \
#     PRELOAD_OTHER="SET ttl:__rand_int__ v EX 100000" bench/redis-compare.sh
#       # the same build twice, both holding 1 M more keys, the second's with TTLs
#
# Needs redis-server and redis-benchmark (Debian: redis-server, redis-tools) and a release build
# (`cargo build --release -p strata-cli`).
set -euo pipefail
cd "$(dirname "$0")/.."

S=${STRATA_BIN:-./target/release/strata}
N=${N:-1000000}
ROUNDS=${ROUNDS:-2}
PIPELINES=${PIPELINES:-"16 1"}
TESTS=${TESTS:-set,get,incr,mset}
OTHER_BIN=${OTHER_BIN:-}
PRELOAD_OTHER=${PRELOAD_OTHER:-}
PRELOAD_STRATA=${PRELOAD_STRATA:-}
PRELOAD_N=${PRELOAD_N:-1000000}
CLIENTS=${CLIENTS:-50}
VALUE_BYTES=${VALUE_BYTES:-1024}
BENCH_DIR=${BENCH_DIR:-./bench-data}
CSV=${CSV:-bench/redis-compare.csv}
STRATA_PORT=${STRATA_PORT:-16379}
REDIS_PORT=${REDIS_PORT:-16380}
WORK="$BENCH_DIR/redis-compare"
# Absolute: redis-server changes into --dir before it opens --logfile.
mkdir -p "$WORK" && WORK=$(cd "$WORK" && pwd)

for tool in redis-server redis-benchmark redis-cli; do
  command -v "$tool" >/dev/null || { echo "needs $tool (apt-get install redis-server redis-tools)" >&2; exit 2; }
done
[ -x "$S" ] || { echo "needs $S (cargo build --release -p strata-cli)" >&2; exit 2; }

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

# shellcheck source=bench/lib.sh
. bench/lib.sh

start_servers() {
  refuse_taken_port "$STRATA_PORT" "$REDIS_PORT"
  rm -rf "$WORK" && mkdir -p "$WORK/strata" "$WORK/redis"
  # shellcheck disable=SC2086 # STRATA_ARGS is a list of flags
  RUST_LOG=warn "$S" --dir "$WORK/strata" serve --port "$STRATA_PORT" --appendfsync everysec \
    ${STRATA_ARGS:-} &
  pids+=($!)
  STRATA_PID=$!
  if [ -n "$OTHER_BIN" ]; then
    # The "redis" column is another Strata build (A/B of two builds).
    # shellcheck disable=SC2086
    RUST_LOG=warn "$OTHER_BIN" --dir "$WORK/redis" serve --port "$REDIS_PORT" --appendfsync everysec \
      ${OTHER_ARGS-${STRATA_ARGS:-}} &
  else
    redis-server --port "$REDIS_PORT" --dir "$WORK/redis" --appendonly yes --appendfsync everysec \
      --save "" --daemonize no --logfile "$WORK/redis.log" &
  fi
  pids+=($!)
  REDIS_PID=$!
  wait_port "$STRATA_PORT"
  wait_port "$REDIS_PORT"
  for pre in "$STRATA_PORT:$PRELOAD_STRATA" "$REDIS_PORT:$PRELOAD_OTHER"; do
    [ -n "${pre#*:}" ] || continue
    echo "== preloading port ${pre%%:*}: ${pre#*:} x $PRELOAD_N" >&2
    # shellcheck disable=SC2086 # the command's words
    redis-benchmark -p "${pre%%:*}" -n "$PRELOAD_N" -r 100000000 -c "$CLIENTS" -P 16 -q \
      ${pre#*:} >/dev/null
  done
}

rss_mib() { awk '/VmHWM/ {printf "%.0f", $2 / 1024}' "/proc/$1/status"; }
disk_mib() { du -sm "$1" | cut -f1; }

declare -A rps
declare -a test_names=()
start_servers
echo "# $(date -u +%FT%TZ) N=$N clients=$CLIENTS value=$VALUE_BYTES B, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)" >>"$CSV"
for round in $(seq 1 "$ROUNDS"); do
  order="strata redis"
  [ $((round % 2)) -eq 0 ] && order="redis strata"
  for p in $PIPELINES; do
    for server in $order; do
      port=$STRATA_PORT
      [ "$server" = redis ] && port=$REDIS_PORT
      echo "== round $round, -P $p, $server" >&2
      while IFS= read -r line; do
        test=$(echo "$line" | cut -d, -f1 | tr -d '"')
        value=$(echo "$line" | cut -d, -f2 | tr -d '"')
        [ "$test" = test ] && continue
        echo "$server,P$p,round$round,$line" >>"$CSV"
        key="$server P$p $test"
        [[ " ${test_names[*]} " == *" ${test// /+} "* ]] || test_names+=("${test// /+}")
        rps[$key]="${rps[$key]:-} $value"
      done < <(redis-benchmark -p "$port" -t "$TESTS" -n "$N" -r 1000000 -d "$VALUE_BYTES" \
        -c "$CLIENTS" -P "$p" --csv -q 2>/dev/null)
    done
  done
done
strata_rss=$(rss_mib "$STRATA_PID")
redis_rss=$(rss_mib "$REDIS_PID")
strata_disk=$(disk_mib "$WORK/strata")
redis_disk=$(disk_mib "$WORK/redis")

median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else printf "%.2f\n", (a[NR/2]+a[NR/2+1])/2}'; }

echo
echo "| test | pipeline | strata requests/s | redis requests/s | strata / redis |"
echo "| --- | --- | ---: | ---: | ---: |"
for p in $PIPELINES; do
  for t in "${test_names[@]}"; do
    test=${t//+/ }
    s=$(echo "${rps[strata P$p $test]:-0}" | median)
    r=$(echo "${rps[redis P$p $test]:-0}" | median)
    ratio=$(awk -v s="$s" -v r="$r" 'BEGIN {if (r > 0) printf "%.2f", s / r; else print "-"}')
    echo "| $test | -P $p | $s | $r | $ratio |"
  done
done
echo
echo "Peak RSS: strata ${strata_rss} MiB, redis ${redis_rss} MiB. On disk: strata ${strata_disk} MiB, redis ${redis_disk} MiB."
echo "(median of $ROUNDS rounds; raw lines in $CSV)"
