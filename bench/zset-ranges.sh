#!/usr/bin/env bash
# Sorted-set reads on a set of 500 000 members (score = i, member player:i) and lex ranges on
# one of 200 000 members sharing score 0 (name:i) against one
# strata build: bench/zset-ranges.sh BIN PORT (redis-benchmark, 300 requests, 2 clients).
set -euo pipefail
BIN=$1; PORT=$2; D=${BENCH_DIR:-./bench-data}/zset-ranges-$PORT
rm -rf $D; mkdir -p $D
RUST_LOG=warn $BIN --dir $D serve --port $PORT --appendfsync everysec >/dev/null 2>&1 &
PID=$!
for i in $(seq 50); do redis-cli -p $PORT ping >/dev/null 2>&1 && break; sleep 0.2; done
# 500k members, score = i
python3 - $PORT <<'PY'
import socket,sys
port=int(sys.argv[1])
s=socket.create_connection(("127.0.0.1",port))
buf=bytearray()
def cmd(*a):
    out=b"*%d\r\n"%len(a)
    for x in a:
        x=str(x).encode(); out+=b"$%d\r\n%s\r\n"%(len(x),x)
    return out
n=500000; per=1000
for b in range(0,n,per):
    args=["ZADD","lb"]
    for i in range(b,b+per): args+= [i, "player:%d"%i]
    s.sendall(cmd(*args))
    # read reply line
    data=b""
    while not data.endswith(b"\r\n"): data+=s.recv(100)
# 200k members sharing score 0 (an autocomplete index: lex ranges)
for b in range(0,200000,per):
    args=["ZADD","ac"]
    for i in range(b,b+per): args+= [0, "name:%07d"%i]
    s.sendall(cmd(*args))
    data=b""
    while not data.endswith(b"\r\n"): data+=s.recv(100)
print("loaded")
PY
for c in "ZREVRANGE lb 0 9 WITHSCORES" "ZRANGE lb 0 9" "ZRANGE lb -10 -1" "ZREVRANGEBYSCORE lb +inf -inf LIMIT 0 10" "ZREVRANK lb player:499990" "ZRANK lb player:250000" "ZRANK lb player:499990" "ZRANGEBYSCORE lb 1000 1010" "ZCOUNT lb 1000 2000" "ZRANGEBYLEX ac [name:0100000 + LIMIT 0 10" "ZREVRANGEBYLEX ac + - LIMIT 0 10" "ZLEXCOUNT ac [name:0100000 [name:0100999" "ZPOPMAX lb"; do
  r=$(redis-benchmark -p $PORT -n 300 -c 2 -q $c 2>/dev/null | tr "\r" "\n" | grep "requests per second" | tail -1 | sed "s/.*: //")
  echo "$c: $r"
done
kill $PID; wait $PID 2>/dev/null || true
