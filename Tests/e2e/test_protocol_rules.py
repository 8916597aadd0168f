"""What the official Engine.IO and Socket.IO protocol test suites check, written here against the
relay's default settings (apart from a short heartbeat), so it cannot regress unseen. The suites
themselves run beside the project (docs/CONFORMANCE.md, Tests/conformance/run_protocol_suites.py).

Not copied: each rule is asserted in this project's own words, with Relay's JWT on the upgrade.
"""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed

from helpers import TIMEOUT, async_test, mint_token
from test_hostile_matrix import assert_disconnects, disconnects

SEP = "\x1e"
PING_INTERVAL, PING_TIMEOUT = 300, 200
UNKNOWN = {"code": 1, "message": "Session ID unknown"}


# The suites' heartbeat; one listed origin for the CORS rule.
RELAY_ARGS = ["--ping-interval", str(PING_INTERVAL), "--ping-timeout", str(PING_TIMEOUT), "--allowed-origins", "https://listed.example"]


def polling(relay, sid: str | None = None) -> str:
    url = f"http://127.0.0.1:{relay.port}/socket.io/?EIO=4&transport=polling"
    return url + (f"&sid={sid}" if sid else "")


def session() -> aiohttp.ClientSession:
    return aiohttp.ClientSession(trust_env=False, timeout=aiohttp.ClientTimeout(total=TIMEOUT))


async def open_polling(http, relay) -> str:
    async with http.get(polling(relay)) as r:
        text = await r.text()
    assert r.status == 200 and text.startswith("0{"), (r.status, text)
    return json.loads(text[1:])["sid"]


async def get(http, relay, sid) -> tuple[int, str]:
    async with http.get(polling(relay, sid)) as r:
        return r.status, await r.text()


async def post(http, relay, sid, body: str) -> tuple[int, str]:
    async with http.post(polling(relay, sid), data=body.encode()) as r:
        return r.status, await r.text()


async def websocket(relay, sid: str | None = None, token: str | None = None):
    url = f"ws://127.0.0.1:{relay.port}/socket.io/?EIO=4&transport=websocket" + (f"&sid={sid}" if sid else "")
    headers = {"authorization": f"Bearer {token}"} if token else None
    return await ws_connect(url, compression=None, proxy=None, open_timeout=TIMEOUT, ping_interval=None, additional_headers=headers)


async def recv(ws) -> str:
    return await asyncio.wait_for(ws.recv(), TIMEOUT)


async def close_code(ws) -> int | None:
    try:
        while True:
            await asyncio.wait_for(ws.recv(), TIMEOUT)
    except ConnectionClosed as exc:
        return exc.rcvd.code if exc.rcvd is not None else None


async def connected_websocket(relay, user: str):
    """A WebSocket session past CONNECT (the open packet and the CONNECT answer read)."""
    ws = await websocket(relay, token=mint_token(user))
    assert (await recv(ws)).startswith("0{")
    await ws.send("40")
    answer = await recv(ws)
    assert answer.startswith("40{"), answer
    return ws


# --------------------------------------------------------------------------------------------
# Engine.IO over long-polling


@async_test
async def test_the_handshake_and_its_refusals(relay):
    async with session() as http:
        async with http.get(polling(relay)) as r:
            text = await r.text()
        opened = json.loads(text[1:])
        assert set(opened) == {"sid", "upgrades", "pingInterval", "pingTimeout", "maxPayload"}, opened
        assert (opened["upgrades"], opened["pingInterval"], opened["pingTimeout"], opened["maxPayload"]) == (["websocket"], 300, 200, 1000000)
        base = f"http://127.0.0.1:{relay.port}/socket.io/"
        for query in ("?transport=polling", "?EIO=abc&transport=polling", "?EIO=4", "?EIO=4&transport=abc"):
            async with http.get(base + query) as r:
                assert r.status == 400, query
        for method in ("POST", "PUT"):
            async with http.request(method, polling(relay)) as r:
                assert r.status == 400, method


