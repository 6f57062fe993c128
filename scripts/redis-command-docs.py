#!/usr/bin/env python3
"""Writes crates/strata-server/src/commands/docs.json: redis-server 7.0's COMMAND DOCS (each
command's summary, since, group, complexity, history, arguments and subcommands), read from a
running redis-server in RESP3 so that maps, sets and simple strings keep their types.

    redis-server --port 6390 --save "" --daemonize yes
    scripts/redis-command-docs.py 6390

Needs nothing but Python. The data is Redis's (src/commands/*.json, BSD-3-Clause).

Encoding (read by `commands/docs.rs`): a map is {"%": [[key, value], ...]} (order kept), a set
{"~": [...]}, an array [...], a bulk string a JSON string, a simple string {"+": "..."}, an
integer a JSON number. The file is one object: command name -> its docs map.
"""
import json
import socket
import sys

OUT = "crates/strata-server/src/commands/docs.json"


class Reader:
    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def line(self):
        while b"\r\n" not in self.buf:
            self.more()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def exact(self, n):
        while len(self.buf) < n + 2:
            self.more()
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def more(self):
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise EOFError("connection closed")
        self.buf += chunk

    def value(self):
        line = self.line()
        kind, rest = line[:1], line[1:]
        if kind == b"$":
            return self.exact(int(rest)).decode()
        if kind == b"+":
            return {"+": rest.decode()}
        if kind == b":":
            return int(rest)
        if kind == b"*":
            return [self.value() for _ in range(int(rest))]
        if kind == b"~":
            return {"~": [self.value() for _ in range(int(rest))]}
        if kind == b"%":
            return {"%": [[self.value(), self.value()] for _ in range(int(rest))]}
        if kind == b"-":
            raise RuntimeError(rest.decode())
        raise RuntimeError("unexpected reply type %r" % line)


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 6379
    sock = socket.create_connection(("127.0.0.1", port))
    r = Reader(sock)
    sock.sendall(b"HELLO 3\r\n")
    r.value()
    sock.sendall(b"COMMAND DOCS\r\n")
    docs = r.value()
    table = {name: value for name, value in docs["%"]}
    with open(OUT, "w") as f:
        json.dump(table, f, sort_keys=True, separators=(",", ":"))
        f.write("\n")
    print("%d commands -> %s" % (len(table), OUT))


if __name__ == "__main__":
    main()
