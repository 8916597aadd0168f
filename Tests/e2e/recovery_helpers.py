"""What the recovery tests (issue #13, PROTOCOL §12) share: offsets, a Socket.IO socket spoken
by hand that sends any CONNECT auth and keeps every event's arguments (offsets included), a
python-socketio client that records every argument, and metric look-ups.

A raw socket "drops" by aborting its TCP connection (no `41`, no Engine.IO `1`, no close
frame): what a phone losing its network looks like to the relay.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any, Callable

import socketio
from prometheus_client.parser import text_string_to_metric_families

from helpers import TIMEOUT, RawSocket, http, parse_connect_error

# `"<ms>-<seq>:<tag>"`, PROTOCOL §12 "History and offsets".
OFFSET = re.compile(r"^(\d+)-(\d+):([0-9a-f]{8})$")
# `pid`: "22 base64url characters from 16 random bytes" (§12). Checked exactly by
# test_pid_format alone; the other tests accept any base64url id of at least 16 characters.
PID_SPEC = re.compile(r"^[A-Za-z0-9_-]{21}[AQgw]$")  # 128 bits: the last character holds 2 bits
PID = re.compile(r"^[A-Za-z0-9_-]{16,}$")


def fnv1a32(text: str) -> str:
    h = 0x811C9DC5
    for byte in text.encode("utf-8"):
        h ^= byte
        h = (h * 0x01000193) & 0xFFFFFFFF
    return f"{h:08x}"


def room_tag(room: str) -> str:
    """The tag of a room's stream: FNV-1a of `r:<room>`."""
    return fnv1a32(f"r:{room}")


def user_tag(user: str) -> str:
    return fnv1a32(f"u:{user}")


def parse_offset(offset: Any) -> tuple[int, int, str]:
    """(ms, seq, tag) of a wire offset; fails on anything else."""
    assert isinstance(offset, str), f"an offset is a string: {offset!r}"
    m = OFFSET.match(offset)
    assert m, f"offset {offset!r} is not `<ms>-<seq>:<tag>`"
    return int(m.group(1)), int(m.group(2)), m.group(3)


def assert_increasing(offsets: list[str], tag: str | None = None) -> None:
    """The offsets are of one stream (`tag` when given) and strictly increasing."""
    parsed = [parse_offset(o) for o in offsets]
    tags = {t for _, _, t in parsed}
    assert len(tags) <= 1, f"offsets of several streams: {offsets}"
    if tag is not None and parsed:
        assert tags == {tag}, f"offsets of stream {tags}, expected {tag}: {offsets}"
    keys = [(ms, seq) for ms, seq, _ in parsed]
    assert all(a < b for a, b in zip(keys, keys[1:])), f"offsets not strictly increasing: {offsets}"


# --------------------------------------------------------------------------------------------
# Metrics


async def metric(relay, name: str, **labels: str) -> float:
    """The value of one sample of /metrics (0 when the relay does not show it yet)."""
    status, text = await http(relay, "GET", "/metrics", key=None)
    assert status == 200, text
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


async def recoveries(relay) -> dict[str, float]:
    results = ("recovered", "unknown_session", "user_mismatch", "history_gone", "unavailable")
    return {r: await metric(relay, "relay_recoveries_total", result=r) for r in results}


