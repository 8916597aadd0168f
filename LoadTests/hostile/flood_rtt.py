"""Other users' round trip while one client floods the paths issue #40 found open: empty
continuation frames behind a 990 KB message, `2probe`/`6` on an upgrade probe, `40{rooms}`/`41`
storms. Against relay binaries it starts itself, one after the other, in one run:

    python3 LoadTests/hostile/flood_rtt.py --relay new=.build-release/release/relay \\
        --relay old=/tmp/relay-old/release/relay --threads 1 --seconds 8

Each round starts a fresh relay (`--threads N`: with 1 every socket shares the attacker's
loop), connects `--bystanders` raw WebSocket clients (logged in), and has each send an
Engine.IO ping (`2x`, answered `3x` by the session) every 20 ms and time the answer. First
`--seconds` with no attacker (the baseline), then the same with one attacker that floods the
scenario and reconnects whenever it is closed (bounded: `--seconds`, and at most 1 000 sockets).
It prints the bystanders' round trip (p50, p99, max), how many of their pings were answered,
and the relay's CPU over each window. Everything goes to 127.0.0.1; every loop is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "Tests", "e2e"))
from helpers import ADMIN_KEY, API_KEY, JWT_SECRET, mint_token  # noqa: E402

UPGRADE = (
    "GET /socket.io/?EIO=4&transport=websocket{sid} HTTP/1.1\r\n"
    "Host: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
)
SCENARIOS = ["continuations", "probe", "storm"]


def frame(opcode: int, payload: bytes, fin: bool = True) -> bytes:
    """A masked client frame (mask key 0: the payload as it is)."""
    head = bytes([(0x80 if fin else 0) | opcode])
    n = len(payload)
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 65536:
        head += bytes([0x80 | 126]) + struct.pack("!H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack("!Q", n)
    return head + b"\x00\x00\x00\x00" + payload


class WS:
    """A raw WebSocket client: frames out, whole text messages in (server frames are unmasked)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int, sid: str | None = None) -> "WS":
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 10)
        writer.write(UPGRADE.format(sid=f"&sid={sid}" if sid else "").encode())
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        assert head.startswith(b"HTTP/1.1 101"), head
        return cls(reader, writer)

    async def recv(self, timeout: float = 10) -> tuple[int, bytes]:
        b0, b1 = await asyncio.wait_for(self.reader.readexactly(2), timeout)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", await self.reader.readexactly(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", await self.reader.readexactly(8))[0]
        return b0 & 0x0F, await asyncio.wait_for(self.reader.readexactly(n), timeout)

    async def text(self, timeout: float = 10) -> str:
        while True:
            op, payload = await self.recv(timeout)
            if op == 0x1:
                return payload.decode()
            if op == 0x8:
                raise ConnectionError("closed")

    def send(self, text: str) -> None:
        self.writer.write(frame(0x1, text.encode()))

    async def connect(self, token: str, rooms: list[str] | None = None) -> str:
        auth = {"token": token}
        if rooms:
            auth["rooms"] = rooms
        self.send("40" + json.dumps(auth))
        while True:
            packet = await self.text()
            if packet.startswith("40") or packet.startswith("44"):
                return packet

    def close(self) -> None:
        self.writer.transport.abort()


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def bystander(port: int, i: int, stop: asyncio.Event, rtts: list[float], lost: list[int]) -> None:
    ws = await WS.open(port)
    assert (await ws.text()).startswith("0{")
    assert (await ws.connect(mint_token(f"bystander-{i}"))).startswith("40")
    try:
        while not stop.is_set():
            start = time.perf_counter()
            ws.send("2x")
            try:
                while (await ws.text(timeout=5)) != "3x":
                    pass
                rtts.append((time.perf_counter() - start) * 1000)
            except (asyncio.TimeoutError, ConnectionError, asyncio.IncompleteReadError):
                lost[0] += 1
                return
            await asyncio.sleep(0.02)
    finally:
        ws.close()


