#!/usr/bin/env python3
"""Checks deploy/twemproxy/rebalance.py against a real nutcracker.

    twemproxy_check.py NUTCRACKER WORKDIR PORT PORT PORT PORT

For each supported hash (md5, fnv1a_64): a proxy over the first three nodes takes 3000 writes
(plain keys, hash-tagged keys, non-ASCII bytes); every key must sit on the node rebalance.py's
ketama predicts. Then a fourth node joins: rebalance.py moves keys, a proxy over the four nodes
must read every key back, about a quarter of them moved, and no node keeps a stale copy.
"""

import importlib.util
import os
import socket
import subprocess
import sys
import time

import redis

HERE = os.path.dirname(os.path.abspath(__file__))
DEPLOY = os.path.join(HERE, "..", "..", "..", "..", "deploy", "twemproxy")


def check(cond, what):
    if not cond:
        print(f"FAILED: {what}", file=sys.stderr)
        sys.exit(1)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Bare:
    """RESP over a socket: nutcracker refuses the CLIENT SETINFO redis-py sends on connect."""

    def __init__(self, port):
        deadline = time.time() + 20
        while True:
            try:
                self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
                break
            except OSError:
                check(time.time() < deadline, f"nutcracker on {port} did not start")
                time.sleep(0.05)
        self.f = self.sock.makefile("rb")

    def call(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(out)
        line = self.f.readline().rstrip(b"\r\n")
        if line[:1] == b"$":
            n = int(line[1:])
            if n < 0:
                return None
            data = self.f.read(n + 2)
            return data[:-2]
        if line[:1] == b"-":
            raise RuntimeError(line.decode(errors="replace"))
        return line


def write_conf(path, hash_name, listen, ports):
    lines = [
        "strata:",
        f"  listen: 127.0.0.1:{listen}",
        "  redis: true",
        "  distribution: ketama",
        f"  hash: {hash_name}",
        '  hash_tag: "{}"',
        "  auto_eject_hosts: false",
        "  timeout: 2000",
        "  servers:",
    ]
    lines += [f"    - 127.0.0.1:{p}:1 strata{i + 1}" for i, p in enumerate(ports)]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def start_proxy(nutcracker, conf, log):
    return subprocess.Popen(
        [nutcracker, "-c", conf, "-s", str(free_port()), "-a", "127.0.0.1", "-o", log],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main():
    nutcracker, work = sys.argv[1], sys.argv[2]
    ports = [int(p) for p in sys.argv[3:]]
    check(len(ports) == 4, "usage: twemproxy_check.py NUTCRACKER WORKDIR PORT PORT PORT PORT")
    spec = importlib.util.spec_from_file_location("rebalance", os.path.join(DEPLOY, "rebalance.py"))
    rebalance = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rebalance)
    nodes = [redis.Redis(port=p) for p in ports]
    keys = []
    for i in range(3000):
        if i % 10 == 0:
            keys.append(f"{{acct:{i % 70}}}:item:{i}".encode())
        elif i % 10 == 1:
            keys.append(b"k\xc3\xa9\xff" + str(i).encode())
        else:
            keys.append(f"key:{i:012d}".encode() if i % 2 else f"key{i}".encode())
    for hash_name in ["md5", "fnv1a_64"]:
        for n in nodes:
            n.flushall()
        old_conf, new_conf = os.path.join(work, "old.yml"), os.path.join(work, "new.yml")
        proxy_port = free_port()
        write_conf(old_conf, hash_name, proxy_port, ports[:3])
        proxy = start_proxy(nutcracker, old_conf, os.path.join(work, "old.log"))
        try:
            c = Bare(proxy_port)
            for i, k in enumerate(keys):
                check(c.call("SET", k, i) == b"+OK", f"SET {k!r} through the proxy")
        finally:
            proxy.kill()
            proxy.wait()
        pool = rebalance.read_pool(old_conf)
        for k in keys:
            where = [i for i, n in enumerate(nodes) if n.exists(k)]
            check(where == [pool.owner(k)], f"{hash_name}: {k!r} is on {where}, ketama says {pool.owner(k)}")

        write_conf(new_conf, hash_name, proxy_port, ports)
        subprocess.run([sys.executable, os.path.join(DEPLOY, "rebalance.py"), old_conf, new_conf], check=True)
        proxy = start_proxy(nutcracker, new_conf, os.path.join(work, "new.log"))
        try:
            c = Bare(proxy_port)
            for i, k in enumerate(keys):
                check(c.call("GET", k) == str(i).encode(), f"{hash_name}: {k!r} reads back after the rebalance")
        finally:
            proxy.kill()
            proxy.wait()
        on_new = nodes[3].dbsize()
        total = sum(n.dbsize() for n in nodes)
        check(total == len(keys), f"{hash_name}: {total} keys stored for {len(keys)} (a stale copy was left)")
        check(0.12 * len(keys) < on_new < 0.4 * len(keys), f"{hash_name}: {on_new} keys moved to the new node")
        print(f"{hash_name}: placement predicted for {len(keys)} keys; {on_new} moved to the fourth node")


if __name__ == "__main__":
    main()