@async_test
async def test_ping_pong_then_the_ping_timeout_ends_the_session(start_relay):
    relay = start_relay("--ping-interval", str(PING_INTERVAL), "--ping-timeout", str(PING_TIMEOUT))
    async with session() as http:
        before = await disconnects(relay)
        sid = await open_polling(http, relay)
        for _ in range(3):
            assert await get(http, relay, sid) == (200, "2")
            assert await post(http, relay, sid, "3") == (200, "ok")
        # No more polling: the next ping goes unanswered; once the relay counted the timeout
        # (no sleeping on its clock), the next GET finds no session.
        await assert_disconnects(relay, before, "ping_timeout", 1)
        status, text = await get(http, relay, sid)
        assert status == 400 and json.loads(text) == UNKNOWN, (status, text)


@async_test
async def test_a_malformed_body_is_refused_and_ends_the_session(relay):
    async with session() as http:
        sid = await open_polling(http, relay)
        status, _ = await post(http, relay, sid, "abc")
        assert status == 400
        status, text = await get(http, relay, sid)
        assert status == 400 and json.loads(text) == UNKNOWN, (status, text)


@async_test
async def test_two_gets_at_once_end_the_session(relay):
    async with session() as http:
        sid = await open_polling(http, relay)
        answers = sorted(await asyncio.gather(get(http, relay, sid), get(http, relay, sid)), key=lambda a: a[0])
        assert answers[0] == (200, "1") and answers[1][0] == 400, answers
        assert (await get(http, relay, sid))[0] == 400


@async_test
async def test_the_clients_close_answers_the_held_get_with_a_noop(relay):
    """Whether the GET is held when the close arrives or comes just after it (the suite sends
    both at once), it gets a noop; the GET after that, 400."""
    async with session() as http:
        sid = await open_polling(http, relay)
        answers = await asyncio.gather(get(http, relay, sid), post(http, relay, sid, "1"))
        assert answers == [(200, "6"), (200, "ok")], answers
        assert (await get(http, relay, sid))[0] == 400
        late = await open_polling(http, relay)
        assert await post(http, relay, late, "1") == (200, "ok")
        assert await get(http, relay, late) == (200, "6"), "a GET that arrives after the close"
        assert (await get(http, relay, late))[0] == 400


@async_test
async def test_a_refused_connect_reaches_the_next_get_and_the_session_stays(relay):
    """Not in the suites, and kept: the client must hear why (else it retries the same token),
    and the session stays open for another CONNECT, as the reference server keeps it."""
    async with session() as http:
        sid = await open_polling(http, relay)
        assert await post(http, relay, sid, "40" + json.dumps({"token": mint_token("old", ttl=-3600)})) == (200, "ok")
        packets: list[str] = []
        while not any(p.startswith("44") for p in packets) and len(packets) < 10:  # pings may come first
            status, text = await get(http, relay, sid)
            assert status == 200, (status, text, packets)
            packets += text.split(SEP)
        refusals = [p for p in packets if p.startswith("44")]
        assert len(refusals) == 1 and json.loads(refusals[0][2:])["data"]["code"] == "token_expired", packets
        assert "1" not in packets, packets
        assert await post(http, relay, sid, "40" + json.dumps({"token": mint_token("new")})) == (200, "ok")
        answer: list[str] = []
        while not any(p.startswith("40") for p in answer) and len(answer) < 10:
            status, text = await get(http, relay, sid)
            assert status == 200, (status, text, answer)
            answer += text.split(SEP)
        assert any(p.startswith("40{") for p in answer), answer


# --------------------------------------------------------------------------------------------
# Engine.IO over WebSocket, and the upgrade


@async_test
async def test_websocket_handshake_heartbeat_close_and_timeout(relay):
    ws = await websocket(relay)
    opened = json.loads((await recv(ws))[1:])
    assert opened["upgrades"] == [] and opened["pingInterval"] == 300
    for _ in range(3):
        assert await recv(ws) == "2"
        await ws.send("3")
    await ws.send("1")
    assert await close_code(ws) is not None
    silent = await websocket(relay)
    await recv(silent)
    assert await close_code(silent) in (4000, 4001), "no pong (or no CONNECT): closed"
    broken = await websocket(relay)
    await recv(broken)
    await broken.send("abc")
    assert await close_code(broken) == 1002


