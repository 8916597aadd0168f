"""Every limit with its error or close code, slow consumers, and abrupt disconnects."""

from __future__ import annotations

import asyncio
import json
import socket
import struct

from websockets.asyncio.client import connect as ws_connect

from helpers import ROOM, TIMEOUT, Clients, RawSocket, async_test, http, mint_token, refused_code


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@async_test
async def test_half_sent_http_request_is_closed_after_the_handshake_timeout(start_relay):
    relay = start_relay("--handshake-timeout", "300")
    reader, writer = await asyncio.open_connection("127.0.0.1", relay.port)
    writer.write(b"GET /socket.io/?EIO=4&transport=websocket HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # no blank line
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), TIMEOUT)  # EOF when the relay closes
    assert data == b""
    writer.close()


@async_test
async def test_connections_per_ip_and_in_total_get_503(start_relay):
    relay = start_relay("--max-connections-per-ip", "2")
    a = await RawSocket.open(relay)
    b = await RawSocket.open(relay)
    status, body = await http(relay, "GET", "/socket.io/?EIO=4&transport=websocket", key=None)
    # The HTTP request itself is the third connection from 127.0.0.1.
    assert status == 503 and body["error"]["code"] == "too_many_connections", (status, body)
    await a.close()
    await b.close()
    relay2 = start_relay("--max-connections", "1")
    c = await RawSocket.open(relay2)
    status, body = await http(relay2, "GET", "/socket.io/?EIO=4&transport=websocket", key=None)
    assert status == 503 and body["error"]["code"] == "too_many_connections"
    await c.close()


@async_test
async def test_connections_per_user(start_relay):
    relay = start_relay("--max-connections-per-user", "2")
    async with Clients() as c:
        await c.connect(relay, "uma", name="uma1")
        await c.connect(relay, "uma", name="uma2")
        code, close = await refused_code(relay, mint_token("uma"))
        assert (code, close) == ("too_many_connections", "open")


@async_test
async def test_rooms_per_connection_and_members_per_room(start_relay):
    relay = start_relay("--max-rooms-per-connection", "2", "--max-members-per-room", "2")
    async with Clients() as c:
        a = await c.connect(relay, "ann")
        await a.join("conversation:a")
        await a.join("conversation:b")
        await a.fails("room:join", {"room": "conversation:c"}, "too_many_rooms")
        b = await c.connect(relay, "ben")
        await b.join("conversation:a")
        d = await c.connect(relay, "dan")
        await d.fails("room:join", {"room": "conversation:a"}, "room_full")


@async_test
async def test_event_rate_per_connection_and_per_kind(start_relay):
    relay = start_relay("--events-per-second", "1", "--event-burst", "5", "--rate", "typing=1:2")
    async with Clients() as c:
        a = await c.connect(relay, "amy")
        await a.join()
        await a.ok("typing:start", {"room": ROOM})
        await a.ok("typing:stop", {"room": ROOM})
        await a.fails("typing:start", {"room": ROOM}, "rate_limited")  # the typing budget
        await a.ok("presence:list", {"room": ROOM})
        await a.ok("presence:list", {"room": ROOM})
        await a.fails("presence:list", {"room": ROOM}, "rate_limited")  # the overall budget


@async_test
async def test_event_size_limit(start_relay):
    relay = start_relay("--max-event-bytes", "200")
    async with Clients() as c:
        a = await c.connect(relay, "ada")
        await a.join()
        await a.fails("note:new", {"room": ROOM, "body": "x" * 300}, "payload_too_large")
        await a.ok("note:new", {"room": ROOM, "body": "x" * 20})


@async_test
async def test_invalid_utf8_closes_1007_and_protocol_errors_close_1002(relay):
    # websockets refuses to send invalid UTF-8 as text, so write the frames by hand.
    for payload, opcode, expected in ((b'42["x:y",\xc3(]', 0x1, 1007), (b"", 0x3, 1002), (b"40", 0x1 | 0x40, 1002)):
        reader, writer = await asyncio.open_connection("127.0.0.1", relay.port)
        writer.write(b"GET /socket.io/?EIO=4&transport=websocket HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
                     b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), TIMEOUT)
        assert b" 101 " in head
        mask = b"\x01\x02\x03\x04"
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        first = 0x80 | (opcode & 0x0F) | (opcode & 0x70)
        writer.write(bytes([first, 0x80 | len(payload)]) + mask + masked)
        await writer.drain()
        code = None
        while code is None:
            hdr = await asyncio.wait_for(reader.readexactly(2), TIMEOUT)
            n = hdr[1] & 0x7F
            if n == 126:
                n = struct.unpack("!H", await reader.readexactly(2))[0]
            body = await reader.readexactly(n)
            if hdr[0] & 0x0F == 0x8:
                code = struct.unpack("!H", body[:2])[0]
        assert code == expected, (payload, opcode, code)
        writer.close()


