"""Helpers of the end-to-end suite: tokens, a Socket.IO client that records its events,
a raw Engine.IO WebSocket client, and the HTTP API.

Waiting is always for an event, bounded by a timeout; nothing sleeps to wait for a condition.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import hashlib
import hmac
import json
import os
import struct
import subprocess
import time
from pathlib import Path
from typing import Any, Callable

import aiohttp
import socketio
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed

REPO_ROOT = Path(__file__).resolve().parents[2]

JWT_SECRET = "e2e-jwt-secret-0123456789abcdef-0123456789"  # at least 32 bytes
API_KEY = "e2e-api-key-0123456789abcdef"  # at least 16 characters
ADMIN_KEY = "e2e-admin-key-0123456789abcdef"

# Bounds failures only: an expected event normally arrives in milliseconds.
TIMEOUT = 10.0
# Upper bound of a whole test.
TEST_TIMEOUT = 90.0

ROOM = "conversation:1"


def relay_binary() -> str:
    return os.environ.get("RELAY_BIN") or str(REPO_ROOT / ".build" / "debug" / "relay")


# --------------------------------------------------------------------------------------------
# Running coroutines in sync pytest tests


def run(coro, timeout: float = TEST_TIMEOUT):
    """Runs a coroutine to completion, bounded in time."""
    return asyncio.run(asyncio.wait_for(coro, timeout))


def async_test(fn: Callable):
    """Turns `async def test_x(fixtures...)` into a sync pytest test bounded by TEST_TIMEOUT."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return run(fn(*args, **kwargs))

    return wrapper


# --------------------------------------------------------------------------------------------
# Tokens


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def make_jwt(claims: dict, *, secret: str = JWT_SECRET, header: dict | None = None,
             alg: str = "HS256", sign_with: str | None = None) -> str:
    """A JWT with `claims`. `header` overrides the header; HS256/HS512 are really signed,
    `alg: none` gets an empty signature. `sign_with` signs with another secret."""
    header = header or {"alg": alg, "typ": "JWT"}
    signing_input = f"{_b64url(json.dumps(header, separators=(',', ':')).encode())}." \
                    f"{_b64url(json.dumps(claims, separators=(',', ':')).encode())}"
    key = (sign_with or secret).encode()
    algorithm = header.get("alg", "")
    if algorithm == "HS256":
        sig = _b64url(hmac.new(key, signing_input.encode(), hashlib.sha256).digest())
    elif algorithm == "HS512":
        sig = _b64url(hmac.new(key, signing_input.encode(), hashlib.sha512).digest())
    else:
        sig = ""
    return f"{signing_input}.{sig}"


def mint_token(sub: str | None, *, rooms: list[str] | None = None, ttl: int | None = 3600,
               **extra) -> str:
    """An HS256 token for `sub` (default rooms: `conversation:*`). `ttl=None` leaves out exp."""
    now = int(time.time())
    claims: dict[str, Any] = {"iat": now}
    if sub is not None:
        claims["sub"] = sub
    if ttl is not None:
        claims["exp"] = now + ttl
    claims["rooms"] = ["conversation:*"] if rooms is None else rooms
    claims.update(extra)
    return make_jwt(claims)


