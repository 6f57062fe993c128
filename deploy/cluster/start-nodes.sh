#!/usr/bin/env bash
# Starts N Strata cluster nodes on loopback and gives them the slots in equal ranges.
#
#   deploy/cluster/start-nodes.sh 3 7001 ./cluster-data      # nodes on 7001, 7002, 7003
#   deploy/cluster/stop-nodes.sh ./cluster-data
#
# Each node keeps its data in DATA_ROOT/<port> and its log in DATA_ROOT/<port>.log; extra
# arguments go to every `strata serve` (e.g. --appendfsync always). STRATA names the binary
# (default: `strata` on PATH, else target/release/strata). The map (version 1) is pushed with
# CLUSTERX SETNODES; clients then connect to any node: `redis-cli -c -p 7001`.
set -euo pipefail
N=${1:?usage: start-nodes.sh N BASE_PORT DATA_ROOT [serve args...]}
BASE=${2:?base port}
ROOT=${3:?data root}
shift 3
here=$(cd "$(dirname "$0")/../.." && pwd)
STRATA=${STRATA:-$(command -v strata || echo "$here/target/release/strata")}
mkdir -p "$ROOT"
ids=()
for ((i = 0; i < N; i++)); do
  port=$((BASE + i))
  "$STRATA" --dir "$ROOT/$port" serve --port "$port" --cluster "$@" >"$ROOT/$port.log" 2>&1 &
  echo $! >"$ROOT/$port.pid"
done
for ((i = 0; i < N; i++)); do
  port=$((BASE + i))
  for _ in $(seq 1 200); do
    if id=$(redis-cli -p "$port" CLUSTER MYID 2>/dev/null) && [ -n "$id" ]; then break; fi
    sleep 0.05
  done
  ids+=("$id")
done
map=""
for ((i = 0; i < N; i++)); do
  first=$((16384 * i / N))
  last=$((16384 * (i + 1) / N - 1))
  map+="${ids[$i]} 127.0.0.1 $((BASE + i)) master - $first-$last"$'\n'
done
version=$(( $(redis-cli -p "$BASE" CLUSTERX VERSION) + 1 ))
for ((i = 0; i < N; i++)); do
  redis-cli -p $((BASE + i)) CLUSTERX SETNODES "$map" "$version" >/dev/null
done
echo "$N nodes on ports $BASE-$((BASE + N - 1)), map version $version:"
printf '%s' "$map"
