#!/usr/bin/env bash
# Stops what run.sh started under DATA_ROOT: the proxy, then the nodes (SIGTERM: each flushes).
set -euo pipefail
ROOT=${1:?usage: stop.sh DATA_ROOT}
for pidfile in "$ROOT"/nutcracker.pid "$ROOT"/*.pid; do
  [ -e "$pidfile" ] || continue
  kill "$(cat "$pidfile")" 2>/dev/null || true
  rm -f "$pidfile"
done
