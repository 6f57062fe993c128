#!/usr/bin/env bash
# Starts N Strata servers and twemproxy (nutcracker) in front of them, on loopback.
#
#   deploy/twemproxy/run.sh 3 7001 22121 ./proxy-data    # nodes 7001-7003, proxy on 22121
#   redis-cli -p 22121 SET user:1 alice
#   deploy/twemproxy/stop.sh ./proxy-data
#
# Nodes keep their data in DATA_ROOT/<port>; the proxy's config is DATA_ROOT/nutcracker.yml
# (the settings of deploy/twemproxy/nutcracker.yml) and its stats port is PROXY_PORT + 1.
# Extra arguments go to every `strata serve` (e.g. --appendfsync always). STRATA names the
# binary (default: `strata` on PATH, else target/release/strata).
set -euo pipefail
N=${1:?usage: run.sh N BASE_PORT PROXY_PORT DATA_ROOT [serve args...]}
BASE=${2:?base port}
PROXY=${3:?proxy port}
ROOT=${4:?data root}
shift 4
here=$(cd "$(dirname "$0")/../.." && pwd)
STRATA=${STRATA:-$(command -v strata || echo "$here/target/release/strata")}
NUTCRACKER=${NUTCRACKER:-$(command -v nutcracker || echo /usr/sbin/nutcracker)}
mkdir -p "$ROOT"
for ((i = 0; i < N; i++)); do
  port=$((BASE + i))
  "$STRATA" --dir "$ROOT/$port" serve --port "$port" "$@" >"$ROOT/$port.log" 2>&1 &
  echo $! >"$ROOT/$port.pid"
done
for ((i = 0; i < N; i++)); do
  for _ in $(seq 1 200); do
    redis-cli -p $((BASE + i)) PING >/dev/null 2>&1 && break
    sleep 0.05
  done
done
{
  sed -n '/^strata:/,/^  servers:/p' "$here/deploy/twemproxy/nutcracker.yml" |
    sed "s/^  listen: .*/  listen: 127.0.0.1:$PROXY/"
  for ((i = 0; i < N; i++)); do
    echo "    - 127.0.0.1:$((BASE + i)):1 strata$((i + 1))"
  done
} >"$ROOT/nutcracker.yml"
"$NUTCRACKER" -c "$ROOT/nutcracker.yml" -s $((PROXY + 1)) -a 127.0.0.1 \
  -o "$ROOT/nutcracker.log" -p "$ROOT/nutcracker.pid.own" &
echo $! >"$ROOT/nutcracker.pid"
for _ in $(seq 1 200); do
  redis-cli -p "$PROXY" PING >/dev/null 2>&1 && break
  sleep 0.05
done
echo "$N Strata nodes on $BASE-$((BASE + N - 1)); twemproxy on 127.0.0.1:$PROXY"
