#!/usr/bin/env bash
# XADD throughput of two Strata builds side by side (`redis-benchmark`, 200 000 requests,
# 50 clients, pipelines of 16 and 1), alternating which goes first, ROUNDS rounds: a plain
# XADD and one that trims with `MAXLEN ~ 1000` each time. Prints CSV lines
# `build,pipeline,round,command,requests/s`.
#
#   NEW_BIN=target/release/strata OLD_BIN=/path/to/older/strata bench/xadd-ab.sh
#   ROUNDS=5 COMMANDS="XADD xs * field value" NEW_BIN=... OLD_BIN=... bench/xadd-ab.sh
set -euo pipefail
set -f # the commands hold `*`
cd "$(dirname "$0")/.."
NEW_BIN=${NEW_BIN:?the new build}
OLD_BIN=${OLD_BIN:?the build to compare with}
ROUNDS=${ROUNDS:-3}
COMMANDS=${COMMANDS:-"XADD xs * field value;XADD xt MAXLEN ~ 1000 * field value"}
WORK=${BENCH_DIR:-./bench-data}/xadd-ab
NEW_PORT=${NEW_PORT:-17301}
OLD_PORT=${OLD_PORT:-17302}
# shellcheck source=bench/lib.sh
. bench/lib.sh
rm -rf "$WORK" && mkdir -p "$WORK/new" "$WORK/old"
RUST_LOG=warn "$NEW_BIN" --dir "$WORK/new" serve --port "$NEW_PORT" --appendfsync everysec >/dev/null 2>&1 &
pids=($!)
RUST_LOG=warn "$OLD_BIN" --dir "$WORK/old" serve --port "$OLD_PORT" --appendfsync everysec >/dev/null 2>&1 &
pids+=($!)
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
wait_port "$NEW_PORT"
wait_port "$OLD_PORT"
IFS=';' read -r -a cmds <<<"$COMMANDS"
for round in $(seq 1 "$ROUNDS"); do
  for p in 16 1; do
    order="$NEW_PORT $OLD_PORT"
    [ $((round % 2)) -eq 0 ] && order="$OLD_PORT $NEW_PORT"
    for port in $order; do
      name=new
      [ "$port" = "$OLD_PORT" ] && name=old
      for cmd in "${cmds[@]}"; do
        # shellcheck disable=SC2086 # the command's words
        r=$(redis-benchmark -p "$port" -n 200000 -c 50 -P "$p" -q $cmd 2>/dev/null | tr '\r' '\n' |
          grep "requests per second" | tail -1 | sed -E 's/.*: ([0-9.]+) requests per second.*/\1/')
        echo "$name,P$p,round$round,$cmd,$r"
      done
    done
  done
done
