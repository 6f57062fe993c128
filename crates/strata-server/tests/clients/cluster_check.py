#!/usr/bin/env python3
"""Drives Strata cluster nodes with redis-py's RedisCluster, the way Python applications do.

    cluster_check.py PORT PORT PORT

The nodes must already hold a map that spreads the slots over them. Checks, exiting non-zero on
the first difference:
  1. strings, counters, hashes, hash-tagged multi-key commands, JSON documents and a
     non-transactional pipeline through RedisCluster, which follows MOVED from any node;
  2. a slot range moved from the first node to the second with deploy/cluster/move-slots.py
     while a writer thread keeps setting keys and incrementing counters through RedisCluster:
     afterwards every acknowledged SET reads back, every counter equals the number of its
     acknowledged INCRs (nothing lost, nothing applied twice), the old owner holds no key of the
     moved slots, and the new owner holds every one.
"""

import importlib.util
import os
import sys
import threading
import time

import redis
from redis.cluster import ClusterNode, RedisCluster
from redis.crc import key_slot

HERE = os.path.dirname(os.path.abspath(__file__))
MOVE_SLOTS = os.path.join(HERE, "..", "..", "..", "..", "deploy", "cluster", "move-slots.py")


def check(cond, what):
    if not cond:
        print(f"FAILED: {what}", file=sys.stderr)
        sys.exit(1)


