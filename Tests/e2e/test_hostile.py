"""Hostile clients against a real relay process: each test replays an attack, then checks that
the process is alive, that the attacker got the documented status or close code, and that the
relay's resident memory stayed under a stated bound.

Every flood is bounded in count and in time; all traffic goes to 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import struct
import time

from helpers import (ROOM, alive, frame, rss, TIMEOUT, Clients, RawSocket, async_test, emit_api, http, make_jwt,
                     mint_token, parse_connect_error)

MiB = 1024 * 1024


# --------------------------------------------------------------------------------------------
# A raw TCP WebSocket client: it writes frames without ever reading, unlike every library.

UPGRADE = (
    "GET /socket.io/?EIO=4&transport=websocket HTTP/1.1\r\n"
    "Host: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
)


async def raw_request(relay, text: str, read: bool = True) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, str]:
    """Sends `text` as is; returns the streams and (when `read`) the response head."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", relay.port), TIMEOUT)
    writer.write(text.encode("latin-1"))
    await writer.drain()
    head = ""
    if read:
        raw = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), TIMEOUT)
        head = raw.decode("latin-1")
    return reader, writer, head


async def upgraded(relay, extra_headers: str = "") -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer, head = await raw_request(relay, UPGRADE + extra_headers + "\r\n")
    assert head.startswith("HTTP/1.1 101"), head
    return reader, writer


async def write_for(writer: asyncio.StreamWriter, chunk: bytes, count: int, seconds: float) -> int:
    """Writes `chunk` up to `count` times or for `seconds`, whichever ends first, never reading.
    Returns the bytes written (accepted by the kernel)."""
    deadline = time.monotonic() + seconds
    sent = 0
    for _ in range(count):
        if time.monotonic() > deadline:
            break
        writer.write(chunk)
        try:
            await asyncio.wait_for(writer.drain(), max(0.05, deadline - time.monotonic()))
        except (asyncio.TimeoutError, ConnectionError):
            break
        sent += len(chunk)
    return sent


def report(name: str, before: int, peak: int, detail: str) -> None:
    """One line per flood (run with `pytest -s` to read them; docs/BENCHMARKS.md quotes them)."""
    print(f"\nhostile {name}: RSS {before / MiB:.1f} -> {peak / MiB:.1f} MiB (+{(peak - before) / MiB:.1f}); {detail}")


def abort(writer: asyncio.StreamWriter) -> None:
    transport = writer.transport
    if transport is not None:
        transport.abort()


# --------------------------------------------------------------------------------------------
# Malformed handshakes


BAD_EXTENSION_OFFERS = [
    "permessage-deflate; =",
    "permessage-deflate; ",
    "permessage-deflate;  ;x",
    "x, permessage-deflate; client_max_window_bits; =",
    "permessage-deflate; server_max_window_bits=",
    "permessage-deflate; server_max_window_bits=\"",
    "permessage-deflate; =15",
    ";;;,,,;=;=,",
    "permessage-deflate; client_max_window_bits=99999999999999999999999",
]


@async_test
async def test_malformed_extension_offers_never_crash(relay):
    for offer in BAD_EXTENSION_OFFERS:
        reader, writer, head = await raw_request(relay, UPGRADE + f"Sec-WebSocket-Extensions: {offer}\r\n\r\n")
        # The socket opens without compression (a malformed offer is just not accepted).
        assert head.startswith("HTTP/1.1 101"), (offer, head)
        assert "permessage-deflate" not in head.lower(), (offer, head)
        abort(writer)
    await alive(relay)


@async_test
async def test_upgrade_must_be_a_get_over_http11_with_a_valid_key(relay):
    cases = {
        "POST": UPGRADE.replace("GET ", "POST ") + "Content-Length: 0\r\n\r\n",
        "HTTP/1.0": UPGRADE.replace("HTTP/1.1", "HTTP/1.0") + "\r\n",
        "short key": UPGRADE.replace("dGhlIHNhbXBsZSBub25jZQ==", "c2hvcnQ=") + "\r\n",
        "not base64": UPGRADE.replace("dGhlIHNhbXBsZSBub25jZQ==", "!!!!!!!!!!!!!!!!!!!!!!==") + "\r\n",
    }
    for name, request in cases.items():
        reader, writer, head = await raw_request(relay, request)
        assert head.split(" ")[1] == "400", (name, head)
        body = await asyncio.wait_for(reader.read(4096), TIMEOUT)
        assert b"bad_upgrade_request" in body, (name, body)
        abort(writer)
    await alive(relay)


