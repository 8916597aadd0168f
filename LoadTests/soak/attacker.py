#!/usr/bin/env python3
"""An attacker process for the soak: the floods and oversized inputs of the hostile matrix,
one after another against the given relay nodes, until a deadline.

Each attack is bounded in count and time and ends by dropping its sockets. Every outcome is one
line of JSON in --out: the attack, the node, and `refused` (the relay answered with the
documented close code or HTTP status), `bounded` (nothing to refuse: abandoned handshakes,
dropped sessions kept for recovery) or `unexpected` (anything else, with what was seen).

    attacker.py --nodes 127.0.0.1:PORT,127.0.0.1:PORT --secret SECRET --seconds 1800 --out attacks.jsonl

Everything goes to 127.0.0.1; the process stops by itself at the deadline.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import hmac
import json
import os
import resource
import struct
import time

import aiohttp

ROOM = "conversation:soak-attack"
TIMEOUT = 10.0
UPGRADE = (
    "GET /socket.io/?EIO=4&transport=websocket HTTP/1.1\r\n"
    "Host: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
)


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


class Tokens:
    def __init__(self, secret: str):
        self.secret = secret

    def mint(self, sub: str, rooms: list[str] | None = None, ttl: int = 3600) -> str:
        t = int(time.time())
        header = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
        claims = b64url(json.dumps({"sub": sub, "iat": t, "exp": t + ttl, "rooms": rooms or ["conversation:*"]},
                                   separators=(",", ":")).encode())
        sig = hmac.new(self.secret.encode(), f"{header}.{claims}".encode(), hashlib.sha256).digest()
        return f"{header}.{claims}.{b64url(sig)}"


def frame(opcode: int, payload: bytes) -> bytes:
    """A masked client frame (mask key 0: the payload goes as is)."""
    n = len(payload)
    first = 0x80 | opcode
    if n < 126:
        head = struct.pack("!BB", first, 0x80 | n)
    elif n < 1 << 16:
        head = struct.pack("!BBH", first, 0x80 | 126, n)
    else:
        head = struct.pack("!BBQ", first, 0x80 | 127, n)
    return head + b"\0\0\0\0" + payload


class RawWS:
    """A WebSocket written and read by hand: it can send without reading."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, port: int) -> "RawWS":
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), TIMEOUT)
        writer.write(UPGRADE.encode())
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), TIMEOUT)
        if not head.startswith(b"HTTP/1.1 101"):
            writer.transport.abort()
            raise ConnectionError(head[:100])
        return cls(reader, writer)

    async def read_frame(self) -> tuple[int, bytes]:
        b0, b1 = await asyncio.wait_for(self.reader.readexactly(2), TIMEOUT)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", await self.reader.readexactly(2))[0]
        elif n == 127:
            n = struct.unpack("!Q", await self.reader.readexactly(8))[0]
        return b0 & 0x0F, await asyncio.wait_for(self.reader.readexactly(n), TIMEOUT)

    async def texts_until(self, predicate, limit: int = 5000) -> tuple[list[str], int | None]:
        """Reads frames until `predicate(text)` or a close; returns the texts and the close code."""
        texts: list[str] = []
        for _ in range(limit):
            try:
                op, data = await self.read_frame()
            except (asyncio.IncompleteReadError, ConnectionError, asyncio.TimeoutError):
                return texts, None
            if op == 0x8:
                return texts, struct.unpack("!H", data[:2])[0] if len(data) >= 2 else None
            if op == 0x1:
                text = data.decode("utf-8", "replace")
                texts.append(text)
                if predicate(text):
                    return texts, None
        return texts, None

    async def send(self, opcode: int, payload: bytes) -> None:
        self.writer.write(frame(opcode, payload))
        await self.writer.drain()

    async def connect(self, token: str, extra: dict | None = None) -> str:
        await self.texts_until(lambda t: t.startswith("0{"))
        await self.send(0x1, ("40" + json.dumps({"token": token, **(extra or {})})).encode())
        texts, _ = await self.texts_until(lambda t: t.startswith("40") or t.startswith("44"))
        return texts[-1] if texts else ""

    def abort(self) -> None:
        self.writer.transport.abort()


def result(attack: str, ok: bool, detail, bounded: bool = False) -> dict:
    return {"attack": attack, "outcome": ("bounded" if bounded else "refused") if ok else "unexpected", "detail": detail}


# ------------------------------------------------------------------------------------------
# The attacks (each: port, tokens, http session -> result)


