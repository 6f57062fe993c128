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