@async_test
async def test_tokens_with_out_of_range_numbers_never_crash(start_relay):
    now = int(time.time())
    # Numbers beyond ±2^53 s (no exact integer, no real date) are refused as invalid claims.
    out_of_range = [2 ** 63, 2 ** 64 + 7, 1e300, -1e300, 9.3e18]
    cases = [({"sub": "alice", "exp": v}, "token_invalid_claims") for v in out_of_range]
    cases += [({"sub": "alice", "exp": now + 3600, "nbf": v}, "token_invalid_claims") for v in out_of_range]
    cases += [({"sub": "alice", "exp": now + 3600, "iat": v}, "token_invalid_claims") for v in out_of_range]
    cases += [({"sub": "alice", "exp": -1}, "token_expired"), ({"sub": "alice", "exp": now + 3600, "nbf": now + 7200}, "token_not_yet_valid"),
              ({"sub": "alice", "exp": "soon"}, "token_malformed")]
    relays = []
    for i, (claims, expected) in enumerate(cases):
        # A fresh relay every 10 refusals: the failed-authentication budget per IP is 10.
        if i % 10 == 0:
            relays.append(start_relay())
        sock = await RawSocket.open(relays[-1])
        reply = await sock.connect(make_jwt(claims))
        assert parse_connect_error(reply)[1]["data"]["code"] == expected, (claims, reply)
        await sock.close()
    for relay in relays:
        await alive(relay)


@async_test
async def test_tokens_with_a_crit_header_are_refused(start_relay):
    relay = start_relay()
    now = int(time.time())
    token = make_jwt({"sub": "alice", "exp": now + 60}, header={"alg": "HS256", "typ": "JWT", "crit": ["exp"]})
    sock = await RawSocket.open(relay)
    reply = await sock.connect(token)
    assert parse_connect_error(reply)[1]["data"]["code"] == "token_malformed", reply
    await sock.close()


# --------------------------------------------------------------------------------------------
# Floods that used to take gigabytes


@async_test
async def test_ping_flood_without_reading_stays_bounded(start_relay):
    relay = start_relay()
    await alive(relay)
    before = rss(relay)
    reader, writer = await upgraded(relay)
    writer.write(frame(0x1, b"6"))  # an Engine.IO noop, then only pings
    ping = frame(0x9, b"p" * 125)
    sent = await write_for(writer, ping * 64, count=200_000, seconds=8)
    peak = rss(relay)
    abort(writer)
    report("ping flood", before, peak, f"{sent / MiB:.1f} MiB of pings written in <= 8 s")
    # Without backpressure each ping queued a 127-byte pong: `sent` bytes of pings made as many
    # bytes of pongs. With it, the relay stops reading once its answers stop draining.
    assert peak - before < 48 * MiB, f"RSS grew {(peak - before) / MiB:.1f} MiB after {sent / MiB:.1f} MiB of pings"
    await alive(relay)


@async_test
async def test_pipelined_http_without_reading_stays_bounded(start_relay):
    relay = start_relay()
    await alive(relay)
    before = rss(relay)
    reader, writer, _ = await raw_request(relay, "", read=False)
    requests = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 256
    sent = await write_for(writer, requests, count=20_000, seconds=8)
    peak = rss(relay)
    abort(writer)
    report("pipelined GET /metrics", before, peak, f"{sent / MiB:.1f} MiB of requests written in <= 8 s")
    assert peak - before < 48 * MiB, f"RSS grew {(peak - before) / MiB:.1f} MiB after {sent / MiB:.1f} MiB of requests"
    await alive(relay)


@async_test
async def test_unauthenticated_large_frames_are_refused_at_the_header(start_relay):
    relay = start_relay("--max-connections-per-ip", "2000")
    await alive(relay)
    before = rss(relay)
    sockets = []
    for _ in range(300):
        reader, writer = await upgraded(relay)
        # Declares ~1 MB, sends 64 KiB of it and waits: the relay must not buffer up to 1 MB.
        writer.write(frame(0x1, b"x" * 65536, declared=1_000_000))
        sockets.append((reader, writer))
    await asyncio.gather(*(w.drain() for _, w in sockets))
    peak = rss(relay)
    closes = 0
    for reader, writer in sockets:
        data = b""
        try:
            while chunk := await asyncio.wait_for(reader.read(65536), TIMEOUT):
                data += chunk
        except ConnectionError:
            pass
        # The open packet, then a close frame with 1009, then the end of the stream.
        if b"\x88" in data and struct.pack("!H", 1009) in data:
            closes += 1
        abort(writer)
    assert closes == len(sockets), f"{closes} of {len(sockets)} sockets closed with 1009"
    report("300 unauthenticated 1 MB frames", before, peak, f"{closes} closed with 1009")
    assert peak - before < 64 * MiB, f"RSS grew {(peak - before) / MiB:.1f} MiB for 300 sockets"
    await alive(relay)


@async_test
async def test_unauthenticated_fragmented_message_is_capped(start_relay):
    relay = start_relay()
    reader, writer = await upgraded(relay)
    writer.write(frame(0x1, b"4", fin=False))
    for _ in range(10):
        writer.write(frame(0x0, b"x" * 4000, fin=False))
    await writer.drain()
    data = b""
    while struct.pack("!H", 1009) not in data:
        chunk = await asyncio.wait_for(reader.read(65536), TIMEOUT)
        assert chunk, f"closed without 1009: {data!r}"
        data += chunk
    abort(writer)
    await alive(relay)


