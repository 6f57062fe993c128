"""redis-py against a Strata server, as an application uses it: plain commands with TTLs,
pipelines with and without MULTI/EXEC, a WATCH retry loop, JSON documents, pub/sub, keyspace
notifications, scripts and functions. Exits
non-zero with the failing assertion. Usage: redis_py_check.py PORT"""
import sys
import time

import redis

port = int(sys.argv[1])
r = redis.Redis(host="127.0.0.1", port=port, decode_responses=True)

assert r.ping()
assert r.set("user:1", "alice", ex=100)
assert r.get("user:1") == "alice"
assert 99 <= r.ttl("user:1") <= 100
assert r.setex("session", 30, "token")
assert r.expire("user:1", 50)
assert r.persist("user:1")
assert r.ttl("user:1") == -1
assert r.set("cache", "v", px=50)
time.sleep(0.1)
assert r.get("cache") is None

# pipeline() is transactional by default (MULTI ... EXEC).
pipe = r.pipeline()
pipe.set("a", 1).incr("a").get("a")
assert pipe.execute() == [True, 2, "2"]
pipe = r.pipeline(transaction=False)
pipe.set("b", "x").append("b", "y").get("b")
assert pipe.execute() == [True, 2, "xy"]


def bump(p):
    n = int(p.get("counter") or 0)
    p.multi()
    p.set("counter", n + 1)


for _ in range(10):
    r.transaction(bump, "counter")
assert r.get("counter") == "10"

# A watched key changed by someone else: the transaction is retried by redis-py.
other = redis.Redis(host="127.0.0.1", port=port, decode_responses=True)
with r.pipeline() as p:
    p.watch("w")
    other.set("w", "changed")
    p.multi()
    p.set("w", "mine")
    try:
        p.execute()
        raise AssertionError("EXEC should have failed after a watched key changed")
    except redis.WatchError:
        pass
assert r.get("w") == "changed"

assert r.rename("a", "a2")
assert r.exists("a") == 0 and r.get("a2") == "2"
db1 = redis.Redis(host="127.0.0.1", port=port, db=1, decode_responses=True)
assert db1.get("a2") is None
assert r.move("a2", 1)
assert db1.get("a2") == "2"

# JSON documents through redis-py's json() (RedisJSON commands).
r.json().set("doc", "$", {"name": "ann", "tags": ["x"], "n": 1})
assert r.json().get("doc", "$.name") == ["ann"]
r.json().numincrby("doc", "$.n", 2)
assert r.json().get("doc") == {"name": "ann", "tags": ["x"], "n": 3}
assert r.expire("doc", 100)
assert 99 <= r.ttl("doc") <= 100

# Pub/sub.
p = r.pubsub()
p.subscribe("news")
assert p.get_message(timeout=2)["type"] == "subscribe"
assert other.publish("news", "hello") == 1
m = p.get_message(timeout=2)
assert m["type"] == "message" and m["channel"] == "news" and m["data"] == "hello", m
p.close()

# Sharded pub/sub (Redis 7): its own namespace, `smessage` deliveries.
p = r.pubsub()
p.ssubscribe("orders")
assert p.get_sharded_message(timeout=2)["type"] == "ssubscribe"
assert other.publish("orders", "plain") == 0
assert other.spublish("orders", "o1") == 1
assert other.pubsub_shardnumsub("orders") == [("orders", 1)]
m = p.get_sharded_message(timeout=2)
assert m["type"] == "smessage" and m["channel"] == "orders" and m["data"] == "o1", m
p.sunsubscribe("orders")
assert p.get_sharded_message(timeout=2)["type"] == "sunsubscribe"
assert other.pubsub_shardchannels() == []
p.close()