def grew(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """The labels whose counter moved, and by how much."""
    return {k: after[k] - before[k] for k in after if after[k] != before[k]}


# --------------------------------------------------------------------------------------------
# A Socket.IO socket spoken by hand


class RawSession:
    """One Engine.IO WebSocket to a relay, with a reader task: pings are answered, the CONNECT
    answer, acks and events are sorted out. `events` keeps every `42` as (name, args) with
    *all* its arguments; `packets` keeps everything in arrival order."""

    def __init__(self, sock: RawSocket, name: str):
        self.sock = sock
        self.name = name
        self.packets: list[str] = []
        self.events: list[tuple[str, list]] = []
        self.connect_answer: asyncio.Future = asyncio.get_running_loop().create_future()
        self.acks: dict[int, asyncio.Future] = {}
        self.next_id = 1
        self.closed: asyncio.Future = asyncio.get_running_loop().create_future()
        self.changed = asyncio.Event()
        self.answer_pings = True  # False: a dead peer that no longer answers
        self.reading = asyncio.Event()  # cleared: a peer that stops reading (TCP backpressure)
        self.reading.set()
        self.reader = asyncio.create_task(self._read(), name=f"raw-{name}")

    @classmethod
    async def open(cls, relay, name: str = "raw") -> "RawSession":
        return cls(await RawSocket.open(relay), name)

    async def _read(self) -> None:
        try:
            while True:
                await self.reading.wait()
                msg = await self.sock.ws.recv()
                if not isinstance(msg, str):
                    self.packets.append(repr(msg))
                    continue
                if msg == "2":
                    if self.answer_pings:
                        await self.sock.send("3")
                    continue
                self.packets.append(msg)
                if msg.startswith("40") or msg.startswith("44"):
                    if not self.connect_answer.done():
                        self.connect_answer.set_result(msg)
                elif msg.startswith("42"):
                    data = json.loads(msg[2:])
                    self.events.append((data[0], data[1:]))
                elif msg.startswith("43"):
                    m = re.match(r"^43(\d+)(\[.*)$", msg, re.S)
                    if m:
                        fut = self.acks.pop(int(m.group(1)), None)
                        if fut is not None and not fut.done():
                            fut.set_result(json.loads(m.group(2)))
                self.changed.set()
        except Exception as exc:  # noqa: BLE001 - the socket ended (closed by either side)
            if not self.closed.done():
                self.closed.set_result(exc)
            for fut in list(self.acks.values()) + [self.connect_answer]:
                if not fut.done():
                    fut.set_exception(AssertionError(f"{self.name}: socket closed ({exc!r}); read {self.packets[-20:]}"))
            self.changed.set()

    async def connect(self, auth: dict) -> str:
        """Sends CONNECT with `auth`; the answer packet (`40…` or `44…`)."""
        await self.sock.send("40" + json.dumps(auth))
        try:
            return await asyncio.wait_for(asyncio.shield(self.connect_answer), TIMEOUT)
        except asyncio.TimeoutError:
            raise AssertionError(f"{self.name}: no CONNECT answer within {TIMEOUT} s; read {self.packets}") from None

    async def connect_ok(self, auth: dict) -> dict:
        answer = await self.connect(auth)
        assert answer.startswith("40{"), f"{self.name}: CONNECT refused: {answer!r}"
        return json.loads(answer[2:])

    async def connect_error(self, auth: dict) -> str:
        """Sends CONNECT and expects a refusal; its code."""
        answer = await self.connect(auth)
        _, payload = parse_connect_error(answer)
        return payload["data"]["code"]

    async def call(self, event: str, data: Any) -> Any:
        """An event with an ack id; the ack's first argument."""
        ack_id = self.next_id
        self.next_id += 1
        fut = asyncio.get_running_loop().create_future()
        self.acks[ack_id] = fut
        await self.sock.send(f"42{ack_id}" + json.dumps([event, data]))
        try:
            reply = await asyncio.wait_for(fut, TIMEOUT)
        except asyncio.TimeoutError:
            raise AssertionError(f"{self.name}: no ack for {event} within {TIMEOUT} s; read {self.packets[-20:]}") from None
        return reply[0] if reply else None

    async def ok(self, event: str, data: Any) -> dict:
        reply = await self.call(event, data)
        assert isinstance(reply, dict) and reply.get("ok") is True, f"{self.name}: {event} {data} -> {reply}"
        return reply

    async def fails(self, event: str, data: Any, code: str) -> dict:
        reply = await self.call(event, data)
        assert isinstance(reply, dict) and reply.get("ok") is False, f"{self.name}: {event} {data} -> {reply}"
        assert (reply.get("error") or {}).get("code") == code, f"{self.name}: {event} {data}: expected {code}, got {reply}"
        return reply

    async def barrier(self) -> int:
        """A round trip (an acked `receipt:sync`); returns how many events had arrived before its
        ack: whatever the relay sent before answering it has been read."""
        await self.ok("receipt:sync", {"limit": 1})
        return len(self.events)

    def named(self, *names: str) -> list[tuple[str, list]]:
        return [(n, a) for n, a in self.events if n in names]

    async def wait_for(self, condition: Callable[[], bool], what: str, timeout: float = TIMEOUT) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not condition():
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise AssertionError(f"{self.name}: {what} did not happen within {timeout} s; events {self.events[-30:]}")
            self.changed.clear()
            if condition():
                break
            try:
                await asyncio.wait_for(self.changed.wait(), remaining)
            except asyncio.TimeoutError:
                pass

    async def drop(self) -> None:
        """Loses the connection: the TCP connection is aborted, nothing is said."""
        self.sock.ws.transport.abort()
        await self.close()

    async def send_disconnect(self) -> None:
        """The client's own disconnect: `41`, then the socket closes."""
        await self.sock.send("41")
        await self.close()

    async def close(self) -> None:
        await self.sock.close()
        if not self.reader.done():
            self.reader.cancel()
        await asyncio.wait([self.reader], timeout=TIMEOUT)


class RawSessions:
    """Closes every raw session at the end (`async with RawSessions() as raw`)."""

    def __init__(self):
        self.all: list[RawSession] = []

    async def open(self, relay, name: str = "raw") -> RawSession:
        s = await RawSession.open(relay, name)
        self.all.append(s)
        return s

    async def __aenter__(self) -> "RawSessions":
        return self

    async def __aexit__(self, *exc) -> None:
        for s in self.all:
            try:
                await asyncio.wait_for(s.close(), TIMEOUT)
            except Exception:  # noqa: BLE001 - cleanup
                pass


# --------------------------------------------------------------------------------------------
# python-socketio, recording every argument


class ArgsClient:
    """python-socketio's AsyncClient with its default options (polling, then the upgrade;
    reconnection on), CONNECT auth as given. Every event is recorded with all its arguments."""

    def __init__(self, name: str):
        self.name = name
        self.sio = socketio.AsyncClient(handle_sigint=False)
        self.events: list[tuple[str, tuple]] = []
        self.changed = asyncio.Event()
        self.sio.on("*", self._on_any)

    # A plain (sync) handler keeps the order of the wire (see helpers.Client).
    def _on_any(self, event, *args):
        self.events.append((event, args))
        self.changed.set()

    async def connect(self, relay, auth: dict) -> "ArgsClient":
        await self.sio.connect(relay.url, auth=auth, wait_timeout=TIMEOUT)
        return self

    async def call(self, event: str, data: Any = None) -> Any:
        return await self.sio.call(event, data, timeout=TIMEOUT)

    async def ok(self, event: str, data: Any = None) -> dict:
        reply = await self.call(event, data)
        assert isinstance(reply, dict) and reply.get("ok") is True, f"{self.name}: {event} {data} -> {reply}"
        return reply

    async def fails(self, event: str, data: Any, code: str) -> dict:
        reply = await self.call(event, data)
        assert isinstance(reply, dict) and reply.get("ok") is False, f"{self.name}: {event} {data} -> {reply}"
        assert (reply.get("error") or {}).get("code") == code, f"{self.name}: {event} {data}: expected {code}, got {reply}"
        return reply

    def named(self, *names: str) -> list[tuple[str, tuple]]:
        return [(n, a) for n, a in self.events if n in names]

    async def wait_for(self, condition: Callable[[], bool], what: str, timeout: float = TIMEOUT) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not condition():
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise AssertionError(f"{self.name}: {what} did not happen within {timeout} s; events {self.events[-30:]}")
            self.changed.clear()
            if condition():
                break
            try:
                await asyncio.wait_for(self.changed.wait(), remaining)
            except asyncio.TimeoutError:
                pass

    async def disconnect(self) -> None:
        if self.sio.connected:
            await asyncio.wait_for(self.sio.disconnect(), TIMEOUT)