@async_test
async def test_a_stalled_reader_is_closed_and_never_slows_the_room(start_relay):
    relay = start_relay("--events-per-second", "100000", "--event-burst", "100000", "--rate", "custom=100000:100000",
                        "--packets-per-second", "100000", "--inbound-bytes-per-second", "100000000",
                        "--event-bytes-per-second", "100000000")
    async with Clients() as c:
        sender = await c.connect(relay, "sam")
        await sender.join()
        healthy = await c.connect(relay, "hal")
        await healthy.join()
        # A raw client that joins, then stops reading: its socket buffers fill, then the relay's queue.
        stalled = await ws_connect(relay.ws_url, compression=None, max_queue=1, ping_interval=None, open_timeout=TIMEOUT, max_size=None)
        assert (await stalled.recv()).startswith("0{")
        await stalled.send("40" + json.dumps({"token": mint_token("stu")}))
        assert (await stalled.recv()).startswith("40{")
        await stalled.send('421["room:join",{"room":"%s"}]' % ROOM)
        stalled.transport.pause_reading()
        await healthy.expect("presence:join", user="stu")

        rss_before = rss_bytes(relay.proc.pid)
        pad = "p" * 16_000
        n = 1500  # 24 MB of events towards the stalled reader, far over its 1 MiB queue
        for i in range(n):
            await sender.emit("note:new", {"room": ROOM, "n": i, "pad": pad})
        # The healthy reader gets every event, in order…
        await healthy.expect("note:new", timeout=30, n=n - 1)
        seen = [d["n"] for name, d in healthy.history if name == "note:new"]
        assert seen == list(range(n)), f"{len(seen)} events, first gap at {next((i for i, v in enumerate(seen) if v != i), None)}"
        # …and the stalled user is dropped as a slow consumer, so the room sees it leave.
        if not any(name == "presence:leave" and d.get("user") == "stu" for name, d in healthy.history):
            await healthy.expect("presence:leave", user="stu", timeout=30)
        growth = rss_bytes(relay.proc.pid) - rss_before
        assert growth < 16 * 1024 * 1024, f"relay RSS grew by {growth} bytes"
        stalled.transport.abort()


@async_test
async def test_reset_connection_leaves_presence_and_stops_typing(relay):
    async with Clients() as c:
        watcher = await c.connect(relay, "wes")
        await watcher.join()
        sock = await RawSocket.open(relay)
        await sock.connect_ok(mint_token("rex"))
        await sock.send('421["room:join",{"room":"%s"}]' % ROOM)
        await watcher.expect("presence:join", user="rex")
        await sock.send('42["typing:start",{"room":"%s"}]' % ROOM)
        await watcher.expect("typing:start", **{"from": "rex"})
        raw = sock.ws.transport.get_extra_info("socket")
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.ws.transport.abort()  # RST, no close frame
        await watcher.expect("presence:leave", user="rex")
        await watcher.expect("typing:stop", **{"from": "rex"})


@async_test
async def test_half_open_connection_is_caught_by_the_heartbeat(start_relay):
    relay = start_relay("--ping-interval", "200", "--ping-timeout", "300")
    async with Clients() as c:
        watcher = await c.connect(relay, "val")
        await watcher.join()
        sock = await RawSocket.open(relay)
        await sock.connect_ok(mint_token("hal2"))
        await sock.send('421["room:join",{"room":"%s"}]' % ROOM)
        await watcher.expect("presence:join", user="hal2")
        sock.ws.transport.pause_reading()  # silent from now on, like a phone gone off the network
        await watcher.expect("presence:leave", user="hal2")
        sock.ws.transport.abort()
