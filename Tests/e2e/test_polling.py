"""Engine.IO v4 HTTP long-polling and the upgrade to WebSocket, against a real relay: the wire
rules by hand (aiohttp), and python-socketio with its default transports and polling only."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import socketio
from websockets.asyncio.client import connect as ws_connect

from helpers import API_KEY, ROOM, TIMEOUT, async_test, emit_api, mint_token

SEP = "\x1e"


def base(relay) -> str:
    return f"http://127.0.0.1:{relay.port}/socket.io/?EIO=4&transport=polling"


async def handshake(session: aiohttp.ClientSession, relay, headers: dict | None = None) -> str:
    async with session.get(base(relay), headers=headers or {}) as r:
        assert r.status == 200, await r.text()
        body = await r.text()
    assert body.startswith("0{"), body
    opened = json.loads(body[1:])
    assert opened["upgrades"] == ["websocket"] and opened["pingInterval"] > 0, opened
    return opened["sid"]


async def post(session, relay, sid: str, *packets: str) -> int:
    async with session.post(f"{base(relay)}&sid={sid}", data=SEP.join(packets).encode()) as r:
        assert await r.text() == "ok" or r.status != 200
        return r.status


async def get(session, relay, sid: str) -> list[str]:
    async with session.get(f"{base(relay)}&sid={sid}", timeout=aiohttp.ClientTimeout(total=TIMEOUT)) as r:
        assert r.status == 200, (r.status, await r.text())
        return (await r.text()).split(SEP)


async def connected_session(session, relay, user: str = "alice") -> str:
    sid = await handshake(session, relay)
    assert await post(session, relay, sid, "40" + json.dumps({"token": mint_token(user)})) == 200
    packets = await get(session, relay, sid)
    assert packets[0].startswith("40{"), packets
    return sid


@async_test
async def test_polling_wire_rules(start_relay):
    relay = start_relay()
    async with aiohttp.ClientSession() as s:
        sid = await connected_session(s, relay)
        # Several packets in one POST, answered in order in one GET.
        assert await post(s, relay, sid, '421["room:join",{"room":"conversation:1"}]', '422["presence:list",{"room":"conversation:1"}]') == 200
        answers: list[str] = []
        while len(answers) < 2:
            answers += [p for p in await get(s, relay, sid) if p.startswith("43")]
        assert answers[0].startswith('431[{"ok":true') and answers[1].startswith('432[{"ok":true'), answers
        # A second GET while one is held is a protocol error (and ends the session).
        held = asyncio.create_task(get(s, relay, sid))
        await asyncio.sleep(0.2)  # let the first GET reach the relay and be held
        async with s.get(f"{base(relay)}&sid={sid}") as r:
            assert r.status == 400
        assert "1" in await held
        async with s.get(f"{base(relay)}&sid={sid}") as r:
            assert r.status == 400 and (await r.json())["message"] == "Session ID unknown"


@async_test
async def test_polling_bodies_are_bounded_before_connect(relay):
    async with aiohttp.ClientSession() as s:
        sid = await handshake(s, relay)
        async with s.post(f"{base(relay)}&sid={sid}", data=b"4" + b"x" * 20000) as r:
            assert r.status == 413, r.status
        async with s.post(f"{base(relay)}?EIO=4&transport=polling&sid=nope", data=b"40") as r:
            assert r.status in (400, 413)


@async_test
async def test_polling_cors_and_origin(start_relay):
    relay = start_relay("--allowed-origins", "https://app.example")
    async with aiohttp.ClientSession() as s:
        async with s.get(base(relay), headers={"Origin": "https://app.example"}) as r:
            assert r.status == 200
            assert r.headers["Access-Control-Allow-Origin"] == "https://app.example"
            assert r.headers["Access-Control-Allow-Credentials"] == "true"
        async with s.get(base(relay), headers={"Origin": "https://evil.example"}) as r:
            assert r.status == 403
        async with s.options(base(relay), headers={"Origin": "https://app.example", "Access-Control-Request-Method": "POST"}) as r:
            assert r.status == 204 and "POST" in r.headers["Access-Control-Allow-Methods"]


@async_test
async def test_upgrade_loses_nothing_under_load(start_relay):
    """A member keeps sending while the other upgrades from polling to WebSocket: every event
    arrives once, in order."""
    relay = start_relay("--rate", "custom=1000:1000", "--events-per-second", "1000", "--event-burst", "1000")
    async with aiohttp.ClientSession() as s:
        sid = await connected_session(s, relay, "bob")
        assert await post(s, relay, sid, '421["room:join",{"room":"conversation:1"}]') == 200
        assert any(p.startswith("431") for p in await get(s, relay, sid))
        sender = socketio.AsyncClient(reconnection=False)
        await sender.connect(relay.url, transports=["websocket"], auth={"token": mint_token("alice")}, wait_timeout=TIMEOUT)
        await sender.call("room:join", {"room": ROOM}, timeout=TIMEOUT)
        count = 300

        async def send_all():
            for i in range(count):
                await sender.emit("chat:tick", {"room": ROOM, "n": i})
                if i % 10 == 0:
                    await asyncio.sleep(0.005)

        received: list[int] = []

        def take(packets):
            for p in packets:
                if p.startswith('42["chat:tick"'):
                    received.append(json.loads(p[2:])[1]["n"])

        sending = asyncio.create_task(send_all())
        take(await get(s, relay, sid))
        ws = await ws_connect(f"ws://127.0.0.1:{relay.port}/socket.io/?EIO=4&transport=websocket&sid={sid}", compression=None)
        poll = asyncio.create_task(get(s, relay, sid))
        await ws.send("2probe")
        assert await asyncio.wait_for(ws.recv(), TIMEOUT) == "3probe"
        take(await asyncio.wait_for(poll, TIMEOUT))  # released with a noop (after what it held)
        await ws.send("5")
        await sending
        deadline = asyncio.get_running_loop().time() + TIMEOUT
        while len(received) < count and asyncio.get_running_loop().time() < deadline:
            msg = await asyncio.wait_for(ws.recv(), TIMEOUT)
            if msg == "2":
                await ws.send("3")
            else:
                take([msg])
        await ws.close()
        await sender.disconnect()
        assert received == list(range(count)), f"{len(received)} events; first gaps: {sorted(set(range(count)) - set(received))[:10]}"


async def _scenario(relay, **connect_kwargs):
    alice = socketio.AsyncClient(reconnection=False)
    bob = socketio.AsyncClient(reconnection=False)
    got: asyncio.Queue = asyncio.Queue()
    bob.on("message:reaction", lambda data: got.put_nowait(("message:reaction", data)))
    bob.on("notification:new", lambda data: got.put_nowait(("notification:new", data)))
    bob.on("message:delivered", lambda data: got.put_nowait(("message:delivered", data)))
    bob.on("presence:join", lambda data: got.put_nowait(("presence:join", data)))
    await bob.connect(relay.url, auth={"token": mint_token("bob")}, wait_timeout=TIMEOUT, **connect_kwargs)
    await alice.connect(relay.url, auth={"token": mint_token("alice")}, wait_timeout=TIMEOUT, **connect_kwargs)
    try:
        assert (await bob.call("room:join", {"room": ROOM}, timeout=TIMEOUT))["ok"]
        assert (await alice.call("room:join", {"room": ROOM}, timeout=TIMEOUT))["ok"]
        assert (await asyncio.wait_for(got.get(), TIMEOUT))[0] == "presence:join"
        assert (await alice.call("message:reaction", {"room": ROOM, "messageId": "m1", "emoji": "👍", "action": "add"}, timeout=TIMEOUT))["ok"]
        name, data = await asyncio.wait_for(got.get(), TIMEOUT)
        assert name == "message:reaction" and data["from"] == "alice", (name, data)
        ack = await alice.call("message:delivered", {"room": ROOM, "messageId": "m1", "authorId": "bob"}, timeout=TIMEOUT)
        assert ack["ok"] and ack["id"] >= 1, ack
        name, data = await asyncio.wait_for(got.get(), TIMEOUT)
        assert name == "message:delivered" and data["messageId"] == "m1", (name, data)
        status, body = await emit_api(relay, "notification:new", {"user": "bob"}, {"title": "hi"})
        assert status == 200 and body["recipients"] == 1, body
        name, data = await asyncio.wait_for(got.get(), TIMEOUT)
        assert name == "notification:new" and data["title"] == "hi", (name, data)
        return alice.transport(), bob.transport()
    finally:
        await alice.disconnect()
        await bob.disconnect()


@async_test
async def test_python_socketio_default_transports_poll_then_upgrade(start_relay):
    relay = start_relay()
    transports = await _scenario(relay)
    assert transports == ("websocket", "websocket"), transports


@async_test
async def test_python_socketio_polling_only(start_relay):
    relay = start_relay()
    transports = await _scenario(relay, transports=["polling"])
    assert transports == ("polling", "polling"), transports


@async_test
async def test_an_abandoned_poller_is_closed_on_time(start_relay):
    """A poller that stops polling never takes its ping: after pingInterval + pingTimeout its
    session ends, its presence goes, its admission slot is released."""
    relay = start_relay("--ping-interval", "300", "--ping-timeout", "300")
    watcher = socketio.AsyncClient(reconnection=False)
    left: asyncio.Queue = asyncio.Queue()
    watcher.on("presence:leave", lambda data: left.put_nowait(data))
    await watcher.connect(relay.url, transports=["websocket"], auth={"token": mint_token("watcher")}, wait_timeout=TIMEOUT)
    try:
        assert (await watcher.call("room:join", {"room": ROOM}, timeout=TIMEOUT))["ok"]
        async with aiohttp.ClientSession() as s:
            sid = await connected_session(s, relay, "ghost")
            assert await post(s, relay, sid, '421["room:join",{"room":"conversation:1"}]') == 200
            assert any(p.startswith("431") for p in await get(s, relay, sid))
            started = asyncio.get_running_loop().time()
            # No more GETs: the ping waits in the buffer, the pong never comes.
            data = await asyncio.wait_for(left.get(), TIMEOUT)
            assert data["user"] == "ghost", data
            assert asyncio.get_running_loop().time() - started < 3.0
            async with s.get(f"{base(relay)}&sid={sid}") as r:
                assert r.status == 400 or "1" in (await r.text()).split(SEP)
    finally:
        await watcher.disconnect()


@async_test
async def test_a_refused_connect_reaches_a_polling_client(relay):
    """A CONNECT refused before the client polls again: its next GET gets the CONNECT_ERROR,
    once, and the session stays the client's (as the reference server keeps it): a CONNECT with
    a token that works is answered on it."""
    async with aiohttp.ClientSession() as session:
        sid = await handshake(session, relay)
        assert await post(session, relay, sid, "40" + json.dumps({"token": mint_token("x", ttl=-60)})) == 200
        await asyncio.sleep(0.3)  # the refusal is decided meanwhile
        packets = await get(session, relay, sid)
        assert len(packets) == 1 and packets[0].startswith("44") and "token_expired" in packets[0], packets
        assert await post(session, relay, sid, "40" + json.dumps({"token": mint_token("x")})) == 200
        packets = await get(session, relay, sid)
        assert packets[0].startswith("40{"), packets