def main():
    ports = [int(p) for p in sys.argv[1:]]
    check(len(ports) >= 2, "usage: cluster_check.py PORT PORT [PORT...]")
    rc = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", p) for p in ports], decode_responses=True)

    # 1. Everyday commands, routed by slot.
    for i in range(200):
        rc.set(f"user:{i}", f"name-{i}")
    for i in range(200):
        check(rc.get(f"user:{i}") == f"name-{i}", f"user:{i} reads back")
    spread = [redis.Redis(port=p).dbsize() for p in ports]
    check(all(n > 0 for n in spread), f"keys spread over every node: {spread}")
    check(rc.incr("hits") == 1 and rc.incrby("hits", 4) == 5, "INCR/INCRBY")
    rc.hset("h:1", mapping={"a": "1", "b": "2"})
    check(rc.hgetall("h:1") == {"a": "1", "b": "2"}, "HSET/HGETALL")
    check(rc.mset({"{acct}:a": "1", "{acct}:b": "2"}) is True, "MSET with one hash tag")
    check(rc.mget("{acct}:a", "{acct}:b") == ["1", "2"], "MGET with one hash tag")
    # redis-py splits a multi-key MGET across slots by itself.
    check(rc.mget_nonatomic("user:1", "user:2", "hits") == ["name-1", "name-2", "5"], "MGET across nodes")
    rc.json().set("doc:1", "$", {"name": "ada", "langs": ["en"]})
    rc.json().arrappend("doc:1", "$.langs", "fr")
    check(rc.json().get("doc:1", "$.langs") == [["en", "fr"]], "JSON.SET/ARRAPPEND/GET")
    pipe = rc.pipeline()
    for i in range(50):
        pipe.set(f"p:{i}", i)
    pipe.get("p:7")
    replies = pipe.execute()
    check(replies[-1] == "7" and all(r is True for r in replies[:-1]), "non-transactional pipeline")
    # A plain client on the wrong node gets MOVED naming the owner.
    owner = rc.get_node_from_key("user:1")
    other = next(p for p in ports if p != owner.port)
    try:
        redis.Redis(port=other).get("user:1")
        check(False, "GET on a node that does not own the slot answers MOVED")
    except redis.exceptions.MovedError as e:
        check(str(e) == f"{key_slot(b'user:1')} 127.0.0.1:{owner.port}", f"MOVED text: {e}")

    # 2. Move slots while a writer runs.
    spec = importlib.util.spec_from_file_location("move_slots", MOVE_SLOTS)
    move_slots = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(move_slots)
    source, target = ports[0], ports[1]
    source_slots = sorted(
        s for s in range(16384) if rc.nodes_manager.get_node_from_slot(s).port == source
    )
    moving = set(source_slots[: len(source_slots) // 2])
    check(len(moving) > 100, "the first node owns slots to move")
    # Keys the writer will touch, some of them in the moving slots before the move starts.
    for i in range(3000):
        rc.set(f"pre:{i}", i)

    acked_sets = {}
    acked_incrs = {}
    failures = []
    stop = threading.Event()

    def writer():
        w = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", p) for p in ports], decode_responses=True)
        i = 0
        while not stop.is_set() or i < 2000:
            key, counter = f"w:{i}", f"c:{i % 64}"
            try:
                w.set(key, i)
                acked_sets[key] = str(i)
                w.incr(counter)
                acked_incrs[counter] = acked_incrs.get(counter, 0) + 1
            except Exception as e:  # noqa: BLE001 - any failure is reported below
                failures.append(f"{key}: {e!r}")
                if len(failures) > 20:
                    return
            i += 1

    t = threading.Thread(target=writer)
    t.start()
    time.sleep(0.3)
    sys.argv = [
        "move-slots.py",
        "--source", f"127.0.0.1:{source}",
        "--target", f"127.0.0.1:{target}",
        "--slots", ",".join(str(s) for s in sorted(moving)),
        "--batch", "50",
    ]
    try:
        move_slots.main()
        time.sleep(0.3)
    finally:
        stop.set()
        t.join()
    check(not failures, f"writes failed during the move: {failures[:5]}")
    # Run again (as after a stop during the map push): it only pushes the map once more.
    move_slots.main()
    check(len(acked_sets) >= 2000, f"the writer kept writing ({len(acked_sets)} SETs)")

    reader = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", p) for p in ports], decode_responses=True)
    for key, value in acked_sets.items():
        check(reader.get(key) == value, f"{key} reads back after the move")
    for i in range(3000):
        check(reader.get(f"pre:{i}") == str(i), f"pre:{i} reads back after the move")
    for counter, n in acked_incrs.items():
        check(reader.get(counter) == str(n), f"{counter} = {n} acknowledged INCRs")
    for s in moving:
        check(reader.nodes_manager.get_node_from_slot(s).port == target, f"slot {s} now on the target")
    src, dst = redis.Redis(port=source), redis.Redis(port=target)
    sample = [s for s in sorted(moving)][:: max(1, len(moving) // 40)]
    for s in sample:
        check(src.execute_command("CLUSTER COUNTKEYSINSLOT", s) == 0, f"slot {s} left the source")
    moved_keys = [k for k in list(acked_sets) + [f"pre:{i}" for i in range(3000)] if key_slot(k.encode()) in moving]
    check(len(moved_keys) > 100, "keys were written to the moving slots")
    for k in moved_keys:
        # Straight to the target, no redirection: it owns them now.
        check(dst.exists(k) == 1, f"{k} is on the target")
    print(f"ok: {len(acked_sets)} SETs and {sum(acked_incrs.values())} INCRs during a move of {len(moving)} slots")

    # 3. One hot slot moved under concurrent INCRs of its keys: every key exists on the source
    # when the move starts, so each MIGRATE batch races the writers for the same keys.
    hot = key_slot(b"{hot}")
    rc3 = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", p) for p in ports], decode_responses=True)
    owner = rc3.nodes_manager.get_node_from_slot(hot).port
    dest = next(p for p in ports if p != owner)
    counters = [f"{{hot}}:{i}" for i in range(200)]
    for k in counters:
        rc3.set(k, 0)
    incr_acked = [dict() for _ in range(4)]
    incr_failures = []
    stop3 = threading.Event()

    def incrementer(n):
        w = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", p) for p in ports], decode_responses=True)
        i = n
        while not stop3.is_set():
            k = counters[i % len(counters)]
            try:
                w.incr(k)
                incr_acked[n][k] = incr_acked[n].get(k, 0) + 1
            except Exception as e:  # noqa: BLE001
                incr_failures.append(f"{k}: {e!r}")
                return
            i += 7

    threads = [threading.Thread(target=incrementer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.3)
    sys.argv = ["move-slots.py", "--source", f"127.0.0.1:{owner}", "--target", f"127.0.0.1:{dest}",
                "--slots", str(hot), "--batch", "10"]
    try:
        move_slots.main()
        time.sleep(0.3)
    finally:
        stop3.set()
        for t in threads:
            t.join()
    check(not incr_failures, f"INCRs failed during the hot move: {incr_failures[:3]}")
    reader3 = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", p) for p in ports], decode_responses=True)
    total = 0
    for k in counters:
        want = sum(a.get(k, 0) for a in incr_acked)
        total += want
        check(reader3.get(k) == str(want), f"{k} = {reader3.get(k)} after {want} acknowledged INCRs across the move")
    check(redis.Redis(port=owner).execute_command("CLUSTER COUNTKEYSINSLOT", hot) == 0, "the hot slot left its source")
    print(f"ok: {total} INCRs of one hot slot's 200 keys during its move")


if __name__ == "__main__":
    main()
