"""Memory of the history: bytes per room and per event, accounted and resident.

For each R in --rooms: starts a fresh relay (the binary given), warms it up (a few requests and
events in one room), reads `relay_history_bytes`, `relay_history_events` (GET /metrics) and the
process's VmRSS / RssAnon (/proc/PID/status), fills R rooms with --events recoverable events
each through the backend emit API (`POST /api/v1/emit`, pipelined on a few keep-alive
connections; a `message:reaction`-like event of about 150 bytes of JSON, 185 with the relay's
`from`/`ts`, a 212-byte Socket.IO frame), waits for the process to settle, and reads them again.

With --control the same fill is run against a relay with `--history-size 0` too: what RSS
grows by without history (allocator, HTTP buffers) is the noise floor of the RSS figures.

The history TTL is raised (--history-ttl-ms, default 10 minutes) so that no event expires
during the fill; the count limit per room stays the relay's default (200) unless
--history-size is given.

    python3 LoadTests/history/history_memory.py --relay .build-release/release/relay --rooms 100 1000

Everything on 127.0.0.1; each fill is bounded in count (R x events requests) and in time
(--timeout); the relay is started here and stopped by its pid.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import aiohttp

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "Tests", "e2e"))
from helpers import ADMIN_KEY, API_KEY, JWT_SECRET  # noqa: E402

LISTENING = re.compile(r"relay listening on 127\.0\.0\.1:(\d+)")


PAD = 0  # --pad: extra bytes in every event (to separate the per-event overhead from the size)


def reaction(room: int, i: int) -> dict:
    """A chat reaction as a backend would emit it: ~150 bytes of JSON (185 with the relay's `from`/`ts`)."""
    extra = {"pad": "x" * PAD} if PAD else {}
    return {
        "messageId": f"msg_01HZX3K9Q7Y8V2N4M6P{room:06d}{i:04d}",
        "conversationId": f"conversation:{room}",
        "userId": f"user_{(room * 7919 + i) % 100000:08d}",
        "emoji": "thumbs_up",
        "action": "add",
        "count": i % 17 + 1,
        **extra,
    }


def frame_bytes(room: int, i: int) -> int:
    """The Socket.IO frame the relay stores for that event (what its `from`/`ts` add included)."""
    data = dict(reaction(room, i), ts=1732370000123, **{"from": "server"})
    return len(("42" + json.dumps(["message:reaction", data], separators=(",", ":"))).encode())


def proc_status(pid: int) -> dict[str, int]:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile"):
                out[key] = int(value.split()[0]) * 1024
    return out


async def metrics(http: aiohttp.ClientSession, port: int) -> dict[str, float]:
    async with http.get(f"http://127.0.0.1:{port}/metrics") as r:
        text = await r.text()
    out = {}
    for name in ("relay_history_bytes", "relay_history_events", "process_resident_memory_bytes"):
        m = re.search(rf"^{name}(?:\{{[^}}]*\}})? ([0-9.e+]+)$", text, re.M)
        out[name] = float(m.group(1)) if m else float("nan")
    return out


async def snapshot(http: aiohttp.ClientSession, port: int, pid: int) -> dict:
    m = await metrics(http, port)
    return {"history_bytes": m["relay_history_bytes"], "history_events": m["relay_history_events"],
            "metrics_rss": m["process_resident_memory_bytes"], **proc_status(pid)}


async def emit_all(port: int, rooms: range, events: int, connections: int, deadline: float, window: int = 64) -> int:
    """POSTs `events` reactions to each room, round-robin over the rooms, on `connections`
    keep-alive connections with up to `window` pipelined requests in flight on each; every
    answer must be 200. Returns the count sent."""
    jobs = ((r, i) for i in range(events) for r in rooms)  # shared: each job is taken once
    sent = 0

    def request(r: int, i: int) -> bytes:
        body = json.dumps({"event": "message:reaction", "to": {"room": f"conversation:{r}"}, "data": reaction(r, i)},
                          separators=(",", ":")).encode()
        return (f"POST /api/v1/emit HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {API_KEY}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body

    async def read_answer(reader: asyncio.StreamReader) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        status = head.split(b" ", 2)[1]
        m = re.search(rb"(?i)content-length: *(\d+)", head)
        if m:
            await reader.readexactly(int(m.group(1)))
        if status != b"200":
            raise RuntimeError(f"emit answered {status.decode()}")

    async def connection() -> None:
        nonlocal sent
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while True:
                batch = [request(r, i) for r, i in itertools.islice(jobs, window)]
                if not batch:
                    return
                if time.monotonic() > deadline:
                    raise TimeoutError("fill did not finish in time")
                writer.write(b"".join(batch))
                await writer.drain()
                for _ in batch:
                    await asyncio.wait_for(read_answer(reader), max(1.0, deadline - time.monotonic()))
                sent += len(batch)
        finally:
            writer.close()

    await asyncio.gather(*(connection() for _ in range(connections)))
    return sent


def start_relay(relay: str, tmp: str, extra: list[str]) -> tuple[subprocess.Popen, int]:
    log = open(os.path.join(tmp, "relay.log"), "w+")
    proc = subprocess.Popen([relay, "--host", "127.0.0.1", "--port", "0", "--jwt-secret", JWT_SECRET, "--api-key", API_KEY,
                             "--admin-key", ADMIN_KEY, "--db", os.path.join(tmp, "r.sqlite"), "--log-level", "notice", *extra],
                            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        log.seek(0)
        m = LISTENING.search(log.read())
        if m:
            return proc, int(m.group(1))
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    stop(proc)
    log.seek(0)
    raise RuntimeError(f"relay did not start:\n{log.read()[-2000:]}")


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


async def measure(relay: str, rooms: int, events: int, extra: list[str], concurrency: int, settle: float, timeout: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        proc, port = start_relay(relay, tmp, extra)
        try:
            async with aiohttp.ClientSession() as http:
                # Warm-up: the HTTP path, the encoder and one stream (room "conversation:warmup").
                deadline = time.monotonic() + timeout
                await emit_all(port, range(1_000_000, 1_000_001), 20, 1, deadline)
                await asyncio.sleep(settle)
                before = await snapshot(http, port, proc.pid)
                t = time.monotonic()
                sent = await emit_all(port, range(rooms), events, concurrency, deadline)
                fill_s = time.monotonic() - t
                await asyncio.sleep(settle)
                after = await snapshot(http, port, proc.pid)
        finally:
            stop(proc)
    delta = {k: after[k] - before[k] for k in before}
    stored = delta["history_events"]
    return {
        "relay_args": " ".join(extra), "rooms": rooms, "events_per_room": events, "emitted": sent,
        "fill_seconds": round(fill_s, 1), "emits_per_second": round(sent / fill_s),
        "frame_bytes_mean": round(sum(frame_bytes(r, i) for r in range(min(rooms, 50)) for i in range(events)) / (min(rooms, 50) * events), 1),
        "before": before, "after": after,
        "history_events_added": stored,
        "accounted_bytes_per_event": round(delta["history_bytes"] / stored, 1) if stored else None,
        "accounted_bytes_per_room": round(delta["history_bytes"] / rooms),
        "rss_bytes_per_room": round(delta["VmRSS"] / rooms),
        "rss_bytes_per_event": round(delta["VmRSS"] / stored, 1) if stored else None,
        "anon_bytes_per_room": round(delta["RssAnon"] / rooms),
        "anon_bytes_per_event": round(delta["RssAnon"] / stored, 1) if stored else None,
    }


async def expiry_check(relay: str, rooms: int, events: int, ttl_ms: int, timeout: float) -> dict:
    """Fills `rooms` rooms with a short TTL, lets the TTL pass with no traffic, then emits one
    event to one room: is expired history dropped while nothing is appended?"""
    extra = ["--history-ttl-ms", str(ttl_ms), "--recovery-window-ms", str(ttl_ms)]
    with tempfile.TemporaryDirectory() as tmp:
        proc, port = start_relay(relay, tmp, extra)
        try:
            async with aiohttp.ClientSession() as http:
                deadline = time.monotonic() + timeout
                before = await snapshot(http, port, proc.pid)
                await emit_all(port, range(rooms), events, 4, deadline)
                filled = await snapshot(http, port, proc.pid)
                await asyncio.sleep(ttl_ms / 1000 + 2)
                idle = await snapshot(http, port, proc.pid)
                await emit_all(port, range(rooms, rooms + 1), 1, 1, deadline)
                one_more = await snapshot(http, port, proc.pid)
        finally:
            stop(proc)
    return {"expiry_check": True, "relay_args": " ".join(extra), "rooms": rooms, "events_per_room": events, "before": before,
            "filled": filled, f"idle_{ttl_ms / 1000 + 2:g}s": idle, "after_one_more_emit": one_more}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--relay", required=True)
    ap.add_argument("--rooms", type=int, nargs="+", default=[100, 1000])
    ap.add_argument("--events", type=int, default=200, help="events emitted per room (the default history keeps 200)")
    ap.add_argument("--history-size", type=int, default=None, help="--history-size of the relay (default: the relay's, 200)")
    ap.add_argument("--history-ttl-ms", type=int, default=600_000)
    ap.add_argument("--control", action="store_true", help="also run each fill with --history-size 0")
    ap.add_argument("--concurrency", type=int, default=4, help="HTTP connections, 64 pipelined requests each")
    ap.add_argument("--settle", type=float, default=2.0, help="seconds of quiet before each reading")
    ap.add_argument("--timeout", type=float, default=300.0, help="bound of one fill, seconds")
    ap.add_argument("--expiry-check", type=int, metavar="TTL_MS", default=None,
                    help="instead: fill with this TTL, idle past it, read; emit once, read (is idle history dropped?)")
    ap.add_argument("--pad", type=int, default=0, help="extra bytes of padding in every event")
    args = ap.parse_args()
    global PAD
    PAD = args.pad
    if args.expiry_check is not None:
        for rooms in args.rooms:
            print(json.dumps(asyncio.run(asyncio.wait_for(expiry_check(args.relay, rooms, args.events, args.expiry_check, args.timeout),
                                                          args.timeout + 60))), flush=True)
        return
    on = ["--history-ttl-ms", str(args.history_ttl_ms), "--recovery-window-ms", str(min(args.history_ttl_ms, 120_000))]
    if args.history_size is not None:
        on += ["--history-size", str(args.history_size)]
    variants = [on] + ([["--history-size", "0"]] if args.control else [])
    for rooms in args.rooms:
        for extra in variants:
            result = asyncio.run(asyncio.wait_for(measure(args.relay, rooms, args.events, extra, args.concurrency, args.settle, args.timeout),
                                                  args.timeout + 60))
            print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
