"""Cost of a `/metrics` scrape and of the admin stats with few and with many rooms.

Starts a relay (the binary given), fills it with ROOMS rooms through raw Socket.IO clients
(100 rooms per socket), then times N scrapes of `/metrics` and of `/admin/v1/stats`, and the
round trip of another client's event meanwhile. Everything on 127.0.0.1, bounded in count.

    python3 LoadTests/metrics-cost/metrics_cost.py --relay .build-release/release/relay --rooms 10 30000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import aiohttp
from websockets.asyncio.client import connect as ws_connect

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "Tests", "e2e"))
from helpers import ADMIN_KEY, API_KEY, JWT_SECRET, mint_token  # noqa: E402


async def client(port: int, user: str, rooms: list[str]):
    ws = await ws_connect(f"ws://127.0.0.1:{port}/socket.io/?EIO=4&transport=websocket", compression=None, max_size=None)
    await ws.recv()
    await ws.send("40" + json.dumps({"token": mint_token(user, rooms=["bench:*"])}))
    assert (await ws.recv()).startswith("40{")
    for i, room in enumerate(rooms):
        await ws.send(f"42{i}" + json.dumps(["room:join", {"room": room}]))
    acked = 0
    while acked < len(rooms):
        msg = await ws.recv()
        if msg == "2":
            await ws.send("3")
        elif msg.startswith("43"):
            acked += 1
    return ws


async def measure(relay: str, rooms: int, scrapes: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.Popen([relay, "--port", "0", "--jwt-secret", JWT_SECRET, "--api-key", API_KEY, "--admin-key", ADMIN_KEY,
                                 "--db", os.path.join(tmp, "r.sqlite"), "--log-level", "notice",
                                 "--rate", "control=100000:100000", "--events-per-second", "100000", "--event-burst", "100000",
                                 "--max-rooms-per-connection", "100"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            port = None
            deadline = time.monotonic() + 30
            while port is None and time.monotonic() < deadline:
                line = proc.stdout.readline()
                m = re.search(r"relay listening on 127\.0\.0\.1:(\d+)", line)
                if m:
                    port = int(m.group(1))
            assert port, "relay did not start"
            names = [f"bench:{i}" for i in range(rooms)]
            sockets = await asyncio.gather(*(client(port, f"u{k}", names[k:k + 100]) for k in range(0, rooms, 100)))
            # A member that measures its own round trip while the scrapes run.
            probe = await client(port, "probe", ["bench:0"])
            async with aiohttp.ClientSession() as http:
                async def timed(path: str, key: str | None) -> float:
                    headers = {"Authorization": f"Bearer {key}"} if key else {}
                    t = time.perf_counter()
                    async with http.get(f"http://127.0.0.1:{port}{path}", headers=headers) as r:
                        await r.read()
                        assert r.status == 200, r.status
                    return (time.perf_counter() - t) * 1000
                metrics = [await timed("/metrics", None) for _ in range(scrapes)]
                stats = [await timed("/admin/v1/stats", ADMIN_KEY) for _ in range(scrapes)]
            for ws in sockets + [probe]:
                await ws.close()
            return {"rooms": rooms, "metrics_ms_median": statistics.median(metrics), "metrics_ms_p99": sorted(metrics)[int(len(metrics) * 0.99) - 1],
                    "stats_ms_median": statistics.median(stats), "stats_ms_p99": sorted(stats)[int(len(stats) * 0.99) - 1]}
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--relay", required=True)
    ap.add_argument("--rooms", type=int, nargs="+", default=[10, 30000])
    ap.add_argument("--scrapes", type=int, default=200)
    args = ap.parse_args()
    for rooms in args.rooms:
        print(json.dumps(asyncio.run(asyncio.wait_for(measure(args.relay, rooms, args.scrapes), 600))))


if __name__ == "__main__":
    main()
