#!/usr/bin/env bash
# Runs redis-py's own test suite (the tests of the redis-py release the server tests use) against
# redis-server and against `strata serve`, each started here on a free port, and prints the
# tests that fail on each and those that fail only on Strata. A finder of incompatibilities:
# some tests fail on both for reasons of the harness (they connect to port 6379, need a
# cluster, modules or replication); docs/redis-tests.md lists the last run.
#
#   bench/redis-py-tests.sh                                  # tests/test_commands.py
#   FILES="tests/test_commands.py tests/test_pubsub.py" bench/redis-py-tests.sh
#   REDIS_PY_VERSION=8.1.0 bench/redis-py-tests.sh
#
# Needs redis-server, python3 with pytest (and pytest-asyncio for tests/test_asyncio), and
# network access once: the redis-py source release is fetched with `pip download`.
set -euo pipefail
cd "$(dirname "$0")/.."

S=${STRATA_BIN:-./target/release/strata}
VERSION=${REDIS_PY_VERSION:-8.1.0}
FILES=${FILES:-tests/test_commands.py}
WORK=${BENCH_DIR:-./bench-data}/redis-py-tests
REDIS_PORT=${REDIS_PORT:-16391}
STRATA_PORT=${STRATA_PORT:-16392}

command -v redis-server >/dev/null || { echo "needs redis-server" >&2; exit 2; }
[ -x "$S" ] || { echo "needs $S (cargo build --release -p strata-cli)" >&2; exit 2; }
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
SRC="$WORK/redis-$VERSION"
if [ ! -d "$SRC/tests" ]; then
  python3 -m pip download --no-deps --no-binary :all: "redis==$VERSION" -d "$WORK" >/dev/null
  tar xzf "$WORK/redis-$VERSION.tar.gz" -C "$WORK"
fi

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
# shellcheck source=bench/lib.sh
. bench/lib.sh

rm -rf "$WORK/strata-data" "$WORK/redis-data" && mkdir -p "$WORK/strata-data" "$WORK/redis-data"
redis-server --port "$REDIS_PORT" --save "" --appendonly no --dir "$WORK/redis-data" \
  --daemonize no --logfile "$WORK/redis.log" &
pids+=($!)
RUST_LOG=warn "$S" --dir "$WORK/strata-data" serve --port "$STRATA_PORT" &
pids+=($!)
wait_port "$REDIS_PORT"
wait_port "$STRATA_PORT"

run() {
  # shellcheck disable=SC2086 # FILES is a list
  (cd "$SRC" && python3 -m pytest $FILES --redis-url="redis://localhost:$1/9" -q \
    -p no:cacheprovider 2>&1 || true) | tee "$WORK/$2.log" |
    grep -E '^(FAILED|ERROR) ' | sed -E 's/ - .*//' | sort >"$WORK/$2.failed"
  tail -1 "$WORK/$2.log"
}
echo "== redis-server $(redis-server --version | grep -o 'v=[0-9.]*')"
run "$REDIS_PORT" redis
echo "== strata"
run "$STRATA_PORT" strata
echo "== failing on both"
comm -12 "$WORK/redis.failed" "$WORK/strata.failed"
echo "== failing only on strata"
comm -13 "$WORK/redis.failed" "$WORK/strata.failed"
echo "== failing only on redis-server"
comm -23 "$WORK/redis.failed" "$WORK/strata.failed"
