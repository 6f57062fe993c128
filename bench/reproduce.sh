#!/usr/bin/env bash
# Reruns every measurement behind BENCHMARKS.md, in one go or step by step:
#
#   bench/reproduce.sh                 # everything (about 2 hours on 2 cores)
#   bench/reproduce.sh compare startup # only these steps
#
# Steps: build, compare, sync-always, long, sustained, matrix, readonly, startup, docs, redis, report.
# Not in the default list (each needs hours of machine or tens of GiB of disk): hours (one hour
# per engine and workload), disk-bound
# (48 GiB per engine, about 58 GiB free and root to drop the page cache), docs-20m (20 M
# comments: about 25 GiB of generated JSON beside the store).
#
# Results are appended to bench/*.jsonl (raw lines) and tables written to bench/*.md; the data
# of each run lives under $BENCH_DIR (default ./bench-data, wiped per run). Peers (RocksDB, fjall,
# sled) need Debian's librocksdb-dev, libclang-dev and clang; the build step installs them when
# run as root.
set -euo pipefail
cd "$(dirname "$0")/.."

BENCH_DIR=${BENCH_DIR:-./bench-data}
S=./target/release/strata
export RUST_LOG=${RUST_LOG:-warn}
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(build compare sync-always long sustained matrix readonly startup docs redis report)

