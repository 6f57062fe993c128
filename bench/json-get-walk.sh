#!/usr/bin/env bash
# JSON.GET of a small part of a large document (about 560 KiB: 5 000 items) on two builds,
# alternating: the build that walks the stored bytes to a path of keys and indexes against one
# that decodes the whole document first. Prints requests/s per build, path and round.
#
#   NEW_BIN=target/release/strata OLD_BIN=/path/to/older/strata bench/json-get-walk.sh
#
# Needs redis-benchmark and redis-cli (Debian: redis-tools) and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
NEW_BIN=${NEW_BIN:-target/release/strata}
OLD_BIN=${OLD_BIN:?the build to compare with}
PORT=${PORT:-7431}
ROUNDS=${ROUNDS:-2}
WORK=$(mktemp -d)
trap 'redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
load() {
  python3 - "$PORT" <<'PY'
import json, socket, sys
items = [{"id": i, "name": "item%d" % i, "tags": ["a", "b", "c"], "price": i * 1.25,
          "meta": {"x": i, "y": [i, i + 1]}} for i in range(5000)]
text = json.dumps({"meta": {"name": "catalog", "count": len(items)}, "items": items}).encode()
args = [b"JSON.SET", b"big", b"$", text]
out = b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args)
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(out)
assert s.recv(100).startswith(b"+OK")
PY
}
for r in $(seq 1 "$ROUNDS"); do
  for which in new old; do
    bin=$NEW_BIN; [ "$which" = old ] && bin=$OLD_BIN
    rm -rf "$WORK/data"
    "$bin" --dir "$WORK/data" serve --port "$PORT" >"$WORK/server.log" 2>&1 &
    for _ in $(seq 50); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
    load
    for path in '$.meta.name' '.items[4999].price'; do
      rps=$(redis-benchmark -p "$PORT" -n 1000 -c 10 --csv JSON.GET big "$path" 2>/dev/null | tail -1 | cut -d, -f2)
      echo "round $r $which $path $rps"
    done
    redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true
    wait 2>/dev/null || true
  done
done
