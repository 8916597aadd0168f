"""Engine.IO long-polling cost: connects/s, resident memory per polling session, and delivery
latency to polling members of a room, against a relay binary it starts itself.

    python3 LoadTests/polling/polling_bench.py --relay .build-release/release/relay --sessions 1000

Every session is a real Engine.IO polling client written here with aiohttp: the handshake
`GET`, CONNECT in a `POST`, `room:join`, then one held `GET` at a time, answering pings. A
WebSocket sender then emits `bench:tick` events carrying their send time to the room, and the
pollers record how long each took to arrive. Everything on 127.0.0.1, bounded in count and time.
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

SEP = "\x1e"
ROOM = "bench:polling"


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Poller:
    def __init__(self, http: aiohttp.ClientSession, base: str, n: int):
        self.http, self.base, self.n = http, base, n
        self.sid = ""
        self.latencies: list[float] = []
        self.stop = False

    async def open(self) -> None:
        async with self.http.get(self.base) as r:
            body = await r.text()
        self.sid = json.loads(body[1:])["sid"]
        await self.post("40" + json.dumps({"token": mint_token(f"poller-{self.n}", rooms=["bench:*"])}))
        while not any(p.startswith("40{") for p in await self.get()):
            pass
        await self.post("421" + json.dumps(["room:join", {"room": ROOM}]))
        while not any(p.startswith("431") for p in await self.get()):
            pass

    async def post(self, *packets: str) -> None:
        async with self.http.post(f"{self.base}&sid={self.sid}", data=SEP.join(packets).encode()) as r:
            await r.read()

    async def get(self) -> list[str]:
        async with self.http.get(f"{self.base}&sid={self.sid}") as r:
            return (await r.text()).split(SEP)

    async def run(self) -> None:
        while not self.stop:
            try:
                packets = await self.get()
            except aiohttp.ClientError:
                return
            now = time.time()
            for p in packets:
                if p == "2":
                    await self.post("3")
                elif p.startswith('42["bench:tick"'):
                    self.latencies.append((now - json.loads(p[2:])[1]["t"]) * 1000)


async def bench(relay: str, sessions: int, events: int, rate: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.Popen(
            [relay, "--port", "0", "--jwt-secret", JWT_SECRET, "--api-key", API_KEY, "--admin-key", ADMIN_KEY,
             "--db", os.path.join(tmp, "r.sqlite"), "--log-level", "notice", "--max-members-per-room", str(sessions + 10),
             "--max-connections-per-ip", "1000000", "--max-connections-per-user", "1000000",
             "--rate", "custom=100000:100000", "--events-per-second", "100000", "--event-burst", "100000"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            port = None
            deadline = time.monotonic() + 30
            while port is None and time.monotonic() < deadline:
                m = re.search(r"relay listening on 127\.0\.0\.1:(\d+)", proc.stdout.readline())
                if m:
                    port = int(m.group(1))
            assert port, "relay did not start"
            base = f"http://127.0.0.1:{port}/socket.io/?EIO=4&transport=polling"
            idle_rss = rss_kib(proc.pid)
            connector = aiohttp.TCPConnector(limit=0, force_close=False)
            async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=120)) as http:
                pollers = [Poller(http, base, i) for i in range(sessions)]
                t0 = time.perf_counter()
                sem = asyncio.Semaphore(200)

                async def open_one(p: Poller):
                    async with sem:
                        await p.open()

                await asyncio.gather(*(open_one(p) for p in pollers))
                connect_s = time.perf_counter() - t0
                tasks = [asyncio.create_task(p.run()) for p in pollers]
                await asyncio.sleep(1)
                loaded_rss = rss_kib(proc.pid)
                ws = await ws_connect(f"ws://127.0.0.1:{port}/socket.io/?EIO=4&transport=websocket", compression=None)
                await ws.recv()
                await ws.send("40" + json.dumps({"token": mint_token("sender", rooms=["bench:*"])}))
                await ws.recv()
                await ws.send("421" + json.dumps(["room:join", {"room": ROOM}]))
                while not (await ws.recv()).startswith("431"):
                    pass
                for i in range(events):
                    await ws.send("42" + json.dumps(["bench:tick", {"room": ROOM, "i": i, "t": time.time()}]))
                    await asyncio.sleep(1 / rate)
                expected = events * sessions
                deadline = time.monotonic() + 30
                while sum(len(p.latencies) for p in pollers) < expected and time.monotonic() < deadline:
                    await asyncio.sleep(0.1)
                for p in pollers:
                    p.stop = True
                await ws.close()
                for t in tasks:
                    t.cancel()
            lat = sorted(x for p in pollers for x in p.latencies)
            return {
                "sessions": sessions, "connects_per_s": round(sessions / connect_s, 1),
                "rss_idle_mib": round(idle_rss / 1024, 1), "rss_loaded_mib": round(loaded_rss / 1024, 1),
                "kib_per_session": round((loaded_rss - idle_rss) / sessions, 2),
                "events": events, "deliveries": len(lat), "expected": expected,
                "latency_p50_ms": round(statistics.median(lat), 2) if lat else None,
                "latency_p99_ms": round(lat[int(len(lat) * 0.99) - 1], 2) if lat else None,
            }
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--relay", required=True)
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--events", type=int, default=50)
    ap.add_argument("--rate", type=float, default=20.0, help="events per second from the sender")
    args = ap.parse_args()
    print(json.dumps(asyncio.run(asyncio.wait_for(bench(args.relay, args.sessions, args.events, args.rate), 600))))


if __name__ == "__main__":
    main()