run_step() {
  case "$1" in
  build)
    if [ "$(id -u)" = 0 ] && ! { dpkg -s librocksdb-dev && dpkg -s redis-server; } >/dev/null 2>&1; then
      apt-get update && apt-get install -y librocksdb-dev libclang-dev clang fonts-dejavu-core \
        redis-server redis-tools
    fi
    ROCKSDB_LIB_DIR=/usr/lib/x86_64-linux-gnu \
      cargo build --release -p strata-cli --features strata-bench/peers
    ;;
  compare)
    # The seed's four workloads on both of Strata's engines and the three peers, 60 s each.
    $S bench compare --workload all --engines strata,strata-log,rocksdb,fjall,sled \
      --duration 60 --interval 10 --value-size 1024 --known-key-rate 0.5 --threads 2 \
      --bench-partitions 4 --sync everyms:100 --bench-dir "$BENCH_DIR" \
      --out bench/compare-60s.jsonl --table bench/compare-60s.md
    ;;
  sync-always)
    # Every write fsynced before it returns (group commit where the engine has it).
    $S bench compare --workload all --engines strata,strata-log,rocksdb,fjall \
      --duration 30 --interval 10 --threads 2 --bench-partitions 4 --sync always \
      --bench-dir "$BENCH_DIR" --out bench/compare-sync-always.jsonl \
      --table bench/compare-sync-always.md
    ;;
  long)
    # Ten minutes of PUT_HEAVY over 10 M possible keys (so overwrites dominate and garbage
    # collection has to keep pace): does throughput hold, and does disk use stay bounded?
    $S bench compare --workload put-heavy --engines strata,rocksdb --duration 600 \
      --interval 10 --key-space 10000000 --threads 2 --bench-partitions 4 \
      --bench-dir "$BENCH_DIR" --out bench/long-put-heavy-600s.jsonl \
      --table bench/long-put-heavy-600s.md
    ;;
  sustained)
    # Five minutes each of PUT_HEAVY and BALANCED over 10 M possible keys, so overwrites
    # dominate: value-log collection in the steady state, against RocksDB and fjall with and
    # without their own key-value separation (issue #18).
    $S bench compare --workload put-heavy,balanced \
      --engines strata,rocksdb,rocksdb-blob,fjall,fjall-blob --duration 300 --interval 10 \
      --key-space 10000000 --threads 2 --bench-partitions 4 --bench-dir "$BENCH_DIR" \
      --out bench/sustained-300s.jsonl --table bench/sustained-300s.md
    $S bench report bench/sustained-300s.jsonl --out bench/report-sustained --timelines 0
    ;;
  matrix)
    $S bench matrix --workload all --partitions-list 1,4,8,16 --threads-list 1,4,16,32 \
      --duration 10 --interval 5 --bench-dir "$BENCH_DIR" --out bench/matrix-10s.jsonl --quiet
    ;;
  readonly)
    $S bench readonly --data-size 2GiB --value-size 16,256,4096 --known-key-rate 0.5 \
      --threads 1,4,16 --duration 10 --bench-dir "$BENCH_DIR" --out bench/readonly.jsonl
    $S bench readonly --data-size 2GiB --value-size 256 --known-key-rate 0.1,0.9 \
      --threads 4 --duration 10 --bench-dir "$BENCH_DIR" --out bench/readonly.jsonl
    $S bench readonly --load put --data-size 2GiB --value-size 256 --known-key-rate 0.5 \
      --threads 4 --duration 10 --bench-dir "$BENCH_DIR" --out bench/readonly.jsonl
    # The seed's index rate: at most 10, 100 or 1000 entries per block (16-byte values, so the
    # 4 KiB block size does not bind first below about 110 entries).
    for every in 10 100 1000; do
      $S bench readonly --data-size 2GiB --value-size 16 --known-key-rate 0.5 --threads 4 \
        --index-every "$every" --duration 10 --bench-dir "$BENCH_DIR" --out bench/readonly-index-rate.jsonl
    done
    ;;
  disk-bound)
    # Seed 003 at 50 GB: twice this machine's memory, read from the disk (page cache dropped
    # before each phase), every engine at 64 MiB of cache and at about the same memory.
    for spec in "strata 64MiB" "rocksdb 64MiB" "fjall 64MiB" "strata 512MiB" "rocksdb 1GiB" "fjall 1GiB"; do
      set -- $spec
      $S bench readonly --engine "$1" --cache-size "$2" --data-size 48GiB --value-size 4096 \
        --known-key-rate 0.5 --threads 8,32 --duration 30 --drop-page-cache \
        --bench-dir "$BENCH_DIR" --out bench/readonly-disk-bound.jsonl
    done
    THREADS="8 32" SECONDS_EACH=30 BENCH_DIR="$BENCH_DIR" bench/disk-limit.sh
    # The seed workloads on the same key space size, preloaded, page cache dropped.
    for spec in "strata 512MiB" "rocksdb,fjall 1GiB"; do
      set -- $spec
      $S bench compare --engines "$1" --cache-size "$2" --workload get-heavy,balanced \
        --key-space 12000000 --value-size 4096 --threads 8 --duration 60 --interval 10 \
        --preload --drop-page-cache --bench-dir "$BENCH_DIR" --out bench/compare-disk-bound.jsonl
    done
    ;;
  hours)
    # One hour each of PUT_HEAVY and BALANCED over 10 M possible keys (issues #17, #18): the
    # steady state, with the last ten minutes in the table. Four hours with the two engines;
    # HOUR_ENGINES / HOUR_WORKLOADS run a part (e.g. HOUR_ENGINES=rocksdb
    # HOUR_WORKLOADS=balanced), each run appended to the workload's file.
    for w in ${HOUR_WORKLOADS:-put-heavy balanced}; do
      $S bench compare --workload "$w" --engines "${HOUR_ENGINES:-strata,rocksdb}" \
        --duration 3600 --interval 10 --key-space 10000000 --threads 2 --bench-partitions 4 \
        --bench-dir "$BENCH_DIR" --out "bench/hour-$w.jsonl"
      $S bench report "bench/hour-$w.jsonl" --out "bench/report-hour-$w"
    done
    ;;
  docs-20m)
    for p in 4 8; do
      $S bench docs --docs 20000000 --bench-partitions "$p" --phases get,update --threads 2,8 \
        --duration 10 --trials 3 --bench-dir "$BENCH_DIR" --out bench/docs-20m.jsonl
    done
    ;;
  startup)
    # 10 M keys of 16 bytes with 100-byte values; --drop-caches needs root.
    drop=()
    [ "$(id -u)" = 0 ] && drop=(--drop-caches)
    $S bench startup --engines strata-log,strata --keys 10000000 --value-size 100 "${drop[@]}" \
      --bench-dir "$BENCH_DIR" --out bench/startup-10m.jsonl
    ;;
  docs)
    # Seed 002: generated Reddit comments, loaded without and with LZ4, then GET, partial GET,
    # the seed's update and the atomic increment, per reader/writer thread count.
    $S bench docs --docs 200000 --compression none,lz4 --threads 1,2,4,8 --duration 10 \
      --bench-dir "$BENCH_DIR" --out bench/docs-200k-names.jsonl
    $S bench docs --docs 1000000 --compression none,lz4 --threads 2,8 --duration 10 \
      --bench-dir "$BENCH_DIR" --out bench/docs-1m-names.jsonl
    ;;
  redis)
    # The server against redis-server (appendonly, everysec) with redis-benchmark.
    BENCH_DIR="$BENCH_DIR" bench/redis-compare.sh | tee bench/redis-compare.md
    ;;
  report)
    $S bench report bench/compare-60s.jsonl bench/matrix-10s.jsonl bench/readonly.jsonl \
      bench/long-put-heavy-600s.jsonl --out bench/report --timelines-matching put-heavy-p4-t2 --timelines 8
    ;;
  *)
    echo "unknown step $1 (build compare sync-always long sustained matrix readonly startup docs redis report hours disk-bound docs-20m)" >&2
    exit 2
    ;;
  esac
}

for step in "${steps[@]}"; do
  echo "== $step ($(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  run_step "$step"
done