@async_test
async def test_the_upgrade_and_what_comes_after_it(relay):
    async with session() as http:
        sid = await open_polling(http, relay)
        ws = await websocket(relay, sid)
        await ws.send("2probe")
        assert await recv(ws) == "3probe"
        assert await get(http, relay, sid) == (200, "6"), "a GET during the probe: a noop"
        await ws.send("5")
        await ws.send("40" + json.dumps({"token": mint_token("upgrader")}))
        answer = await recv(ws)
        while answer in ("2", "6"):
            answer = await recv(ws)
        assert answer.startswith("40{"), answer
        # A second WebSocket for the same sid after the upgrade is refused.
        other = await websocket(relay, sid)
        assert await close_code(other) is not None
        await ws.close()
        # A client that was not polling when it upgraded gets 400 for a later GET.
        quiet = await open_polling(http, relay)
        ws2 = await websocket(relay, quiet)
        await ws2.send("2probe")
        await ws2.send("5")
        assert await recv(ws2) == "3probe"
        status, text = await get(http, relay, quiet)
        assert status == 400 and json.loads(text) == UNKNOWN
        await ws2.close()


# --------------------------------------------------------------------------------------------
# Socket.IO


@async_test
async def test_an_unknown_namespace_is_refused_in_the_protocols_words(relay):
    ws = await websocket(relay, token=mint_token("ns"))
    await recv(ws)
    await ws.send("40/random")
    assert await recv(ws) == '44/random,{"message":"Invalid namespace"}'
    await ws.send("40")
    assert (await recv(ws)).startswith("40{"), "the connection stays usable"
    await ws.close()


@pytest.mark.parametrize("packet", ["4abc", "42{}", '42abc["message-with-ack",1,"2",{"3":[false]}]'])
@async_test
async def test_a_malformed_packet_closes_the_connection(relay, packet):
    ws = await connected_websocket(relay, "malformed")
    await ws.send(packet)
    assert await close_code(ws) == 1002


@async_test
async def test_an_invalid_handshake_is_refused_and_the_third_refusal_closes(relay):
    """Before CONNECT a packet that does not parse refuses the CONNECT (`44{…invalid_packet}`);
    the session stays open for another `40`, as after any refusal, until the `connect-refusals`th
    (default 3), which closes it with 4003."""
    ws = await websocket(relay)
    await recv(ws)
    for _ in range(2):
        await ws.send("4abc")
        refusal = await recv(ws)
        assert refusal.startswith("44{") and json.loads(refusal[2:])["data"]["code"] == "invalid_packet", refusal
        await ws.send("2open")
        assert await recv(ws) == "3open", "still open"
    await ws.send("4abc")
    assert (await recv(ws)).startswith("44{")
    assert await close_code(ws) == 4003


@async_test
async def test_disconnect_leaves_the_engine_io_session_open(relay):
    """`41`: the socket leaves, the heartbeat goes on, and a new CONNECT works on the same
    session (socket.io-client-swift's `socket.disconnect()` then `socket.connect()`)."""
    ws = await websocket(relay, token=mint_token("leaver"))
    assert (await recv(ws)).startswith("0{")
    await ws.send("40")
    first = json.loads((await recv(ws))[2:])["sid"]
    await ws.send("41")
    assert await recv(ws) == "2", "the session is still open: its next ping"
    await ws.send("3")
    await ws.send("40")
    answer = await recv(ws)
    assert answer.startswith("40{") and json.loads(answer[2:])["sid"] != first, (first, answer)
    await ws.send('421["room:join",{"room":"conversation:again"}]')
    ack = await recv(ws)
    while ack == "2":
        await ws.send("3")
        ack = await recv(ws)
    assert json.loads(ack[3:])[0]["ok"] is True, ack
    await ws.close()


# --------------------------------------------------------------------------------------------
# CORS


@async_test
async def test_cors_credentials_only_for_listed_origins(relay, start_relay):
    async with session() as http:
        async with http.get(polling(relay), headers={"origin": "https://listed.example"}) as r:
            assert r.headers.get("access-control-allow-origin") == "https://listed.example"
            assert r.headers.get("access-control-allow-credentials") == "true"
        open_relay = start_relay("--allowed-origins", "*")
        async with http.get(polling(open_relay), headers={"origin": "https://anyone.example"}) as r:
            assert r.status == 200
            assert r.headers.get("access-control-allow-origin") == "*"
            assert "access-control-allow-credentials" not in r.headers, "'*' never with credentials"
