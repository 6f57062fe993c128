#!/usr/bin/env bash
# Runs redis-server's own test suite (the Tcl tests of the Redis release Debian ships, the same
# version as the reference server of tests/server/differential.rs) against `strata serve`, in
# the suite's external-server mode, and prints per test file how many tests passed and which
# failed. A finder of incompatibilities, not a gate: the suite tests Redis internals too
# (encodings by DEBUG, replication, keyspace notifications, streams), which are skipped by tag
# or fail for a known reason (docs/redis-tests.md lists them).
#
#   bench/redis-tests.sh                       # the default units below
#   UNITS="unit/type/list unit/multi" bench/redis-tests.sh
#   REDIS_TESTS=/path/to/redis-7.0.15 bench/redis-tests.sh   # an unpacked source tree
#
# Needs tclsh, and the Redis source: fetched with `apt-get source --download-only redis`
# (a deb-src line for the Debian release) unless REDIS_TESTS names a tree. The harness is
# copied and patched in the copy only: in external mode it runs FUNCTION FLUSH and CONFIG SET
# of each file's overrides before every file, and Strata has no functions and not every
# setting; both are made best-effort.
set -euo pipefail
cd "$(dirname "$0")/.."

S=${STRATA_BIN:-./target/release/strata}
PORT=${PORT:-16390}
WORK=${BENCH_DIR:-./bench-data}/redis-tests
UNITS=${UNITS:-"unit/type/list unit/type/list-2 unit/type/list-3 unit/type/hash unit/type/set
  unit/type/zset unit/type/string unit/type/incr unit/expire unit/keyspace unit/scan unit/sort
  unit/dump unit/protocol unit/pubsub unit/multi unit/info-command unit/other"}

command -v tclsh >/dev/null || { echo "needs tclsh (apt-get install tcl)" >&2; exit 2; }
[ -x "$S" ] || { echo "needs $S (cargo build --release -p strata-cli)" >&2; exit 2; }
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)

if [ -z "${REDIS_TESTS:-}" ]; then
  if ! ls -d "$WORK"/src/redis-*/tests >/dev/null 2>&1; then
    mkdir -p "$WORK/src"
    (cd "$WORK/src" && apt-get source --download-only redis >/dev/null 2>&1) || {
      echo "could not fetch the Redis source: add a deb-src line, or set REDIS_TESTS" >&2
      exit 2
    }
    (cd "$WORK/src" && tar xzf redis_*.orig.tar.gz)
  fi
  REDIS_TESTS=$(ls -d "$WORK"/src/redis-*/ | head -1)
fi
# A patched copy of the harness and the tests.
rm -rf "$WORK/suite" && mkdir -p "$WORK/suite"
cp -r "$REDIS_TESTS"/tests "$REDIS_TESTS"/runtest "$WORK/suite/"
sed -i 's/^    r function flush$/    catch {r function flush}/;
  s/^        dict set saved_config \$param \[lindex \[r config get \$param\] 1\]$/        catch {dict set saved_config $param [lindex [r config get $param] 1]}/;
  s/^        r config set \$param \$val$/        catch {r config set $param $val}/' \
  "$WORK/suite/tests/support/server.tcl"
# unit/acl's first server needs nothing an external server lacks: run it (UNITS=unit/acl).
sed -i '1s/tags {"acl external:skip"}/tags {"acl"}/' "$WORK/suite/tests/unit/acl.tcl"

# shellcheck source=bench/lib.sh
. bench/lib.sh
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; }
trap cleanup EXIT

skips=()

total_ok=0
total_err=0
for unit in $UNITS; do
  cleanup
  rm -rf "$WORK/data"
  RUST_LOG=warn "$S" --dir "$WORK/data" serve --port "$PORT" >"$WORK/server.log" 2>&1 &
  pid=$!
  wait_port "$PORT"
  out="$WORK/$(echo "$unit" | tr / _).out"
  (cd "$WORK/suite" && timeout 900 ./runtest --host 127.0.0.1 --port "$PORT" --single "$unit" \
    --clients 1 --tags -needs:debug --tags -needs:repl --durable ${skips[@]+"${skips[@]}"} >"$out" 2>&1) || true
  plain=$(sed 's/\x1b\[[0-9;]*m//g' "$out")
  ok=$(grep -ac '^\[ok\]' <<<"$plain" || true)
  err=$(grep -ac '^\[err\]' <<<"$plain" || true)
  total_ok=$((total_ok + ok))
  total_err=$((total_err + err))
  echo "$unit: $ok passed, $err failed"
  grep -a '^\[err\]' <<<"$plain" | sed 's/^/    /' || true
done
echo "all: $total_ok passed, $total_err failed (outputs in $WORK)"
