# Shared by the benchmark scripts (sourced): helpers for servers they start.

# wait_port PORT: waits up to 10 s for something to answer PING on PORT; exits the script
# with a message if nothing does.
wait_port() {
  for _ in $(seq 1 200); do
    redis-cli -p "$1" PING >/dev/null 2>&1 && return 0
    sleep 0.05
  done
  echo "nothing answers on port $1" >&2
  exit 1
}

# refuse_taken_port PORT...: exits the script if something already answers PING on a port it is
# about to start a server on (the new server would fail to bind, and every figure would come
# from the one already there).
refuse_taken_port() {
  for port in "$@"; do
    if redis-cli -p "$port" PING >/dev/null 2>&1; then
      echo "port $port already answers PING: stop that server or choose another port" >&2
      exit 1
    fi
  done
}

# start_pair: starts the Strata build $A_BIN on $A_PORT (data in $WORK/a) and, on $B_PORT, the
# Strata build $B_BIN or, when B_BIN is empty, redis-server with an append-only file fsynced
# every second (data in $WORK/b, emptied first); sets A_PID and B_PID, stops both when the
# script exits and returns once both answer. Needs redis-server, redis-benchmark, redis-cli.
start_pair() {
  for tool in redis-server redis-benchmark redis-cli; do
    command -v "$tool" >/dev/null || { echo "needs $tool (apt-get install redis-server redis-tools)" >&2; exit 2; }
  done
  refuse_taken_port "$A_PORT" "$B_PORT"
  rm -rf "$WORK" && mkdir -p "$WORK/a" "$WORK/b"
  WORK=$(cd "$WORK" && pwd)
  RUST_LOG=warn "$A_BIN" --dir "$WORK/a" serve --port "$A_PORT" --appendfsync everysec >/dev/null 2>&1 &
  A_PID=$!
  if [ -n "$B_BIN" ]; then
    RUST_LOG=warn "$B_BIN" --dir "$WORK/b" serve --port "$B_PORT" --appendfsync everysec >/dev/null 2>&1 &
  else
    redis-server --port "$B_PORT" --dir "$WORK/b" --appendonly yes --appendfsync everysec \
      --save "" --daemonize no --logfile "$WORK/redis.log" &
  fi
  B_PID=$!
  trap 'kill "$A_PID" "$B_PID" 2>/dev/null || true' EXIT
  wait_port "$A_PORT"
  wait_port "$B_PORT"
}

# cpu_ticks PID: the user + system CPU time process PID has used, in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# us_per_request BEFORE AFTER N: CPU microseconds per request between two cpu_ticks readings
# taken around N requests.
us_per_request() {
  awk -v a="$1" -v b="$2" -v n="$3" -v t="$(getconf CLK_TCK)" 'BEGIN {printf "%.2f", (b - a) / t * 1e6 / n}'
}

# sides_in_turn ROUND: the order in which round ROUND measures the two servers (A first in odd
# rounds), so that neither always runs first.
sides_in_turn() { if [ $(($1 % 2)) -eq 0 ]; then echo "B A"; else echo "A B"; fi; }

# pick_side SIDE: sets `port` and `pid` to those of side SIDE's server (A or B, after start_pair).
pick_side() {
  port=$A_PORT pid=$A_PID
  if [ "$1" = B ]; then port=$B_PORT pid=$B_PID; fi
}

# AWK_MEDIAN: an awk function `median(s)`, the median of the numbers in the space-separated
# string `s`, for the scripts' tables of medians (put it before the program: awk "$AWK_MEDIAN"'...').
# shellcheck disable=SC2034 # used by the scripts that source this file
AWK_MEDIAN='
  function median(s,   a, n, i, j, x) {
    n = split(s, a, " ")
    for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
    return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
'
