#!/usr/bin/env bash
# Stops the nodes start-nodes.sh started under DATA_ROOT (SIGTERM: each flushes and exits).
set -euo pipefail
ROOT=${1:?usage: stop-nodes.sh DATA_ROOT}
for pidfile in "$ROOT"/*.pid; do
  [ -e "$pidfile" ] || continue
  kill "$(cat "$pidfile")" 2>/dev/null || true
  rm -f "$pidfile"
done