def cli_token(sub: str, rooms: str = "conversation:*", ttl: int = 3600) -> str:
    """A token minted by `relay token`."""
    out = subprocess.run(
        [relay_binary(), "token", "--secret", JWT_SECRET, "--sub", sub, "--rooms", rooms, "--ttl", str(ttl)],
        check=True, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    token = out.stdout.strip().splitlines()[-1].strip()
    assert token.count(".") == 2, f"relay token printed no JWT: {out.stdout!r} {out.stderr!r}"
    return token


# --------------------------------------------------------------------------------------------
# Socket.IO client


class Client:
    """A python-socketio client that records every event it receives, in order.

    `history` holds every `(event, data)`; `expect` consumes the queue up to a matching event.
    """

    def __init__(self, name: str):
        self.name = name
        self.sio = socketio.AsyncClient(reconnection=False, handle_sigint=False)
        self.queue: asyncio.Queue = asyncio.Queue()
        self.history: list[tuple[str, Any]] = []
        self.sio.on("*", self._on_any)

    # A plain (sync) handler: python-socketio runs each incoming packet in its own task, in
    # arrival order, so the history keeps the order of the wire.
    def _on_any(self, event, *args):
        data = args[0] if args else None
        self.history.append((event, data))
        self.queue.put_nowait((event, data))

    async def connect(self, relay, token: str, **kwargs) -> "Client":
        await self.sio.connect(relay.url, transports=["websocket"], auth={"token": token},
                               wait_timeout=TIMEOUT, **kwargs)
        return self

    @property
    def connected(self) -> bool:
        return self.sio.connected

    async def call(self, event: str, data: Any = None) -> Any:
        return await self.sio.call(event, data, timeout=TIMEOUT)

    async def ok(self, event: str, data: Any = None) -> dict:
        """Calls and asserts the ack is `{"ok": true, ...}`."""
        reply = await self.call(event, data)
        assert isinstance(reply, dict) and reply.get("ok") is True, f"{self.name}: {event} {data} -> {reply}"
        return reply

    async def fails(self, event: str, data: Any, code: str) -> dict:
        """Calls and asserts the ack is `{"ok": false, "error": {"code": code, "message": ...}}`."""
        reply = await self.call(event, data)
        assert isinstance(reply, dict) and reply.get("ok") is False, f"{self.name}: {event} {data} -> {reply}"
        error = reply.get("error") or {}
        assert error.get("code") == code, f"{self.name}: {event} {data}: expected {code}, got {reply}"
        assert isinstance(error.get("message"), str) and error["message"], reply
        return reply

    async def emit(self, event: str, data: Any = None) -> None:
        await self.sio.emit(event, data)

    async def join(self, room: str = ROOM) -> dict:
        reply = await self.ok("room:join", {"room": room})
        assert reply["room"] == room
        return reply

    async def next_event(self, timeout: float = TIMEOUT) -> tuple[str, Any]:
        try:
            return await asyncio.wait_for(self.queue.get(), timeout)
        except asyncio.TimeoutError:
            raise AssertionError(f"{self.name}: no event within {timeout} s; history: {self.history}") from None

    async def expect(self, event: str, where: Callable[[Any], bool] | None = None,
                     timeout: float = TIMEOUT, **fields) -> Any:
        """Waits for the next `event` whose data has `fields` (and satisfies `where`); other
        events before it are consumed (they stay in `history`)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise AssertionError(
                    f"{self.name}: no {event} {fields or ''} within {timeout} s; history: {self.history}")
            try:
                name, data = await asyncio.wait_for(self.queue.get(), remaining)
            except asyncio.TimeoutError:
                continue
            if name != event:
                continue
            if fields and not (isinstance(data, dict) and all(data.get(k) == v for k, v in fields.items())):
                continue
            if where is not None and not where(data):
                continue
            return data

    def events(self, *names: str) -> list[tuple[str, Any]]:
        """The history restricted to `names`."""
        return [(n, d) for n, d in self.history if n in names]

    async def disconnect(self) -> None:
        if self.sio.connected:
            await self.sio.disconnect()


class Clients:
    """Creates clients and disconnects them all at the end (`async with Clients() as c`)."""

    def __init__(self):
        self.all: list[Client] = []

    def new(self, name: str) -> Client:
        c = Client(name)
        self.all.append(c)
        return c

    async def connect(self, relay, user: str, token: str | None = None, name: str | None = None) -> Client:
        client = self.new(name or user)
        await client.connect(relay, token or mint_token(user))
        return client

    async def __aenter__(self) -> "Clients":
        return self

    async def __aexit__(self, *exc) -> None:
        for c in self.all:
            try:
                await asyncio.wait_for(c.disconnect(), TIMEOUT)
            except Exception:  # noqa: BLE001 - cleanup of a socket the test may have broken
                pass


# --------------------------------------------------------------------------------------------
# Raw Engine.IO / Socket.IO over WebSocket


class AckingSocket:
    """A minimal Socket.IO-over-WebSocket client that pipelines events with ack ids (many in
    flight at once, which python-socketio's `call` does not do); answers pings."""

    def __init__(self, ws):
        self.ws = ws
        self.next_id = 0
        self.waiters: dict[int, asyncio.Future] = {}
        self.reader = asyncio.create_task(self._read())

    @classmethod
    async def open(cls, ws_url: str, token: str, **connect_kwargs) -> "AckingSocket":
        ws = await ws_connect(ws_url, max_size=None, **connect_kwargs)
        assert (await ws.recv()).startswith("0{")
        await ws.send("40" + json.dumps({"token": token}))
        reply = await ws.recv()
        assert reply.startswith("40{"), reply
        return cls(ws)

    async def _read(self):
        try:
            async for text in self.ws:
                if text == "2":
                    await self.ws.send("3")
                elif text.startswith("43"):
                    i = 2
                    while text[i].isdigit():
                        i += 1
                    fut = self.waiters.pop(int(text[2:i]), None)
                    if fut and not fut.done():
                        fut.set_result(json.loads(text[i:])[0])
        except ConnectionClosed:
            pass
        finally:
            for fut in self.waiters.values():
                if not fut.done():
                    fut.set_exception(ConnectionError("relay went away"))

    async def call(self, event: str, data: dict, timeout: float = 30) -> dict:
        self.next_id += 1
        fut = asyncio.get_running_loop().create_future()
        self.waiters[self.next_id] = fut
        await self.ws.send(f"42{self.next_id}" + json.dumps([event, data]))
        return await asyncio.wait_for(fut, timeout)

    async def close(self):
        await self.ws.close()
        self.reader.cancel()



class RawSocket:
    """A raw WebSocket to the relay, speaking Engine.IO by hand."""

    def __init__(self, ws):
        self.ws = ws
        self.open_packet: dict | None = None

    @classmethod
    async def open(cls, relay, *, query: str = "", headers: dict | None = None,
                   max_size: int | None = None) -> "RawSocket":
        url = relay.ws_url + query
        ws = await ws_connect(url, compression=None, proxy=None, open_timeout=TIMEOUT, ping_interval=None,
                              close_timeout=TIMEOUT, max_size=max_size, additional_headers=headers)
        sock = cls(ws)
        first = await sock.recv()
        assert first.startswith("0"), f"first packet is not Engine.IO open: {first!r}"
        sock.open_packet = json.loads(first[1:])
        return sock

    async def recv(self, timeout: float = TIMEOUT) -> str:
        try:
            msg = await asyncio.wait_for(self.ws.recv(), timeout)
        except asyncio.TimeoutError:
            raise AssertionError(f"no message within {timeout} s") from None
        assert isinstance(msg, str), f"expected a text frame, got {msg!r}"
        return msg

    async def recv_packet(self, timeout: float = TIMEOUT, skip_pings: bool = True, answer_pings: bool = False) -> str:
        """The next Engine.IO packet that is not a ping (pings are skipped, optionally answered)."""
        while True:
            msg = await self.recv(timeout)
            if msg == "2" and skip_pings:
                if answer_pings:
                    await self.send("3")
                continue
            return msg

    async def send(self, text: str | bytes) -> None:
        await self.ws.send(text)

    async def connect(self, token: str | None, namespace: str = "") -> str:
        """Sends CONNECT (`40`, with `{"token"}` when given) and returns the answer packet."""
        body = json.dumps({"token": token}) if token is not None else ""
        prefix = f"{namespace}," if namespace else ""
        await self.send(f"40{prefix}{body}")
        return await self.recv_packet()

    async def connect_ok(self, token: str) -> dict:
        reply = await self.connect(token)
        assert reply.startswith("40{"), f"CONNECT refused: {reply!r}"
        return json.loads(reply[2:])

    async def wait_closed(self, timeout: float = TIMEOUT, answer_pings: bool = False) -> tuple[int | None, list[str]]:
        """Reads until the server closes; returns (close code received, messages read meanwhile)."""
        messages: list[str] = []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            while True:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise AssertionError(f"socket still open after {timeout} s; read {messages}")
                try:
                    msg = await asyncio.wait_for(self.ws.recv(), remaining)
                except asyncio.TimeoutError:
                    continue
                messages.append(msg)
                if answer_pings and msg == "2":
                    await self.send("3")
        except ConnectionClosed as exc:
            return (exc.rcvd.code if exc.rcvd is not None else None), messages

    async def still_open(self) -> bool:
        """Whether the Engine.IO session still answers: a client ping (`2open`, Engine.IO v3
        style, which Relay echoes) gets `3open`. What came before the echo is skipped."""
        try:
            await self.send("2open")
            while (await self.recv()) != "3open":
                pass
            return True
        except ConnectionClosed:
            return False

    async def close(self) -> None:
        try:
            await asyncio.wait_for(self.ws.close(), TIMEOUT)
        except Exception:  # noqa: BLE001
            pass


def parse_connect_error(packet: str) -> tuple[str, dict]:
    """`44[/nsp,]{...}` -> (namespace, payload)."""
    assert packet.startswith("44"), f"not a CONNECT_ERROR: {packet!r}"
    rest = packet[2:]
    namespace = "/"
    if rest.startswith("/"):
        namespace, rest = rest.split(",", 1)
    return namespace, json.loads(rest)


async def refused_code(relay, token: str | None, **open_kwargs) -> tuple[str, str | int | None]:
    """Connects with `token` on a raw socket; returns the CONNECT_ERROR code and `"open"` when
    the Engine.IO session stayed open for another CONNECT (as it does after a refusal, below
    `connect-refusals`), else the close code."""
    sock = await RawSocket.open(relay, **open_kwargs)
    try:
        reply = await sock.connect(token)
        namespace, payload = parse_connect_error(reply)
        assert namespace == "/"
        assert isinstance(payload.get("message"), str) and payload["message"], payload
        if await sock.still_open():
            return payload["data"]["code"], "open"
        code, _ = await sock.wait_closed()
        return payload["data"]["code"], code
    finally:
        await sock.close()


# --------------------------------------------------------------------------------------------
# HTTP


async def http(relay, method: str, path: str, *, body: Any = None, raw: bytes | None = None,
               key: str | None = API_KEY, headers: dict | None = None) -> tuple[int, Any]:
    """One HTTP request to the relay; returns (status, JSON body or text)."""
    hdrs = dict(headers or {})
    if key is not None:
        hdrs["Authorization"] = f"Bearer {key}"
    data = raw
    if body is not None:
        data = json.dumps(body).encode()
        hdrs.setdefault("Content-Type", "application/json")
    timeout = aiohttp.ClientTimeout(total=TIMEOUT)
    async with aiohttp.ClientSession(timeout=timeout, trust_env=False) as session:
        async with session.request(method, relay.url + path, data=data, headers=hdrs) as resp:
            text = await resp.text()
            try:
                return resp.status, json.loads(text)
            except ValueError:
                return resp.status, text


async def emit_api(relay, event: str, to: dict, data: Any = None, key: str | None = API_KEY) -> tuple[int, Any]:
    body: dict[str, Any] = {"event": event, "to": to}
    if data is not None:
        body["data"] = data
    return await http(relay, "POST", "/api/v1/emit", body=body, key=key)


# --------------------------------------------------------------------------------------------
# Hostile clients' shared pieces (test_hostile.py, test_hostile_matrix.py)


def rss(relay) -> int:
    """The relay process's resident memory, bytes."""
    with open(f"/proc/{relay.proc.pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


async def alive(relay) -> None:
    """The relay process still runs and answers `/healthz`."""
    assert relay.proc.poll() is None, f"relay exited with {relay.proc.returncode}:\n{relay.log()[-3000:]}"
    status, body = await http(relay, "GET", "/healthz", key=None)
    assert status == 200 and body == {"status": "ok"}, (status, body)


def frame(opcode: int, payload: bytes | str, fin: bool = True, declared: int | None = None) -> bytes:
    """A masked client WebSocket frame (mask key 0, so the payload goes as is). `declared`
    lies about the length."""
    if isinstance(payload, str):
        payload = payload.encode()
    length = len(payload) if declared is None else declared
    first = (0x80 if fin else 0) | opcode
    if length < 126:
        head = struct.pack("!BB", first, 0x80 | length)
    elif length < 1 << 16:
        head = struct.pack("!BBH", first, 0x80 | 126, length)
    else:
        head = struct.pack("!BBQ", first, 0x80 | 127, length)
    return head + b"\0\0\0\0" + payload

