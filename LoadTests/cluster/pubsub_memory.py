#!/usr/bin/env python3
"""Redis memory per sharded subscription: a private redis-server on 127.0.0.1, NODES subscriber
connections (stand-ins for relay nodes) each subscribing to the same CHANNELS room channels;
`used_memory` after each connection's subscriptions.

    python3 LoadTests/cluster/pubsub_memory.py --channels 50000 --nodes 4
"""

from __future__ import annotations

import argparse
import shutil
import socket
import subprocess
import tempfile
import time


def resp(args: list[str]) -> bytes:
    out = f"*{len(args)}\r\n".encode()
    for a in args:
        b = a.encode()
        out += f"${len(b)}\r\n".encode() + b + b"\r\n"
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--channels", type=int, default=50_000)
    ap.add_argument("--nodes", type=int, default=4)
    args = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    workdir = tempfile.mkdtemp(prefix="pubsub-memory-")
    server = subprocess.Popen([shutil.which("redis-server") or "/usr/bin/redis-server", "--port", str(port), "--bind", "127.0.0.1",
                               "--save", "", "--appendonly", "no", "--dir", workdir], stdout=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)

        def used() -> int:
            info = subprocess.run(["redis-cli", "-p", str(port), "INFO", "memory"], capture_output=True, text=True).stdout
            return int(next(l for l in info.splitlines() if l.startswith("used_memory:")).split(":")[1])

        base = used()
        conns = []
        previous = base
        for node in range(args.nodes):
            c = socket.create_connection(("127.0.0.1", port))
            conns.append(c)
            for i in range(0, args.channels, 1000):
                c.sendall(resp(["SSUBSCRIBE"] + [f"relay:room:{{conversation:{j:08d}}}" for j in range(i, min(i + 1000, args.channels))]))
            c.settimeout(10)
            received = bytearray()
            confirmed = 0
            while confirmed < args.channels:
                data = c.recv(1 << 20)
                if not data:
                    break
                received += data
                confirmed = received.count(b"ssubscribe")
            now = used()
            print(f"node {node}: {confirmed} subscriptions confirmed, +{(now - previous) / args.channels:.0f} bytes per channel")
            previous = now
        total = used() - base
        print(f"{args.nodes} nodes × {args.channels} channels: {total / (args.nodes * args.channels):.0f} bytes per (channel, node)")
        for c in conns:
            c.close()
    finally:
        server.terminate()
        server.wait(10)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
