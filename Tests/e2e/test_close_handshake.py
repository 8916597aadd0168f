"""The relay's close, as the wire shows it (RFC 6455 §7.1.1, issue #42): the relay's close frame,
then no FIN until the client answers with its close frame — a client that saw FIN right behind
the close frame could report the connection gone before the frames ahead of it (the last
`auth:expired`, a kick's reason) — then the relay closes the TCP connection at once. A client
that never answers is closed at the 2 s deadline. Raw TCP, so that the FIN itself is seen."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import struct
import time

from helpers import async_test, frame, mint_token


async def read_frame(reader: asyncio.StreamReader, timeout: float) -> tuple[int, bytes]:
    """One server frame (unmasked): its opcode and payload."""
    head = await asyncio.wait_for(reader.readexactly(2), timeout)
    length = head[1] & 0x7F
    if length == 126:
        (length,) = struct.unpack("!H", await asyncio.wait_for(reader.readexactly(2), timeout))
    elif length == 127:
        (length,) = struct.unpack("!Q", await asyncio.wait_for(reader.readexactly(8), timeout))
    payload = await asyncio.wait_for(reader.readexactly(length), timeout) if length else b""
    return head[0] & 0x0F, payload


async def open_connected(relay) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A raw WebSocket, upgraded, its Socket.IO CONNECT answered."""
    reader, writer = await asyncio.open_connection(relay.host, relay.port)
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write((f"GET /socket.io/?EIO=4&transport=websocket HTTP/1.1\r\nHost: {relay.host}:{relay.port}\r\n"
                  f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
    answer = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    assert answer.startswith(b"HTTP/1.1 101"), answer
    opcode, payload = await read_frame(reader, 10)
    assert opcode == 1 and payload.startswith(b"0{"), payload
    writer.write(frame(1, "40" + json.dumps({"token": mint_token("closer")})))
    await writer.drain()
    opcode, payload = await read_frame(reader, 10)
    assert payload.startswith(b"40{"), payload
    return reader, writer


async def relay_closes_with(reader, writer, code: int) -> list[bytes]:
    """Breaks a rule (invalid UTF-8 in a text frame) and reads up to the relay's close frame."""
    writer.write(frame(1, b"42\xff"))
    await writer.drain()
    before: list[bytes] = []
    while True:
        opcode, payload = await read_frame(reader, 10)
        if opcode == 8:
            assert struct.unpack("!H", payload[:2])[0] == code, payload
            return before
        before.append(payload)


async def eof_within(reader, seconds: float) -> bool:
    try:
        return await asyncio.wait_for(reader.read(1), seconds) == b""
    except asyncio.TimeoutError:
        return False


@async_test
async def test_the_relay_waits_for_the_clients_close_frame_then_closes(relay):
    reader, writer = await open_connected(relay)
    try:
        await relay_closes_with(reader, writer, 1007)
        assert not await eof_within(reader, 0.5), "FIN before the client's close frame"
        started = time.monotonic()
        writer.write(frame(8, struct.pack("!H", 1000)))
        await writer.drain()
        assert await eof_within(reader, 1.5), "the relay did not close after the client's close frame"
        assert time.monotonic() - started < 1.5
    finally:
        writer.close()


@async_test
async def test_a_client_that_never_answers_is_closed_at_the_deadline(relay):
    reader, writer = await open_connected(relay)
    try:
        await relay_closes_with(reader, writer, 1007)
        started = time.monotonic()
        assert await eof_within(reader, 6), "still open long after the close deadline"
        waited = time.monotonic() - started
        assert 1.0 <= waited <= 5.0, waited
    finally:
        writer.close()


@async_test
async def test_a_client_that_closes_first_gets_the_answer_then_the_fin(relay):
    reader, writer = await open_connected(relay)
    try:
        writer.write(frame(8, struct.pack("!H", 1000) + b"bye"))
        await writer.drain()
        opcode, payload = await read_frame(reader, 5)
        assert opcode == 8 and struct.unpack("!H", payload[:2])[0] == 1000, payload
        assert await eof_within(reader, 1.5), "the handshake was complete: the relay closes"
    finally:
        writer.close()
