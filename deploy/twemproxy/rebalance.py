#!/usr/bin/env python3
"""Moves keys between Strata (or Redis) nodes when a twemproxy pool changes.

    rebalance.py OLD.yml NEW.yml [--pool NAME] [--batch 100] [--dry-run]

twemproxy's ketama places each key on a node; adding or removing a node changes the owner of
about 1/N of the keys, and the proxy does not move them. This script computes, exactly as
nutcracker 0.5 does (ketama continuum of md5 points per server name, the pool's `hash` and
`hash_tag`), which node owns each key under NEW.yml, walks every node of OLD.yml with SCAN and
MIGRATEs (with REPLACE, keeping TTLs) each key whose owner changed to its new node. Run it with
writers stopped (or accept that writes made to moved keys through the old proxy between the copy
and the switch are lost), then restart the proxy with NEW.yml. Safe to run again.

Supported pool settings: `distribution: ketama`, `hash: md5` (deploy/twemproxy's choice) or
`fnv1a_64` (twemproxy's default), `hash_tag`, servers as `host:port:weight [name]`; both hashes
are checked against a running nutcracker by the project's tests. Needs redis-py.
"""

import argparse
import hashlib
import struct
import sys

KETAMA_POINTS_PER_SERVER = 160


def f32(x):
    """x rounded to a C float, as nutcracker computes the point count."""
    return struct.unpack("f", struct.pack("f", x))[0]


def md5_word(data, alignment=0):
    d = hashlib.md5(data).digest()
    i = alignment * 4
    return d[i] | d[i + 1] << 8 | d[i + 2] << 16 | d[i + 3] << 24


def signed_char(b, bits):
    """A key byte as nutcracker reads it: through a (signed) char, sign-extended."""
    return b | ((1 << bits) - 256) if b >= 0x80 else b


def fnv1a_64(key):
    # nutcracker's hash_fnv1a_64 keeps the 64-bit FNV basis and prime in a uint32_t.
    h = 0xCBF29CE484222325 & 0xFFFFFFFF
    for b in key:
        h ^= signed_char(b, 32)
        h = (h * (0x100000001B3 & 0xFFFFFFFF)) & 0xFFFFFFFF
    return h


HASHES = {
    "md5": md5_word,
    "fnv1a_64": fnv1a_64,
}


class Pool:
    """One twemproxy pool: its servers and how it places keys."""

    def __init__(self, settings, servers):
        if settings.get("distribution", "ketama") != "ketama":
            raise SystemExit("only distribution: ketama is supported")
        name = settings.get("hash", "fnv1a_64")
        if name not in HASHES:
            raise SystemExit(f"unsupported hash: {name}")
        self.hash = HASHES[name]
        tag = settings.get("hash_tag", "").strip('"').strip("'")
        self.tag = tag.encode() if len(tag) == 2 else None
        self.servers = servers  # [(host, port, weight, name)]
        self.continuum = self._continuum()

    def _continuum(self):
        total = sum(w for _, _, w, _ in self.servers)
        n = len(self.servers)
        points = []
        for index, (_, _, weight, name) in enumerate(self.servers):
            pct = f32(weight / total)
            per_server = int(f32(f32(pct * KETAMA_POINTS_PER_SERVER / 4 * n) + f32(0.0000000001)) // 1) * 4
            for p in range(1, per_server // 4 + 1):
                host = f"{name}-{p - 1}".encode()
                for x in range(4):
                    points.append((md5_word(host, x), index))
        points.sort(key=lambda pt: pt[0])
        return points

    def owner(self, key):
        """Index of the server that owns `key` (bytes)."""
        if self.tag:
            start = key.find(self.tag[:1])
            if start >= 0:
                end = key.find(self.tag[1:], start + 1)
                if end > start + 1:
                    key = key[start + 1 : end]
        h = self.hash(key)
        lo, hi = 0, len(self.continuum)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.continuum[mid][0] < h:
                lo = mid + 1
            else:
                hi = mid
        if hi == len(self.continuum):
            hi = 0
        return self.continuum[hi][1]


def read_pool(path, pool_name=None):
    """Parses the subset of nutcracker YAML a pool needs (no YAML library required)."""
    pools, current, in_servers = {}, None, False
    for raw in open(path, encoding="utf-8"):
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        if not line.startswith(" "):
            current = line.rstrip(":").strip()
            pools[current] = ({}, [])
            in_servers = False
            continue
        settings, servers = pools[current]
        text = line.strip()
        if text.startswith("- ") and in_servers:
            words = text[2:].split()
            addr = words[0].split(":")
            host, port, weight = addr[0], int(addr[1]), int(addr[2]) if len(addr) > 2 else 1
            name = words[1] if len(words) > 1 else f"{host}:{port}"
            servers.append((host, port, weight, name))
        elif ":" in text:
            key, _, value = text.partition(":")
            in_servers = key.strip() == "servers"
            settings[key.strip()] = value.strip()
    if pool_name is None:
        if len(pools) != 1:
            raise SystemExit(f"{path} has pools {list(pools)}: name one with --pool")
        pool_name = next(iter(pools))
    settings, servers = pools[pool_name]
    return Pool(settings, servers)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--pool", help="pool name when the files hold several")
    p.add_argument("--batch", type=int, default=100, help="keys per MIGRATE call")
    p.add_argument("--timeout-ms", type=int, default=5000)
    p.add_argument("--dry-run", action="store_true", help="count what would move, move nothing")
    args = p.parse_args()

    import redis

    old, new = read_pool(args.old, args.pool), read_pool(args.new, args.pool)
    moved = kept = 0
    for host, port, _, _ in old.servers:
        node = redis.Redis(host=host, port=port, socket_timeout=30)
        batches = {}

        def flush(target):
            keys = batches.pop(target, [])
            if keys and not args.dry_run:
                th, tp = new.servers[target][0], new.servers[target][1]
                node.execute_command("MIGRATE", th, tp, "", 0, args.timeout_ms, "REPLACE", "KEYS", *keys)

        for key in node.scan_iter(count=1000):
            target = new.owner(key)
            th, tp = new.servers[target][0], new.servers[target][1]
            if (th, tp) == (host, port):
                kept += 1
                continue
            batches.setdefault(target, []).append(key)
            moved += 1
            if len(batches[target]) >= args.batch:
                flush(target)
        for target in list(batches):
            flush(target)
    verb = "would move" if args.dry_run else "moved"
    print(f"{verb} {moved} keys, kept {kept} in place", file=sys.stderr)


if __name__ == "__main__":
    main()