@async_test
async def test_refused_events_spend_a_budget_then_1008(start_relay):
    relay = start_relay()
    sock = await RawSocket.open(relay)
    await sock.connect_ok(mint_token("mallory"))
    for i in range(200):
        try:
            await sock.send(f'42{i}["Not A Name",{{}}]')
        except Exception:  # noqa: BLE001 - the relay may close before we finish
            break
    code, messages = await sock.wait_closed()
    assert code == 1008, (code, messages[-3:])
    errors = [m for m in messages if m.startswith("43")]
    assert 0 < len(errors) <= 40, f"{len(errors)} error replies"
    await alive(relay)


# --------------------------------------------------------------------------------------------
# Identities and payloads


@async_test
async def test_unicode_lookalikes_do_not_cross_authorization(start_relay):
    relay = start_relay()
    decomposed = "conversation:cafe\u0301"
    composed = "conversation:caf\u00e9"
    # A token whose rooms are not NFC is refused outright.
    sock = await RawSocket.open(relay)
    reply = await sock.connect(mint_token("alice", rooms=[decomposed]))
    assert parse_connect_error(reply)[1]["data"]["code"] == "token_invalid_claims", reply
    await sock.close()
    # A token for the composed room cannot reach the decomposed spelling (refused as not NFC),
    # and a prefix pattern matches bytes, not look-alikes.
    sock = await RawSocket.open(relay)
    await sock.connect_ok(mint_token("alice", rooms=[composed, "conversation:cafe*"]))
    await sock.send("421" + json.dumps(["room:join", {"room": decomposed}]))
    reply = json.loads((await sock.recv_packet())[3:])[0]
    assert reply["ok"] is False and reply["error"]["code"] == "invalid_payload", reply
    await sock.send("422" + json.dumps(["room:join", {"room": composed}]))
    reply = json.loads((await sock.recv_packet())[3:])[0]
    assert reply["ok"] is True and reply["room"] == composed, reply
    await sock.close()

    # A user id that is not NFC cannot sign in, so `jose\u0301` can never receive `jos\u00e9`'s events.
    sock = await RawSocket.open(relay)
    reply = await sock.connect(mint_token("jose\u0301"))
    assert parse_connect_error(reply)[1]["data"]["code"] == "token_invalid_claims", reply
    await sock.close()
    status, body = await emit_api(relay, "notification:new", {"user": "jose\u0301"}, {"x": 1})
    assert status == 400 and body["error"]["code"] == "invalid_payload", (status, body)
    status, body = await emit_api(relay, "notification:new", {"room": decomposed}, {"x": 1})
    assert status == 400 and body["error"]["code"] == "invalid_payload", (status, body)


@async_test
async def test_duplicate_json_keys_are_refused(relay):
    sock = await RawSocket.open(relay)
    await sock.connect_ok(mint_token("alice"))
    await sock.send("421" + json.dumps(["room:join", {"room": ROOM}]))
    assert json.loads((await sock.recv_packet())[3:])[0]["ok"] is True
    await sock.send('422["thing:happened",{"room":"conversation:1","room":"conversation:2"}]')
    reply = json.loads((await sock.recv_packet())[3:])[0]
    assert reply["ok"] is False and reply["error"]["code"] == "invalid_payload", reply
    await sock.close()
    status, body = await http(relay, "POST", "/api/v1/emit",
                              raw=b'{"event":"notification:new","to":{"user":"a","user":"b"},"data":{}}',
                              headers={"Content-Type": "application/json"})
    assert status == 400, (status, body)


@async_test
async def test_spoofed_receipt_author_does_not_reach_a_user_outside_the_room(relay):
    async with Clients() as c:
        alice = await c.connect(relay, "alice", mint_token("alice", rooms=["conversation:1"]))
        carol = await c.connect(relay, "carol", mint_token("carol", rooms=["conversation:2"]))
        bob = await c.connect(relay, "bob", mint_token("bob", rooms=["conversation:2"]))
        await alice.join(ROOM)
        await bob.join("conversation:2")
        # alice claims carol wrote a message in a room carol may not see.
        await alice.ok("message:read", {"room": ROOM, "messageId": "m-spoof", "authorId": "carol"})
        # A legitimate receipt for carol in her own room, sent after: it arrives, the spoof never does.
        await bob.ok("message:read", {"room": "conversation:2", "messageId": "m-ok", "authorId": "carol"})
        data = await carol.expect("message:read")
        assert data["messageId"] == "m-ok", (data, carol.history)
        sync = await carol.call("receipt:sync", {"since": 0})
        ids = [r["messageId"] for r in sync["receipts"]]
        assert "m-ok" in ids and "m-spoof" not in ids, sync


@async_test
async def test_metrics_key(start_relay):
    relay = start_relay("--metrics-key", "metrics-key-0123456789")
    status, _ = await http(relay, "GET", "/metrics", key=None)
    assert status == 401
    status, text = await http(relay, "GET", "/metrics", key="metrics-key-0123456789")
    assert status == 200 and "relay_connections" in text
