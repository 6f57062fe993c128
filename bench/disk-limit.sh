#!/usr/bin/env bash
# The disk's own random-read limit, the yardstick for disk-bound reads (`strata bench readonly
# --drop-page-cache` on a data set larger than memory): fio reading 4 KiB blocks at random
# offsets of a file with direct I/O (no page cache), from T threads each doing one read at a
# time (`psync`, numjobs=T: queue depth T, as T reader threads of an engine give). Prints one
# line per thread count: reads/s, p50 and p99 in microseconds.
#
#   bench/disk-limit.sh                 # 8 and 32 threads, 30 s each, an 8 GiB file
#   THREADS="4 16" SECONDS_EACH=10 bench/disk-limit.sh
#
# Needs fio (Debian: fio). The file goes in BENCH_DIR (default ./bench-data) and is removed.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v fio >/dev/null || { echo "needs fio (apt-get install fio)" >&2; exit 2; }
BENCH_DIR=${BENCH_DIR:-./bench-data}
THREADS=${THREADS:-"8 32"}
SECONDS_EACH=${SECONDS_EACH:-30}
FILE_SIZE=${FILE_SIZE:-8G}
mkdir -p "$BENCH_DIR"
file="$BENCH_DIR/disk-limit.fio"
trap 'rm -f "$file"' EXIT
echo "| threads (queue depth) | reads/s | p50 us | p99 us |"
echo "| ---: | ---: | ---: | ---: |"
for t in $THREADS; do
  out=$(fio --name=randread --filename="$file" --size="$FILE_SIZE" --rw=randread --bs=4k \
    --direct=1 --ioengine=psync --numjobs="$t" --runtime="$SECONDS_EACH" --time_based \
    --group_reporting --output-format=json)
  printf '%s' "$out" | python3 -c '
import json, sys
r = json.load(sys.stdin)["jobs"][0]["read"]
pct = r["clat_ns"]["percentile"]
iops, p50, p99 = r["iops"], pct["50.000000"] / 1000, pct["99.000000"] / 1000
print("| %s | %.0f | %.0f | %.0f |" % (sys.argv[1], iops, p50, p99))
' "$t"
done