# Keyspace notifications as a session store uses them (Spring Session's setting, then a
# listener for expired and deleted sessions on database 0).
assert r.config_set("notify-keyspace-events", "Egx")
assert r.config_get("notify-keyspace-events") == {"notify-keyspace-events": "gxE"}
p = r.pubsub()
p.psubscribe("__keyevent@0__:*")
assert p.get_message(timeout=2)["type"] == "psubscribe"
assert r.set("session:gone", "x", px=100)
assert r.set("session:deleted", "y")
assert r.delete("session:deleted") == 1
seen = []
deadline = time.time() + 3
while len(seen) < 3 and time.time() < deadline:
    m = p.get_message(timeout=0.5)
    # Only this check's sessions: a key that expired earlier in the script ("cache") may be
    # reported now (active expiry publishes it; Redis published it when GET found it gone).
    if m and m["type"] == "pmessage" and m["data"].startswith("session:"):
        seen.append((m["channel"], m["data"]))
assert seen == [
    ("__keyevent@0__:expire", "session:gone"),
    ("__keyevent@0__:del", "session:deleted"),
    ("__keyevent@0__:expired", "session:gone"),
], seen
p.close()
assert r.config_set("notify-keyspace-events", "")

# Geo, through redis-py's own argument building and reply parsing (Redis's documented
# Palermo/Catania example values).
assert r.geoadd("Sicily", (13.361389, 38.115556, "Palermo", 15.087269, 37.502669, "Catania")) == 2
assert r.geodist("Sicily", "Palermo", "Catania", unit="km") == 166.2742
near = r.geosearch("Sicily", longitude=15, latitude=37, radius=200, unit="km", withdist=True, sort="ASC")
assert near == [["Catania", 56.4413], ["Palermo", 190.4424]], near
pos = r.geopos("Sicily", "Palermo", "nowhere")
assert abs(pos[0][0] - 13.361389) < 1e-5 and pos[1] is None, pos
assert r.geohash("Sicily", "Palermo") == ["sqc8b49rny0"]
assert r.geosearchstore("near", "Sicily", longitude=15, latitude=37, radius=100, unit="km") == 1
assert r.zrange("near", 0, -1) == ["Catania"]

# Lua scripts as redis-py uses them: Lock (SET NX PX, then EVALSHA scripts to extend and
# release, loading them on NOSCRIPT) and register_script.
lock = r.lock("resource", timeout=10)
assert lock.acquire(blocking=False)
assert not r.lock("resource", timeout=10).acquire(blocking=False)
assert lock.extend(5)
assert 10 < r.pttl("resource") <= 15000
lock.release()
assert r.get("resource") is None
incr_by = r.register_script("return redis.call('incrby', KEYS[1], ARGV[1])")
assert incr_by(keys=["scripted"], args=[5]) == 5
r.script_flush()
assert incr_by(keys=["scripted"], args=[2]) == 7
assert r.eval("return {KEYS[1], ARGV[1], 3}", 1, "k", "a") == ["k", "a", 3]

# Redis 7 functions through redis-py's function_* and fcall helpers, in a MULTI pipeline too.
r.function_flush()
lib = (
    "#!lua name=pylib\n"
    "redis.register_function('incrby2', function(keys, args)\n"
    "  return redis.call('INCRBY', keys[1], 2 * tonumber(args[1])) end)\n"
    "redis.register_function{function_name='peek', flags={'no-writes'},\n"
    "  callback=function(keys) return redis.call('GET', keys[1]) end}"
)
assert r.function_load(lib) == "pylib"
assert r.fcall("incrby2", 1, "fn", 5) == 10
assert r.fcall_ro("peek", 1, "fn") == "10"
assert r.function_stats()["engines"]["LUA"] == {"libraries_count": 1, "functions_count": 2}
dump = r.function_dump()
r.function_flush()
assert r.function_list() == []
assert r.function_restore(dump)
pipe = r.pipeline()
pipe.fcall("incrby2", 1, "fn", 1).fcall_ro("peek", 1, "fn")
assert pipe.execute() == [12, "12"]

# BITFIELD through redis-py's builder.
bf = r.bitfield("counters")
assert bf.incrby("u8", "#0", 200).incrby("u8", "#0", 100).get("i8", 0).execute() == [200, 44, 44]

# RESP3.
r3 = redis.Redis(host="127.0.0.1", port=port, protocol=3, decode_responses=True)
assert r3.get("b") == "xy"
pipe = r3.pipeline()
pipe.set("c", "1").get("c")
assert pipe.execute() == [True, "1"]
print("redis-py", redis.__version__, "ok")