async def ws_packet_flood(port, tokens, http, loggedin: bool):
    ws = await RawWS.open(port)
    try:
        if loggedin:
            await ws.connect(tokens.mint("attacker"))
        for _ in range(8):
            ws.writer.write(frame(0x1, b"2") * 100)
        await ws.writer.drain()
        _, code = await ws.texts_until(lambda t: False)
        return result(f"ws_packet_flood_{'after' if loggedin else 'before'}_connect", code == 1008, code)
    finally:
        ws.abort()


async def ws_ping_frame_flood(port, tokens, http):
    ws = await RawWS.open(port)
    try:
        ws.writer.write(frame(0x9, b"ping") * 800)
        await ws.writer.drain()
        _, code = await ws.texts_until(lambda t: False)
        return result("ws_ping_frame_flood", code == 1008, code)
    finally:
        ws.abort()


async def ws_binary_before_connect(port, tokens, http):
    ws = await RawWS.open(port)
    try:
        await ws.texts_until(lambda t: t.startswith("0{"))
        header = '451-["chat:x",{"room":"%s","f":{"_placeholder":true,"num":0}}]' % ROOM
        await ws.send(0x1, header.encode())
        texts, code = await ws.texts_until(lambda t: False)
        ok = code == 4003 and any(t.startswith("44") and "not_connected" in t for t in texts)
        return result("ws_binary_before_connect", ok, {"close": code, "texts": [t[:80] for t in texts]})
    finally:
        ws.abort()


async def ws_oversized_events(port, tokens, http):
    ws = await RawWS.open(port)
    try:
        reply = await ws.connect(tokens.mint("attacker-big"))
        if not reply.startswith("40"):
            return result("ws_oversized_events", False, reply[:100])
        await ws.send(0x1, ('451-10["file:big",{"room":"%s","f":{"_placeholder":true,"num":0}}]' % ROOM).encode())
        await ws.send(0x2, b"\x01" * 800_000)
        texts, code = await ws.texts_until(lambda t: t.startswith("4310"))
        binary_refused = bool(texts) and texts[-1].startswith("4310") and "payload_too_large" in texts[-1]
        await ws.send(0x1, ('4211["chat:big",{"room":"%s","x":"%s"}]' % (ROOM, "a" * 200_000)).encode())
        texts, code2 = await ws.texts_until(lambda t: t.startswith("4311"))
        text_refused = bool(texts) and "payload_too_large" in texts[-1]
        return result("ws_oversized_events", binary_refused and text_refused and code is None and code2 is None,
                      {"binary": binary_refused, "text": text_refused})
    finally:
        ws.abort()


async def polling_open(http, base) -> str:
    async with http.get(base) as r:
        body = await r.text()
    return json.loads(body[1:])["sid"]


async def polling_flood(port, tokens, http, loggedin: bool):
    base = f"http://127.0.0.1:{port}/socket.io/?EIO=4&transport=polling"
    sid = await polling_open(http, base)
    url = f"{base}&sid={sid}"
    if loggedin:
        async with http.post(url, data=("40" + json.dumps({"token": tokens.mint("attacker-poll")})).encode()) as r:
            await r.read()
        async with http.get(url) as r:
            await r.read()
    body = b"2" + b"\x1e2" * 8191
    statuses = []
    for _ in range(4):
        async with http.post(url, data=body) as r:
            statuses.append(r.status)
            await r.read()
    async with http.get(url) as r:
        text = await r.text()
    closed = text.endswith("1") or "Session ID unknown" in text or 400 in statuses
    return result(f"polling_flood_{'after' if loggedin else 'before'}_connect", closed, {"statuses": statuses, "tail": text[-40:]})


