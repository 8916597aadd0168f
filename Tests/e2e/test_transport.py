"""Engine.IO transport: the open packet, heartbeat, connect timeout, message limits, binary
frames, and the refusal of HTTP long-polling."""

from __future__ import annotations

import asyncio
import json

from helpers import (
    TIMEOUT,
    Clients,
    RawSocket,
    async_test,
    http,
    mint_token,
)

MAX_PAYLOAD = 65536
RELAY_ARGS = ["--max-payload", str(MAX_PAYLOAD)]


@async_test
async def test_open_packet(relay):
    sock = await RawSocket.open(relay)
    try:
        assert set(sock.open_packet) == {"sid", "upgrades", "pingInterval", "pingTimeout", "maxPayload"}
        assert isinstance(sock.open_packet["sid"], str) and sock.open_packet["sid"]
        assert sock.open_packet["upgrades"] == []
        assert sock.open_packet["pingInterval"] == 25000
        assert sock.open_packet["pingTimeout"] == 20000
        assert sock.open_packet["maxPayload"] == MAX_PAYLOAD
        reply = await sock.connect_ok(mint_token("ann"))
        assert reply["sid"] != sock.open_packet["sid"]
        # An Engine.IO ping from the client is answered with a pong carrying its data.
        await sock.send("2probe")
        assert await sock.recv_packet() == "3probe"
    finally:
        await sock.close()


@async_test
async def test_oversized_message_is_closed_with_1009(relay):
    sock = await RawSocket.open(relay)
    try:
        await sock.connect_ok(mint_token("ben"))
        # Just under the limit: processed (answered), the socket stays open.
        body = '421["chat:big",{"room":"conversation:big","blob":"%s"}]'
        under = body % ("x" * (60000 - len(body)))
        await sock.send(under)
        ack = json.loads((await sock.recv_packet())[3:])[0]
        assert ack["ok"] is False and ack["error"]["code"] == "not_in_room", ack
        # Over the limit: closed with 1009 (message too big).
        await sock.send(body % ("x" * 70000))
        code, _ = await sock.wait_closed()
        assert code == 1009
    finally:
        await sock.close()


@async_test
async def test_oversized_fragmented_message_is_closed_with_1009(relay):
    sock = await RawSocket.open(relay)
    try:
        await sock.connect_ok(mint_token("cid"))
        # Frames each under the limit, a message over it.
        chunk = "x" * 20000
        await sock.send(iter(['42["chat:big",{"room":"conversation:big","blob":"'] + [chunk] * 4 + ['"}]']))
        code, _ = await sock.wait_closed()
        assert code == 1009
    finally:
        await sock.close()


@async_test
async def test_a_binary_frame_without_a_header_closes_1002(relay):
    """A binary message no packet announced does not parse: closed, as the protocol says."""
    sock = await RawSocket.open(relay)
    try:
        await sock.connect_ok(mint_token("dan"))
        await sock.send(b'42["chat:ping",{"room":"conversation:bin"}]')
        code, texts = await sock.wait_closed()
        assert code == 1002 and texts == [], (code, texts)
    finally:
        await sock.close()


@async_test
async def test_unknown_transports_and_versions_are_refused(relay):
    status, body = await http(relay, "GET", "/socket.io/?EIO=4&transport=flash", key=None)
    assert status == 400 and body["error"]["code"] == "transport_unsupported" and body["error"]["message"]
    status, body = await http(relay, "POST", "/socket.io/?EIO=4&transport=polling&sid=abc", raw=b"40", key=None)
    assert status == 400 and body == {"code": 1, "message": "Session ID unknown"}
    status, body = await http(relay, "GET", "/socket.io/?EIO=3&transport=polling", key=None)
    assert status == 400 and body["error"]["code"] == "unsupported_protocol_version"


@async_test
async def test_connect_timeout_closes_with_4001(start_relay):
    relay = start_relay("--connect-timeout", "300")
    silent = await RawSocket.open(relay)
    try:
        code, messages = await silent.wait_closed()
        assert code == 4001, messages
    finally:
        await silent.close()
    # A first packet that is not CONNECT does not count as one.
    eager = await RawSocket.open(relay)
    try:
        await eager.send('42["room:join",{"room":"conversation:1"}]')
        code, messages = await eager.wait_closed()
        assert code == 4001, messages
        errors = [json.loads(m[2:]) for m in messages if m.startswith("42")]
        assert errors and errors[0][0] == "error" and errors[0][1]["code"] == "not_connected", messages
    finally:
        await eager.close()


HEARTBEAT_ARGS = ("--ping-interval", "200", "--ping-timeout", "300")


@async_test
async def test_client_that_never_answers_pings_is_closed_with_4000(start_relay):
    relay = start_relay(*HEARTBEAT_ARGS)
    silent = await RawSocket.open(relay)
    try:
        assert silent.open_packet["pingInterval"] == 200 and silent.open_packet["pingTimeout"] == 300
        await silent.connect_ok(mint_token("gus"))
        # The first ping comes at 200 ms; unanswered, the socket must be closed 300 ms later.
        code, messages = await silent.wait_closed()
        assert messages[:1] == ["2"], messages
        assert code == 4000, messages
    finally:
        await silent.close()


@async_test
async def test_clients_that_answer_pings_stay_connected(start_relay):
    relay = start_relay(*HEARTBEAT_ARGS)
    async with Clients() as clients:
        # python-socketio answers pings by itself.
        steady = await clients.connect(relay, "eve")
        await steady.join("conversation:heartbeat")
        # A raw client that answers `2` with `3`.
        polite = await RawSocket.open(relay)
        pings: asyncio.Queue = asyncio.Queue()
        replies: asyncio.Queue = asyncio.Queue()

        async def answer_pings():
            while True:
                msg = await polite.ws.recv()
                if msg == "2":
                    await polite.send("3")
                    pings.put_nowait(msg)
                else:
                    replies.put_nowait(msg)

        answering = None
        try:
            await polite.connect_ok(mint_token("fay"))
            answering = asyncio.create_task(answer_pings())
            # Several ping intervals and pong timeouts go by.
            for _ in range(5):
                await asyncio.wait_for(pings.get(), TIMEOUT)
            # Both are still connected and served.
            await polite.send('420["presence:list",{"room":"conversation:heartbeat"}]')
            ack = await asyncio.wait_for(replies.get(), TIMEOUT)
            assert ack.startswith("430[") and json.loads(ack[3:])[0]["presence"] == [{"user": "eve", "devices": 1}]
            assert steady.connected
            listed = await steady.ok("presence:list", {"room": "conversation:heartbeat"})
            assert listed["presence"] == [{"user": "eve", "devices": 1}]
            assert steady.connected
        finally:
            if answering is not None:
                answering.cancel()
            await polite.close()