async def attacker(port: int, scenario: str, stop: asyncio.Event, sockets: list[int]) -> None:
    empty = frame(0x0, b"", fin=False)
    rooms = [f"conversation:flood-{i}" for i in range(100)]
    token = mint_token("attacker")
    while not stop.is_set() and sockets[0] < 1000:
        sockets[0] += 1
        try:
            if scenario == "probe":
                # An unauthenticated polling session, then its probe.
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(b"GET /socket.io/?EIO=4&transport=polling HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                head = await reader.readuntil(b"\r\n\r\n")
                length = int([h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length:")][0].split(b":")[1])
                body = await reader.readexactly(length)
                sid = json.loads(body[1:])["sid"]
                ws = await WS.open(port, sid)
                while not stop.is_set() and not ws.writer.is_closing():
                    ws.writer.write(frame(0x1, b"2probe") * 50)
                    await ws.writer.drain()
                    await asyncio.sleep(0)
                writer.close()
            else:
                ws = await WS.open(port)
                await ws.text()
                if scenario == "continuations":
                    await ws.connect(token)
                    ws.writer.write(frame(0x1, b"4" + b"a" * 989_999, fin=False))
                    while not stop.is_set() and not ws.writer.is_closing():
                        ws.writer.write(empty * 100)
                        await ws.writer.drain()
                        await asyncio.sleep(0)
                else:  # storm
                    connect = "40" + json.dumps({"token": token, "rooms": rooms})
                    while not stop.is_set():
                        ws.send(connect)
                        answer = await ws.text()
                        while answer.startswith("42"):
                            answer = await ws.text()
                        if not answer.startswith("40"):
                            break
                        ws.send("41")
            ws.close()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.TimeoutError, OSError):
            await asyncio.sleep(0.01)


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


async def window(port: int, pid: int, scenario: str | None, bystanders: int, seconds: float) -> dict:
    stop = asyncio.Event()
    rtts: list[float] = []
    lost = [0]
    sockets = [0]
    tasks = [asyncio.create_task(bystander(port, i, stop, rtts, lost)) for i in range(bystanders)]
    await asyncio.sleep(0.5)  # all connected and pinging
    rtts.clear()
    cpu0 = cpu_seconds(pid)
    flood = asyncio.create_task(attacker(port, scenario, stop, sockets)) if scenario else None
    await asyncio.sleep(seconds)
    stop.set()
    cpu = cpu_seconds(pid) - cpu0
    await asyncio.wait_for(asyncio.gather(*tasks, *([flood] if flood else []), return_exceptions=True), 30)
    return {"p50": percentile(rtts, 50), "p99": percentile(rtts, 99), "max": max(rtts, default=float("nan")),
            "pings": len(rtts), "lost": lost[0], "cpu": cpu, "attacker_sockets": sockets[0]}


async def round_for(binary: str, scenario: str, args) -> tuple[dict, dict]:
    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.Popen(
            [binary, "--port", "0", "--jwt-secret", JWT_SECRET, "--api-key", API_KEY, "--admin-key", ADMIN_KEY,
             "--db", os.path.join(tmp, "r.sqlite"), "--log-level", "notice", "--threads", str(args.threads),
             "--max-connections-per-ip", "1000000"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            port = None
            deadline = time.monotonic() + 30
            while port is None and time.monotonic() < deadline:
                line = proc.stdout.readline()
                if "relay listening on" in line:
                    port = int(line.rsplit(":", 1)[1])
            assert port, "the relay did not start"
            # Drain its output so it never blocks on a full pipe.
            loop = asyncio.get_running_loop()
            loop.run_in_executor(None, lambda: [None for _ in proc.stdout])
            base = await window(port, proc.pid, None, args.bystanders, args.seconds)
            flood = await window(port, proc.pid, scenario, args.bystanders, args.seconds)
            return base, flood
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--relay", action="append", required=True, help="NAME=PATH of a relay binary (repeatable)")
    parser.add_argument("--scenario", action="append", choices=SCENARIOS, help="default: all")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--bystanders", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=8.0)
    args = parser.parse_args()
    print(f"{'relay':8} {'scenario':14} {'window':9} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'pings':>7} {'lost':>5} {'CPU s':>6} {'attacker sockets':>17}")
    for scenario in args.scenario or SCENARIOS:
        for spec in args.relay:
            name, _, path = spec.partition("=")
            base, flood = asyncio.run(round_for(path, scenario, args))
            for label, r in (("idle", base), ("flood", flood)):
                print(f"{name:8} {scenario:14} {label:9} {r['p50']:8.2f} {r['p99']:8.2f} {r['max']:8.2f} {r['pings']:7d} "
                      f"{r['lost']:5d} {r['cpu']:6.2f} {r['attacker_sockets'] if label == 'flood' else '':>17}", flush=True)


if __name__ == "__main__":
    main()