async def polling_concurrent_post(port, tokens, http):
    base = f"http://127.0.0.1:{port}/socket.io/?EIO=4&transport=polling"
    sid = await polling_open(http, base)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write((f"POST /socket.io/?EIO=4&transport=polling&sid={sid} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      f"Content-Length: 900000\r\n\r\n").encode() + b"2" * 1000)
        await writer.drain()
        await asyncio.sleep(0.05)
        async with http.post(f"{base}&sid={sid}", data=b"2") as r:
            status = r.status
            await r.read()
        return result("polling_concurrent_post", status == 400, status)
    finally:
        writer.transport.abort()


async def api_wrong_key(port, tokens, http):
    body = b"{" + b" " * (256 * 1024 - 2) + b"}"

    async def one():
        async with http.post(f"http://127.0.0.1:{port}/api/v1/emit", data=body,
                             headers={"Authorization": "Bearer not-the-key-not-the-key"}) as r:
            await r.read()
            return r.status

    statuses = await asyncio.gather(*[one() for _ in range(20)], return_exceptions=True)
    ok = all(s == 401 for s in statuses)
    return result("api_wrong_key_bodies", ok, sorted({str(s) for s in statuses}))


async def abandoned_handshakes(port, tokens, http):
    base = f"http://127.0.0.1:{port}/socket.io/?EIO=4&transport=polling"
    opened = 0
    for _ in range(50):
        try:
            await polling_open(http, base)
            ws = await RawWS.open(port)
            ws.abort()
            opened += 2
        except (aiohttp.ClientError, ConnectionError, OSError, asyncio.TimeoutError):
            pass
    return result("abandoned_handshakes", opened > 0, opened, bounded=True)


async def recovery_drops(port, tokens, http):
    """One user connects with `recover: true` and drops the TCP connection, over and over: the
    sessions kept for them are bounded per user."""
    token = tokens.mint("attacker-recover")
    dropped = 0
    for _ in range(50):
        try:
            ws = await RawWS.open(port)
            reply = await ws.connect(token, {"recover": True})
            ws.abort()
            dropped += reply.startswith("40")
        except (ConnectionError, OSError, asyncio.TimeoutError, asyncio.IncompleteReadError):
            pass
    return result("recovery_drops", dropped > 0, dropped, bounded=True)


ATTACKS = [
    lambda p, t, h: ws_packet_flood(p, t, h, False),
    lambda p, t, h: ws_packet_flood(p, t, h, True),
    ws_ping_frame_flood,
    ws_binary_before_connect,
    ws_oversized_events,
    lambda p, t, h: polling_flood(p, t, h, False),
    lambda p, t, h: polling_flood(p, t, h, True),
    polling_concurrent_post,
    api_wrong_key,
    abandoned_handshakes,
    recovery_drops,
]


async def main(args) -> int:
    ports = [int(x.rsplit(":", 1)[1]) for x in args.nodes.split(",")]
    tokens = Tokens(args.secret)
    deadline = time.monotonic() + args.seconds
    i = 0
    timeout = aiohttp.ClientTimeout(total=TIMEOUT)
    with open(args.out, "a") as out:
        async with aiohttp.ClientSession(timeout=timeout, trust_env=False) as http:
            while time.monotonic() < deadline and (args.rounds == 0 or i < args.rounds * len(ATTACKS)):
                # Paused between attacks while the soak says so (`--pause-file`): rounds with and
                # without the attacker then alternate within one run.
                while args.pause_file and os.path.exists(args.pause_file) and time.monotonic() < deadline:
                    await asyncio.sleep(0.2)
                if time.monotonic() >= deadline:
                    break
                port = ports[i % len(ports)]
                attack = ATTACKS[i % len(ATTACKS)]
                started = time.monotonic()
                try:
                    r = await asyncio.wait_for(attack(port, tokens, http), 30)
                except Exception as exc:  # noqa: BLE001 - a node may be down (the soak kills them)
                    r = {"attack": getattr(attack, "__name__", "attack"), "outcome": "error", "detail": repr(exc)[:200]}
                r.update({"port": port, "t": round(time.time(), 3), "seconds": round(time.monotonic() - started, 3)})
                out.write(json.dumps(r) + "\n")
                out.flush()
                i += 1
                await asyncio.sleep(args.pause)
    # The soak reports the attacker's own CPU next to the relays': on one machine it competes with them.
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"attacks": i, "cpu_user_s": round(ru.ru_utime, 2), "cpu_sys_s": round(ru.ru_stime, 2)}), flush=True)
    return 0


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", required=True, help="host:port,host:port (127.0.0.1 only)")
    p.add_argument("--secret", required=True, help="the relays' JWT secret")
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--rounds", type=int, default=0, help="stop after this many passes over the attacks (0: the deadline)")
    p.add_argument("--pause", type=float, default=0.5, help="seconds between two attacks")
    p.add_argument("--out", required=True, help="JSON lines, one per attack")
    p.add_argument("--pause-file", default="", help="no new attack starts while this file exists")
    a = p.parse_args()
    for n in a.nodes.split(","):
        assert n.startswith("127."), "loopback only"
    raise SystemExit(asyncio.run(main(a)))
