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
