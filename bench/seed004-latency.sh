#!/usr/bin/env bash
# Seed 004's latency experiment, over TCP, as the store grows: one GET's latency against
# `strata serve` on each engine (log: the seed's own design, a hash index over a log; lsm) at
# 0, 1 MB, 1 GB and 10 GB of data.
#
#   bench/seed004-latency.sh                       # all sizes, both engines
#   SIZES="0 1MB 1GB" ENGINES=log bench/seed004-latency.sh
#
# Per engine and size: a fresh store filled through the server with redis-benchmark (1 KiB values
# under `key:<n>`, n random below the number of 1 KiB values the size holds, so about 63 % of
# them are distinct), then
#   - hyperfine: `redis-cli GET key:...` 300 times (a process and a connection per GET, as the
#     seed timed `echo 'GET hello' | nc` per call; the seed's absolute numbers include its shell),
#   - redis-benchmark: 20 000 GETs of random keys on one connection, one at a time (-c 1 -P 1):
#     mean, p50, p99 and max latency of the request itself,
# and the server's resident memory after the load (the seed reported 1.9 GB for its 1 GB file).
# The page cache is not dropped (the seed's runs were warm too). Refuses to start when the disk
# has less than twice the largest size free. Appends raw lines to bench/seed004-latency.txt.
# Needs a release build, redis-server's tools (redis-cli, redis-benchmark) and hyperfine.
set -euo pipefail
cd "$(dirname "$0")/.."
S=${STRATA_BIN:-./target/release/strata}
SIZES=${SIZES:-"0 1MB 1GB 10GB"}
ENGINES=${ENGINES:-"log lsm"}
PORT=${PORT:-17301}
OUT=${OUT:-bench/seed004-latency.txt}
WORK=$(mkdir -p bench-data/seed004 && cd bench-data/seed004 && pwd)
# shellcheck source=bench/lib.sh
. bench/lib.sh
for tool in redis-cli redis-benchmark hyperfine; do
  command -v "$tool" >/dev/null || { echo "needs $tool" >&2; exit 2; }
done

bytes_of() {
  case $1 in
    0) echo 0 ;;
    *KB) echo $((${1%KB} * 1000)) ;;
    *MB) echo $((${1%MB} * 1000 * 1000)) ;;
    *GB) echo $((${1%GB} * 1000 * 1000 * 1000)) ;;
    *) echo "$1" ;;
  esac
}
largest=0
for size in $SIZES; do b=$(bytes_of "$size"); [ "$b" -gt "$largest" ] && largest=$b; done
free_bytes=$(($(df -Pk "$WORK" | awk 'NR == 2 { print $4 }') * 1024))
if [ "$free_bytes" -lt $((2 * largest)) ]; then
  echo "needs $((2 * largest / 1000000000)) GB free under $WORK for the largest size, has $((free_bytes / 1000000000)) GB" >&2
  exit 2
fi

server=""
stop() { [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null; server=""; }
trap stop EXIT

echo "| engine | data | keys | on disk | RSS | hyperfine redis-cli GET (mean ± sd) | GET mean | p50 | p99 | max |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for engine in $ENGINES; do
  for size in $SIZES; do
    rm -rf "$WORK/db"
    "$S" --dir "$WORK/db" --engine "$engine" serve --port "$PORT" >"$WORK/server.log" 2>&1 &
    server=$!
    wait_port "$PORT"
    values=$(($(bytes_of "$size") / 1024))
    redis-cli -p "$PORT" SET key:000000000000 hello >/dev/null
    if [ "$values" -gt 0 ]; then
      redis-benchmark -p "$PORT" -t set -d 1024 -n "$values" -r "$values" -c 20 -P 64 -q >/dev/null
    fi
    keys=$(redis-cli -p "$PORT" DBSIZE)
    disk=$(du -sm "$WORK/db" | cut -f1)
    rss=$(($(awk '/VmRSS/ { print $2 }' "/proc/$server/status") / 1024))
    hf=$(hyperfine -N --warmup 20 --runs 300 --export-json "$WORK/hf.json" \
      "redis-cli -p $PORT GET key:000000000000" 2>/dev/null >/dev/null;
      python3 -c "import json; r=json.load(open('$WORK/hf.json'))['results'][0]; print(f\"{r['mean']*1e3:.2f} ms ± {r['stddev']*1e3:.2f}\")")
    max_key=$((values > 1 ? values : 1))
    IFS=, read -r _ _ avg _ p50 _ p99 max < <(redis-benchmark -p "$PORT" -t get -n 20000 -r "$max_key" -c 1 -P 1 --csv |
      grep '^"GET"' | tr -d '"')
    echo "| $engine | $size | $keys | ${disk} MB | ${rss} MB | $hf | $avg ms | $p50 ms | $p99 ms | $max ms |"
    echo "$(date -u +%FT%TZ) engine=$engine size=$size keys=$keys disk_mb=$disk rss_mb=$rss hyperfine=\"$hf\" get_avg_ms=$avg p50_ms=$p50 p99_ms=$p99 max_ms=$max" >>"$OUT"
    stop
  done
done
