#!/usr/bin/env bash
# Scale-out setups side by side (docs/scale-out.md): redis-benchmark SET/GET (1 KiB values,
# 50 clients, pipelines of 1 and 16) against
#   direct       one server
#   proxy-1      twemproxy in front of one server
#   proxy-3      twemproxy in front of three servers
#   cluster-3    three cluster nodes, redis-benchmark --cluster
# for Strata and for redis-server (appendonly yes, appendfsync everysec; cluster mode joined with
# CLUSTER MEET), alternating the two in each setup. Prints one markdown row per line measured
# and appends raw lines to bench/scale-out.txt.
#
#   bench/scale-out.sh                 # 200 k requests per test, 1 round
#   N=500000 ROUNDS=2 bench/scale-out.sh
#
# Needs a release build (cargo build --release -p strata-cli), redis-server, redis-benchmark,
# redis-cli and nutcracker (Debian: redis-server redis-tools nutcracker).
set -euo pipefail
cd "$(dirname "$0")/.."
S=${STRATA_BIN:-./target/release/strata}
N=${N:-200000}
ROUNDS=${ROUNDS:-1}
PIPELINES=${PIPELINES:-"1 16"}
SETUPS=${SETUPS:-"direct proxy-1 proxy-3 cluster-3"}
OUT=${OUT:-bench/scale-out.txt}
NUTCRACKER=${NUTCRACKER:-$(command -v nutcracker || echo /usr/sbin/nutcracker)}
WORK=$(mkdir -p bench-data/scale-out && cd bench-data/scale-out && pwd)
BASE=17101
PROXY=17201

pids=()
stop_all() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pids=()
}
trap stop_all EXIT

# shellcheck source=bench/lib.sh
. bench/lib.sh

# start_nodes ENGINE COUNT CLUSTER(yes|no)
start_nodes() {
  local engine=$1 count=$2 cluster=$3
  rm -rf "$WORK/nodes" && mkdir -p "$WORK/nodes"
  for ((i = 0; i < count; i++)); do
    local port=$((BASE + i)) dir="$WORK/nodes/$((BASE + i))"
    mkdir -p "$dir"
    if [ "$engine" = strata ]; then
      local flags=()
      [ "$cluster" = yes ] && flags=(--cluster)
      "$S" --dir "$dir" serve --port "$port" "${flags[@]}" >"$dir.log" 2>&1 &
    else
      local flags=(--appendonly yes --appendfsync everysec --save "")
      [ "$cluster" = yes ] && flags+=(--cluster-enabled yes --cluster-config-file nodes.conf)
      redis-server --port "$port" --dir "$dir" "${flags[@]}" --logfile "$dir.log" &
    fi
    pids+=($!)
  done
  for ((i = 0; i < count; i++)); do wait_port $((BASE + i)); done
  [ "$cluster" = yes ] || return 0
  if [ "$engine" = strata ]; then
    local map=""
    for ((i = 0; i < count; i++)); do
      local id first=$((16384 * i / count)) last=$((16384 * (i + 1) / count - 1))
      id=$(redis-cli -p $((BASE + i)) CLUSTER MYID)
      map+="$id 127.0.0.1 $((BASE + i)) master - $first-$last"$'\n'
    done
    for ((i = 0; i < count; i++)); do redis-cli -p $((BASE + i)) CLUSTERX SETNODES "$map" 1 >/dev/null; done
  else
    for ((i = 0; i < count; i++)); do
      redis-cli -p $((BASE + i)) CLUSTER ADDSLOTSRANGE $((16384 * i / count)) $((16384 * (i + 1) / count - 1)) >/dev/null
      [ "$i" -gt 0 ] && redis-cli -p "$BASE" CLUSTER MEET 127.0.0.1 $((BASE + i)) >/dev/null
    done
    for _ in $(seq 1 200); do
      local ok=0
      for ((i = 0; i < count; i++)); do
        redis-cli -p $((BASE + i)) CLUSTER INFO | grep -q cluster_state:ok && ok=$((ok + 1))
      done
      [ "$ok" -eq "$count" ] && break
      sleep 0.1
    done
  fi
}

start_proxy() {
  local count=$1
  {
    sed -n '/^strata:/,/^  servers:/p' deploy/twemproxy/nutcracker.yml | sed "s/^  listen: .*/  listen: 127.0.0.1:$PROXY/"
    for ((i = 0; i < count; i++)); do echo "    - 127.0.0.1:$((BASE + i)):1 node$((i + 1))"; done
  } >"$WORK/nutcracker.yml"
  "$NUTCRACKER" -c "$WORK/nutcracker.yml" -s $((PROXY + 1)) -a 127.0.0.1 -o "$WORK/nutcracker.log" -p "$WORK/nutcracker.pid" &
  pids+=($!)
  wait_port "$PROXY"
}

# run ENGINE SETUP -> "test pipeline rps" lines
run() {
  local engine=$1 setup=$2 port=$BASE extra=()
  case $setup in
    direct) start_nodes "$engine" 1 no ;;
    proxy-1) start_nodes "$engine" 1 no; start_proxy 1; port=$PROXY ;;
    proxy-3) start_nodes "$engine" 3 no; start_proxy 3; port=$PROXY ;;
    cluster-3) start_nodes "$engine" 3 yes; extra=(--cluster) ;;
  esac
  for p in $PIPELINES; do
    redis-benchmark -p "$port" "${extra[@]}" -t set,get -d 1024 -c 50 -n "$N" -P "$p" -r 100000 --csv 2>/dev/null |
      grep -E '^"(SET|GET)"' | while IFS=, read -r test rps _; do
        echo "${test//\"/} $p ${rps//\"/}"
      done
  done
  stop_all
}

echo "| setup | test | pipeline | Strata req/s | redis-server req/s | Strata / Redis |"
echo "|---|---|---:|---:|---:|---:|"
for ((round = 1; round <= ROUNDS; round++)); do
  for setup in $SETUPS; do
    s_lines=$(run strata "$setup")
    r_lines=$(run redis "$setup")
    while read -r test p s_rps; do
      r_rps=$(echo "$r_lines" | awk -v t="$test" -v p="$p" '$1 == t && $2 == p { print $3 }')
      ratio=$(awk -v a="$s_rps" -v b="$r_rps" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')
      echo "| $setup | $test | $p | ${s_rps%.*} | ${r_rps%.*} | $ratio |"
      echo "$(date -u +%FT%TZ) round=$round setup=$setup test=$test pipeline=$p strata=$s_rps redis=$r_rps" >>"$OUT"
    done <<<"$s_lines"
  done
done
