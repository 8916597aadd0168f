"""Cross-site WebSocket hijacking protection (Origin policy and allow-list) and the per-IP budget of
failed authentications."""

from __future__ import annotations

import pytest
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import InvalidStatus

import time

from helpers import TIMEOUT, RawSocket, async_test, http, make_jwt, mint_token, parse_connect_error


async def upgrade_status(relay, origin: str | None) -> int:
    try:
        ws = await ws_connect(relay.ws_url, origin=origin, open_timeout=TIMEOUT, compression=None)
    except InvalidStatus as e:
        return e.response.status_code
    await ws.close()
    return 101


@async_test
async def test_default_allows_only_clients_without_origin(start_relay):
    relay = start_relay()
    assert await upgrade_status(relay, None) == 101, "native clients send no Origin"
    assert await upgrade_status(relay, "https://evil.example") == 403
    status, body = await http(relay, "GET", "/socket.io/?EIO=4&transport=websocket", key=None, headers={"Origin": "https://evil.example"})
    assert status == 403 and body["error"]["code"] == "origin_not_allowed"


@async_test
async def test_native_origins_pass_by_default(start_relay):
    relay = start_relay()
    # socket.io-client-swift (Starscream) always sends Origin: ws://HOST:PORT from its URL.
    assert await upgrade_status(relay, f"ws://127.0.0.1:{relay.port}") == 101
    assert await upgrade_status(relay, "wss://chat.example") == 101
    # A page served from the relay's own host.
    assert await upgrade_status(relay, f"http://127.0.0.1:{relay.port}") == 101
    assert await upgrade_status(relay, "http://127.0.0.1:1") == 403


@async_test
async def test_allow_list(start_relay):
    relay = start_relay("--allowed-origins", "https://app.example,https://web.example")
    assert await upgrade_status(relay, "https://app.example") == 101
    assert await upgrade_status(relay, "https://web.example") == 101
    assert await upgrade_status(relay, "https://app.example.evil.example") == 403
    assert await upgrade_status(relay, None) == 101
    anyone = start_relay("--allowed-origins", "*")
    assert await upgrade_status(anyone, "https://whatever.example") == 101


@async_test
async def test_failed_authentications_are_rate_limited_per_client(start_relay):
    relay = start_relay()
    # Signed with another key: a well-formed token whose signature does not verify (one token,
    # as a client retrying it sends it again and again).
    forged = make_jwt({"sub": "mallory", "exp": 4_000_000_000}, sign_with="another-secret-0123456789abcdef-0123")

    async def attempt(token: str) -> str:
        sock = await RawSocket.open(relay)
        reply = await sock.connect(token)
        await sock.close()
        return "ok" if reply.startswith("40{") else parse_connect_error(reply)[1]["data"]["code"]

    codes = [await attempt(forged) for _ in range(12)]
    # The first 10 failures (the burst) are checked; after that this client is refused unchecked.
    assert codes[:10] == ["token_bad_signature"] * 10, codes
    assert codes[10:] == ["auth_rate_limited"] * 2, codes
    # Another client from the same address (phones behind one NAT) is not refused for it: its
    # valid token is checked and accepted (#42).
    assert await attempt(mint_token("alice")) == "ok"
    # Many different bad tokens from one address spend the address's budget (10 x the
    # client's): past it, every client there waits, a valid token too.
    spent = [await attempt(make_jwt({"sub": f"m{n}", "exp": 4_000_000_000}, sign_with="another-secret-0123456789abcdef-0123")) for n in range(95)]
    assert spent[-1] == "auth_rate_limited" and spent.count("token_bad_signature") >= 85, spent
    assert await attempt(mint_token("alice")) == "auth_rate_limited"


@async_test
async def test_refused_upgrades_get_a_status_not_a_dropped_connection(start_relay):
    relay = start_relay("--max-connections-per-ip", "1")
    first = await RawSocket.open(relay)
    assert await upgrade_status(relay, None) == 503, "over the per-IP limit: 503, not a silent close"
    await first.close()
    # Wrong path or Engine.IO version: 400 with a JSON reason.
    relay2 = start_relay()
    try:
        await ws_connect(f"ws://127.0.0.1:{relay2.port}/socket.io/?EIO=3&transport=websocket", open_timeout=TIMEOUT)
        raise AssertionError("EIO=3 was accepted")
    except InvalidStatus as e:
        assert e.response.status_code == 400


@async_test
async def test_starscream_handshake_is_admitted_by_default(start_relay):
    """socket.io-client-swift's WebSocket layer (Starscream 4.0.8, HTTPWSHeader.createUpgrade)
    sends exactly these headers: Origin built from the ws:// URL, a key of 16 random a-z
    letters, and its compression offer. The default Origin policy must admit it."""
    import asyncio
    import base64
    import random

    relay = start_relay()
    key = base64.b64encode(bytes(random.randint(97, 122) for _ in range(16))).decode()
    request = (
        "GET /socket.io/?EIO=4&transport=websocket HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{relay.port}\r\n"
        f"Origin: ws://127.0.0.1:{relay.port}\r\n"
        "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
        f"Sec-WebSocket-Key: {key}\r\n"
        "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits; server_max_window_bits=15\r\n\r\n")
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", relay.port), TIMEOUT)
    writer.write(request.encode())
    await writer.drain()
    head = (await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), TIMEOUT)).decode("latin-1")
    assert head.startswith("HTTP/1.1 101"), head
    assert "permessage-deflate" in head.lower(), head
    # The Engine.IO open packet follows as the first (uncompressed, short) text frame.
    first = await asyncio.wait_for(reader.readexactly(2), TIMEOUT)
    assert first[0] & 0x0F == 0x1, first
    writer.close()
