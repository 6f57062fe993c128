#!/usr/bin/env python3
"""Moves hash slots from one Strata cluster node to another while clients keep writing.

    move-slots.py --source 127.0.0.1:7001 --target 127.0.0.1:7002 --slots 0-999,5000

Steps (Redis Cluster's own procedure, with the map pushed by CLUSTERX SETNODES since there is
no gossip bus; docs/scale-out.md):
  1. On the target `CLUSTER SETSLOT <slot> IMPORTING <source-id>`, on the source
     `... MIGRATING <target-id>`, for every slot. From now on the source answers -ASK for keys
     of those slots it no longer has, so new keys land on the target.
  2. Walk the source's keys once (SCAN) and MIGRATE those of the moving slots, a batch of keys
     of one slot per call (MIGRATE holds the source's write lock while it copies and deletes a
     batch, so no write to those keys is lost or applied twice). Walk again until none is left.
  3. Push the map with the slots given to the target, at the next version, to the target, then
     the source, then every other node of the map. Each node ends the move for the slots the
     new map settles.
Needs redis-py (`pip install redis`).
"""

import argparse
import sys

import redis
from redis.crc import key_slot


def parse_slots(text):
    slots = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        first, _, last = part.partition("-")
        a, b = int(first), int(last or first)
        if not (0 <= a <= b <= 16383):
            raise SystemExit(f"bad slot range: {part}")
        slots.update(range(a, b + 1))
    return slots


def connect(addr):
    host, _, port = addr.rpartition(":")
    return redis.Redis(host=host, port=int(port), decode_responses=False, socket_timeout=30)


def read_map(node):
    """The node's map as {id: [host, port, set(slots)]} and its version."""
    nodes = {}
    # ("CLUSTER", "NODES" as two words: redis-py would parse "CLUSTER NODES" into a dict.)
    for line in node.execute_command("CLUSTER", "NODES").decode().splitlines():
        words = line.split()
        if len(words) < 8:
            continue
        node_id, addr = words[0], words[1].split("@")[0]
        host, _, port = addr.rpartition(":")
        if not host:
            continue
        slots = set()
        for w in words[8:]:
            if w.startswith("["):
                continue
            a, _, b = w.partition("-")
            slots.update(range(int(a), int(b or a) + 1))
        nodes[node_id] = [host, int(port), slots]
    version = int(node.execute_command("CLUSTERX", "VERSION"))
    return nodes, version


def map_text(nodes):
    lines = []
    for node_id, (host, port, slots) in nodes.items():
        ranges, run = [], None
        for s in sorted(slots):
            if run and s == run[1] + 1:
                run[1] = s
            else:
                run = [s, s]
                ranges.append(run)
        words = [f"{a}-{b}" if a != b else str(a) for a, b in ranges]
        lines.append(" ".join([node_id, host, str(port), "master", "-"] + words))
    return "\n".join(lines)


def migrate_pass(source, target_host, target_port, slots, batch, timeout_ms):
    """One SCAN over the source, migrating keys of `slots`; returns how many it moved."""
    moved = 0
    pending = {}

    def flush(slot):
        nonlocal moved
        keys = pending.pop(slot, [])
        if keys:
            reply = source.execute_command(
                "MIGRATE", target_host, target_port, "", 0, timeout_ms, "REPLACE", "KEYS", *keys
            )
            if reply in (b"OK", "OK", True):
                moved += len(keys)

    cursor = 0
    while True:
        cursor, keys = source.scan(cursor=cursor, count=1000)
        for k in keys:
            slot = key_slot(k)
            if slot in slots:
                pending.setdefault(slot, []).append(k)
                if len(pending[slot]) >= batch:
                    flush(slot)
        if int(cursor) == 0:
            break
    for slot in list(pending):
        flush(slot)
    return moved


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--source", required=True, help="host:port of the node giving the slots")
    p.add_argument("--target", required=True, help="host:port of the node taking them")
    p.add_argument("--slots", required=True, help="slots and ranges, e.g. 0-999,5000")
    p.add_argument("--batch", type=int, default=100, help="keys per MIGRATE call")
    p.add_argument("--timeout-ms", type=int, default=5000, help="MIGRATE timeout")
    args = p.parse_args()

    slots = parse_slots(args.slots)
    source, target = connect(args.source), connect(args.target)
    source_id = source.execute_command("CLUSTER", "MYID").decode()
    target_id = target.execute_command("CLUSTER", "MYID").decode()
    # A run stopped while pushing the map: the target already owns the slots in its map, which
    # some nodes may still lack. Finish the push instead of starting over.
    target_nodes, target_version = read_map(target)
    if target_id in target_nodes and slots <= target_nodes[target_id][2]:
        push_map(target_nodes, target_version, [target_id, source_id])
        print(f"the target already owned these slots: map version {target_version} pushed again", file=sys.stderr)
        return
    nodes, version = read_map(source)
    if source_id not in nodes or target_id not in nodes:
        raise SystemExit("both nodes must be in the source's map (push it with CLUSTERX SETNODES)")
    not_owned = slots - nodes[source_id][2]
    if not_owned:
        raise SystemExit(f"the source does not own {len(not_owned)} of these slots, e.g. {min(not_owned)}")

    for slot in sorted(slots):
        target.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", source_id)
        source.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", target_id)

    host, port = nodes[target_id][0], nodes[target_id][1]
    total = 0
    while True:
        moved = migrate_pass(source, host, port, slots, args.batch, args.timeout_ms)
        total += moved
        if moved == 0:
            break
    print(f"moved {total} keys of {len(slots)} slots", file=sys.stderr)

    nodes[source_id][2] -= slots
    nodes[target_id][2] |= slots
    push_map(nodes, version + 1, [target_id, source_id])


def push_map(nodes, version, first):
    """Sends the map to the nodes named in `first`, in that order, then to every other node."""
    text = map_text(nodes)
    order = first + [n for n in nodes if n not in first]
    for node_id in order:
        h, pt, _ = nodes[node_id]
        redis.Redis(host=h, port=pt).execute_command("CLUSTERX", "SETNODES", text, version)
    print(f"map version {version} pushed to {len(order)} nodes", file=sys.stderr)


if __name__ == "__main__":
    main()
